"""Kafka and Redis in Docker containers for the test fixtures (tests/conftest.py) and the container tests.

Containers always run with host networking and listen on 127.0.0.1 only: the engines these tests run on
(scripts/docker-local) have no bridge network at all. The images are anything that configures like the official
ones: `apache/kafka` (every KAFKA_FOO_BAR variable becomes `foo.bar`) and `redis` (`redis-server [options]`);
scripts/docker-local builds local stand-ins for both.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import time
import warnings
from collections.abc import Iterator
from typing import Any

from tests.support.ports import free_ports

DEFAULT_KAFKA_IMAGE = "apache/kafka:4.1.1"
DEFAULT_REDIS_IMAGE = "redis:7"


def kafka_env(port: int, controller_port: int) -> dict[str, str]:
    """A single-node KRaft broker on 127.0.0.1:`port`. apache/kafka replaces its whole default config as soon as
    one KAFKA_* variable is set, so everything a broker needs is here."""
    return {
        "CLUSTER_ID": "Y29vbGFudC10ZXN0LTAwMDE",
        "KAFKA_NODE_ID": "1",
        "KAFKA_PROCESS_ROLES": "broker,controller",
        "KAFKA_CONTROLLER_QUORUM_VOTERS": f"1@127.0.0.1:{controller_port}",
        "KAFKA_LISTENERS": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "KAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://127.0.0.1:{port}",
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
        "KAFKA_INTER_BROKER_LISTENER_NAME": "PLAINTEXT",
        "KAFKA_LOG_DIRS": "/tmp/kraft-combined-logs",
        "KAFKA_NUM_PARTITIONS": "1",
        "KAFKA_AUTO_CREATE_TOPICS_ENABLE": "true",
        "KAFKA_DEFAULT_REPLICATION_FACTOR": "1",
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
        "KAFKA_OFFSETS_TOPIC_NUM_PARTITIONS": "1",
        "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "1",
        "KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR": "1",
        "KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR": "1",
        "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
        "KAFKA_HEAP_OPTS": "-Xms256m -Xmx512m",
    }


def redis_command(port: int) -> list[str]:
    return ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no"]


@functools.cache
def docker_ok() -> bool:
    """A Docker engine answers (docker-py leaks its socket when it does not: that ResourceWarning is kept out)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        try:
            import docker

            client = docker.from_env(timeout=3)
            try:
                return bool(client.ping())
            finally:
                client.close()
        except Exception:
            return False
        finally:
            gc.collect()


@functools.cache
def image_available(image: str) -> bool:
    """`image` is on the engine, or can be pulled (False without a reachable registry: the caller falls back)."""
    import docker
    from docker.errors import DockerException

    client = docker.from_env(timeout=120)
    try:
        client.images.get(image)
        return True
    except DockerException:
        try:
            client.images.pull(image)
            return True
        except DockerException:
            return False
    finally:
        client.close()


def _wait(ready: Any, what: str, container: Any, timeout: float) -> None:
    """Poll `ready()` until true; fail with the container's log if it exits or `timeout` s pass."""
    deadline = time.monotonic() + timeout
    while not ready():
        wrapped = container.get_wrapped_container()
        wrapped.reload()
        if wrapped.status not in ("created", "running"):
            raise RuntimeError(f"{what} container exited: {wrapped.logs().decode(errors='replace')[-2000:]}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not answer within {timeout:.0f} s: "
                               f"{wrapped.logs().decode(errors='replace')[-2000:]}")
        time.sleep(0.5)


def _kafka_answers(bootstrap: str) -> bool:
    async def probe() -> bool:
        from aiokafka.admin import AIOKafkaAdminClient

        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=3000)
        try:
            await admin.start()
            await admin.list_topics()
            return bool(admin._client.cluster.brokers())
        except Exception:
            return False
        finally:
            await admin.close()

    return asyncio.run(probe())


def _redis_answers(port: int) -> bool:
    import redis

    client = redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=1)
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
    finally:
        client.close()


def _container(image: str) -> Any:
    from testcontainers.core.config import testcontainers_config
    from testcontainers.core.container import DockerContainer

    # Ryuk (testcontainers' reaper) is pulled from Docker Hub and reached through a mapped port: neither exists
    # on a registry-less, bridge-less engine. The containers are removed on exit here anyway.
    if not image_available(testcontainers_config.ryuk_image):
        testcontainers_config.ryuk_disabled = True
    return DockerContainer(image).with_kwargs(network_mode="host")


PORT_TAKEN = "Address already in use"
"""In a container's log when its free port was taken between choosing it and binding it (a busy shared host)."""


@contextlib.contextmanager
def _started(make: Any, ready: Any, what: str, timeout: float, attempts: int = 3) -> Iterator[Any]:
    """Start `make(port)` with a fresh free port until it answers `ready(port)`; a port taken meanwhile by
    another process is retried on new ports, anything else fails at once. Yields the port."""
    for attempt in range(attempts):
        port = free_ports(2)
        with contextlib.ExitStack() as stack:
            container = stack.enter_context(make(port))
            try:
                _wait(lambda: ready(port), what, container, timeout)  # noqa: B023 - called before the next loop
            except RuntimeError as exc:
                if PORT_TAKEN in str(exc) and attempt + 1 < attempts:
                    continue
                raise
            yield port
            return


@contextlib.contextmanager
def kafka_container(image: str, timeout: float = 120.0) -> Iterator[str]:
    """A throwaway broker from `image`; yields its bootstrap address once it answers a metadata request."""

    def make(port: int) -> Any:
        container = _container(image)
        for key, value in kafka_env(port, port + 1).items():
            container.with_env(key, value)
        return container

    with _started(make, lambda port: _kafka_answers(f"127.0.0.1:{port}"), f"kafka ({image})", timeout) as port:
        yield f"127.0.0.1:{port}"


@contextlib.contextmanager
def redis_container(image: str, timeout: float = 60.0) -> Iterator[str]:
    """A throwaway Redis from `image`; yields its URL once it answers PING."""

    def make(port: int) -> Any:
        return _container(image).with_command(redis_command(port))

    with _started(make, _redis_answers, f"redis ({image})", timeout) as port:
        yield f"redis://127.0.0.1:{port}/0"


def built_image(var: str) -> str:
    """The image named by `var` (`export $(scripts/docker-local build)` sets COOLANT_IMAGE, KAFKA_IMAGE and
    REDIS_IMAGE), on an engine that answers. Missing: a failure under REQUIRE_CONTAINERS=1 (scripts/test), else
    a skip."""
    import os

    import pytest

    image = os.environ.get(var)
    why = None
    if not image:
        why = f"{var} is not set (run `export $(scripts/docker-local build)`)"
    elif not docker_ok():
        why = "no Docker engine answers (scripts/docker-local start)"
    elif not image_available(image):
        why = f"image {image} is not on the engine (scripts/docker-local build)"
    if why is not None:
        if os.environ.get("REQUIRE_CONTAINERS") == "1":
            pytest.fail(f"container test: {why}", pytrace=False)
        pytest.skip(why)
    assert image is not None
    return image


def docker(*args: str, timeout: float = 120.0, check: bool = True) -> str:
    """`docker ARGS`; returns stdout, raises with stderr when it fails and `check`."""
    import subprocess

    proc = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)} failed (rc={proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout
