"""The test suite's set-up: the shared fixtures as plugins from tests/support/, every service test marked, the
Hypothesis profile.

``kafka_bootstrap`` ("host:port") and ``redis_url`` (tests/support/kafka.py, redis.py) are each resolved in this
order:
1. the env var ``KAFKA_BOOTSTRAP`` / ``REDIS_URL``;
2. testcontainers, when a Docker engine answers and has (or can pull) the image: ``KAFKA_TEST_IMAGE`` (default
   apache/kafka) / ``REDIS_TEST_IMAGE`` (default redis:7), run with host networking on free 127.0.0.1 ports
   (tests/containers_support.py; ``scripts/docker-local build`` makes local images for engines with no registry);
3. ``scripts/kafka-local start`` / ``scripts/redis-local start`` (idempotent; the services are left running);
4. otherwise the test fails when ``REQUIRE_INTEGRATION=1``, else it is skipped.

A test module whose own ``pytestmark`` makes ``-m`` deselect all its tests is not imported (tests/support/selection.py):
``-m 'not integration'`` does not pay for the integration modules' imports (LiteLLM's among them).

Hypothesis runs the ``ci`` profile (full example counts) unless ``--hypothesis-profile quick`` or
``HYPOTHESIS_PROFILE=quick`` asks for the quick one (tests/support/hypothesis.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.support import hypothesis as hypothesis_profiles
from tests.support.selection import ignored, litellm_first, scope, service_free

ROOT = Path(__file__).resolve().parent.parent

pytest_plugins = ["tests.support.kafka", "tests.support.redis", "tests.support.worker"]
"""The fixtures every test folder shares: `kafka_bootstrap`, `redis_url`, `case` (tests/support/)."""

hypothesis_profiles.load()

# LiteLLM's bundled model cost map, not a fetch from GitHub at its import (a network wait, or a connection error and
# retries in a thread where there is no network, and a map that can change under a running test); the proxies and
# interpreters the tests start inherit it
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

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


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Skip importing a module `-m` deselects whole (tests/support/selection.py); None lets pytest decide."""
    return True if ignored(collection_path, config.getoption("markexpr", "") or "") else None


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadfile` in a service-free run (`-m` leaves out `integration`): a file per process as usual, but the
    LiteLLM test modules all in one, so that only one process imports LiteLLM, and that unit handed out first
    (tests/support/selection.py). Any other run (CI's, where they start proxies of minutes each) is scheduled by
    pytest-xdist alone (None)."""
    if config.getoption("dist", None) != "loadfile" or not service_free(config.getoption("markexpr", "") or ""):
        return None
    from xdist.scheduler import LoadFileScheduling

    class LiteLLMTogether(LoadFileScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return scope(nodeid)

        def _assign_work_unit(self, node: Any) -> None:
            litellm_first(self.workqueue)
            super()._assign_work_unit(node)

    return LiteLLMTogether(config, log)
