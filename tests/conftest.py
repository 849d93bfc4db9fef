"""Session fixtures for integration tests: ``kafka_bootstrap`` ("host:port") and ``redis_url``.

Each is resolved in this order:
1. the env var ``KAFKA_BOOTSTRAP`` / ``REDIS_URL``;
2. testcontainers, when a Docker engine answers and has (or can pull) the image: ``KAFKA_TEST_IMAGE`` (default
   apache/kafka) / ``REDIS_TEST_IMAGE`` (default redis:7), run with host networking on free 127.0.0.1 ports
   (tests/containers_support.py; ``scripts/docker-local build`` makes local images for engines with no registry);
3. ``scripts/kafka-local start`` / ``scripts/redis-local start`` (idempotent; the services are left running);
4. otherwise the test fails when ``REQUIRE_INTEGRATION=1``, else it is skipped.

Hypothesis runs the ``ci`` profile (full example counts) unless ``--hypothesis-profile quick`` or
``HYPOTHESIS_PROFILE=quick`` asks for the quick one (tests/support/hypothesis.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests import containers_support as containers
from tests.support import hypothesis as hypothesis_profiles
from tests.support.brokers import unavailable

if TYPE_CHECKING:
    from tests.integration.harness import Case

ROOT = Path(__file__).resolve().parent.parent

hypothesis_profiles.load()

SERVICE_FIXTURES = frozenset({"kafka_bootstrap", "redis_url"})
"""A test that asks for one of these (directly or through another fixture) needs a service."""


@pytest.hookimpl(tryfirst=True)  # before `-m` selects on the markers
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that needs Kafka or Redis carries the `integration` marker, so `-m 'not integration'` runs
    exactly the service-free part. (Tests that need a service another way, a Docker engine, a redis-server of
    their own, a LiteLLM proxy, are marked where they are written.)"""
    for item in items:
        if SERVICE_FIXTURES & set(getattr(item, "fixturenames", ())) and item.get_closest_marker("integration") is None:
            item.add_marker(pytest.mark.integration)


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
    image = os.environ.get("KAFKA_TEST_IMAGE", containers.DEFAULT_KAFKA_IMAGE)
    if containers.docker_ok() and containers.image_available(image):
        with containers.kafka_container(image) as bootstrap:
            yield bootstrap
        return
    try:
        addr = _start_local("kafka-local", "KAFKA_BOOTSTRAP")
    except RuntimeError as exc:
        unavailable(f"kafka unavailable: no KAFKA_BOOTSTRAP, no Docker engine with a Kafka image, and {exc}")
    yield addr


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    if url := os.environ.get("REDIS_URL"):
        yield url
        return
    image = os.environ.get("REDIS_TEST_IMAGE", containers.DEFAULT_REDIS_IMAGE)
    if containers.docker_ok() and containers.image_available(image):
        with containers.redis_container(image) as url:
            yield url
        return
    try:
        url = _start_local("redis-local", "REDIS_URL")
    except RuntimeError as exc:
        unavailable(f"redis unavailable: no REDIS_URL, no Docker engine with a Redis image, and {exc}")
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
