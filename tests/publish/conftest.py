"""Fixtures for the publisher tests: unique topic prefixes, a consumer helper, and a spare broker.

The spare broker is a second `scripts/kafka-local` node (tests/support/brokers.py: ports free at run time, its own
state directory) that the outage tests stop and start at will, so the shared `kafka_bootstrap` broker is never
disturbed.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer

from coolant.schemas import Outcome
from tests.support.brokers import LocalKafka, unavailable

ROOT = Path(__file__).resolve().parents[2]
HANG_GUARD_S = 30.0
"""How long a test waits for a call that must return before it calls the call hung: a liveness guard, not a speed
check (speed figures live in benchmarks)."""


@pytest.fixture
def prefix() -> str:
    """A topic prefix no other test (or earlier run) uses."""
    return f"t{uuid.uuid4().hex[:12]}."


def outcome(i: int, deployment: str = "dep-a", **kw: Any) -> Outcome:
    fields: dict[str, Any] = {
        "event_id": f"ev-{i:06d}",
        "ts": 1_767_225_600.0 + i / 10,
        "deployment_id": deployment,
        "model_group": "group-1",
        "ok": i % 3 != 0,
    }
    if i % 3 == 0:
        fields.update(status_code=429, exception_type="RateLimitError", exception_message="slow down")
    fields.update(kw)
    return Outcome(**fields)


async def consume(
    bootstrap: str, topics: Iterable[str], n: int, timeout: float = 30.0, settle: float = 0.5
) -> list[Any]:
    """Read `topics` from the beginning until `n` messages arrived (then `settle` s more, to see extras)."""
    consumer = AIOKafkaConsumer(
        *topics, bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest", metadata_max_age_ms=500
    )
    await consumer.start()
    out: list[Any] = []
    try:
        deadline = time.monotonic() + timeout
        while len(out) < n and time.monotonic() < deadline:
            for messages in (await consumer.getmany(timeout_ms=300)).values():
                out.extend(messages)
        end = time.monotonic() + settle
        while time.monotonic() < end:
            for messages in (await consumer.getmany(timeout_ms=100)).values():
                out.extend(messages)
    finally:
        await consumer.stop()
    return out


async def wait_until(predicate: Any, timeout: float, what: str) -> float:
    """Poll `predicate()` every 50 ms; returns the seconds waited, fails the test on timeout."""
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        await asyncio.sleep(0.05)
    return time.monotonic() - start


class SpareKafka(LocalKafka):
    """The spare broker, down until a test starts it. Its first start is where a machine that cannot run one
    shows: that makes the test unavailable (a skip, or a failure under `REQUIRE_INTEGRATION=1`), as a missing
    shared broker does; a later start that fails is the test's own error."""

    started = False

    def start(self) -> float:
        if self.started:
            return super().start()
        try:
            took = super().start()
        except RuntimeError as exc:
            unavailable(str(exc))
        self.started = True
        return took


@pytest.fixture(scope="module")
def spare_kafka(tmp_path_factory: pytest.TempPathFactory, kafka_bootstrap: str) -> Iterator[LocalKafka]:
    """Down at first (no start and stop just to prove it can run: a broker's start is the costliest step here);
    each test starts and stops it as it needs. `kafka_bootstrap`: the shared broker is up, so its jars are there
    to reuse."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        unavailable("spare kafka unavailable: no java")
    spare = SpareKafka(tmp_path_factory.mktemp("spare-kafka"))
    try:
        yield spare
    finally:
        spare.stop()
