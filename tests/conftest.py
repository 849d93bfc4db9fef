"""Session fixtures for integration tests: ``kafka_bootstrap`` ("host:port") and ``redis_url``.

Each is resolved in this order:
1. the env var ``KAFKA_BOOTSTRAP`` / ``REDIS_URL``;
2. testcontainers, when a Docker engine answers (image overridable: ``KAFKA_TEST_IMAGE`` / ``REDIS_TEST_IMAGE``);
3. ``scripts/kafka-local start`` / ``scripts/redis-local start`` (idempotent; the services are left running);
4. otherwise the test fails when ``REQUIRE_INTEGRATION=1``, else it is skipped.
"""

from __future__ import annotations

import functools
import gc
import os
import subprocess
import sys
import warnings
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import pytest

if TYPE_CHECKING:
    from tests.integration.harness import Case

ROOT = Path(__file__).resolve().parent.parent


@functools.cache
def _docker_ok() -> bool:
    # docker-py leaks its socket when the engine is absent: keep that ResourceWarning out of the tests
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


def _unavailable(what: str, why: str) -> NoReturn:
    msg = f"{what} unavailable: {why}"
    if os.environ.get("REQUIRE_INTEGRATION") == "1":
        pytest.fail(msg, pytrace=False)
    pytest.skip(msg)


def _start_local(script: str, key: str) -> str:
    """Run ``scripts/<script> start`` and return the value of its ``KEY=...`` stdout line."""
    try:
        proc = subprocess.run(
            [str(ROOT / "scripts" / script), "start"],
            capture_output=True,
            text=True,
            timeout=900,  # the first Kafka start downloads jars with Maven
            env={**os.environ, "PYTHON": os.environ.get("PYTHON", sys.executable)},
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RuntimeError(f"scripts/{script} start: {exc}") from None
    if proc.returncode == 0:
        for line in reversed(proc.stdout.splitlines()):
            if line.startswith(f"{key}="):
                return line.split("=", 1)[1].strip()
    raise RuntimeError(f"scripts/{script} start failed (rc={proc.returncode}): {proc.stderr.strip()[-1500:]}")


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    if addr := os.environ.get("KAFKA_BOOTSTRAP"):
        yield addr
        return
    if _docker_ok():
        try:
            from testcontainers.community.kafka import KafkaContainer
        except ImportError:
            from testcontainers.kafka import KafkaContainer
        image = os.environ.get("KAFKA_TEST_IMAGE", "confluentinc/cp-kafka:7.6.0")
        with KafkaContainer(image).with_kraft() as kafka:
            yield kafka.get_bootstrap_server()
        return
    try:
        addr = _start_local("kafka-local", "KAFKA_BOOTSTRAP")
    except RuntimeError as exc:
        _unavailable("kafka", f"no KAFKA_BOOTSTRAP, no Docker engine, and {exc}")
    yield addr


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    if url := os.environ.get("REDIS_URL"):
        yield url
        return
    if _docker_ok():
        try:
            from testcontainers.community.redis import RedisContainer
        except ImportError:
            from testcontainers.redis import RedisContainer
        with RedisContainer(os.environ.get("REDIS_TEST_IMAGE", "redis:7")) as redis:
            port = redis.get_exposed_port(redis.port)
            yield f"redis://{redis.get_container_host_ip()}:{port}/0"
        return
    try:
        url = _start_local("redis-local", "REDIS_URL")
    except RuntimeError as exc:
        _unavailable("redis", f"no REDIS_URL, no Docker engine, and {exc}")
    yield url


@pytest.fixture
async def case(tmp_path: Path, redis_url: str) -> AsyncIterator[Case]:
    """One live-pipeline test's own topics, workers and services (tests/integration/harness.py), cleaned up after."""
    from tests.integration.harness import Case

    c = Case(tmp_path)
    try:
        yield c
    finally:
        await c.close(redis_url)
