"""Fixtures for the publisher tests: unique topic prefixes, a consumer helper, and a spare broker.

The spare broker is a second `scripts/kafka-local` node (own port, own state directory) that the
outage tests stop and start at will, so the shared `kafka_bootstrap` broker is never disturbed.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer

from coolant.schemas import Outcome

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


def _free_port_pair() -> int:
    """A port p with p and p+1 free (kafka-local puts the controller on p+1)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port >= 65535:
            continue
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + 1))
        except OSError:
            continue
        return port
    raise RuntimeError("no free port pair")


class SpareKafka:
    """A second local broker the test controls: `start()`, `stop()`, `bootstrap`."""

    def __init__(self, state_dir: Path) -> None:
        self.port = _free_port_pair()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.state_dir = state_dir
        self.env = {
            **os.environ,
            "KAFKA_PORT": str(self.port),
            "KAFKA_STATE_DIR": str(state_dir),
            "PYTHON": os.environ.get("PYTHON", sys.executable),
        }
        # Reuse the jars of the main local broker (no Maven run) when they are there.
        main_state = Path(os.environ.get("COOLANT_STATE_DIR", ROOT / ".local")) / "kafka"
        state_dir.mkdir(parents=True, exist_ok=True)
        for lib in main_state.glob("lib-*"):
            if (lib / ".complete").exists() and not (state_dir / lib.name).exists():
                (state_dir / lib.name).symlink_to(lib, target_is_directory=True)

    def _run(self, action: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(ROOT / "scripts" / "kafka-local"), action],
            env=self.env, capture_output=True, text=True, timeout=900, check=False,
        )

    def start(self) -> float:
        t0 = time.monotonic()
        proc = self._run("start")
        if proc.returncode != 0:
            raise RuntimeError(f"spare kafka start failed: {proc.stderr.strip()[-1500:]}")
        return time.monotonic() - t0

    def stop(self) -> float:
        t0 = time.monotonic()
        proc = self._run("stop")
        if proc.returncode != 0:
            raise RuntimeError(f"spare kafka stop failed: {proc.stderr.strip()[-1500:]}")
        return time.monotonic() - t0


@pytest.fixture(scope="module")
def spare_kafka(tmp_path_factory: pytest.TempPathFactory, kafka_bootstrap: str) -> Iterator[SpareKafka]:
    """Started once to prove it can run, then left stopped: each test starts and stops it as it needs."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        msg = "spare kafka unavailable: no java"
        if os.environ.get("REQUIRE_INTEGRATION") == "1":
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)
    spare = SpareKafka(tmp_path_factory.mktemp("spare-kafka"))
    try:
        spare.start()
    except RuntimeError as exc:
        if os.environ.get("REQUIRE_INTEGRATION") == "1":
            pytest.fail(str(exc), pytrace=False)
        pytest.skip(str(exc))
    spare.stop()
    try:
        yield spare
    finally:
        spare.stop()
