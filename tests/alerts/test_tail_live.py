"""`coolant tail` as a subprocess against the real broker: --json reproduces the records, Ctrl-C is clean."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

from coolant.schemas import Cooldown, HealthTransition, encode
from coolant.topics import Topics
from tests.alerts.support import cooldown, transition
from tests.support.kafka import produce
from tests.support.records import ROOT
from tests.support.terminal import interruptible

pytestmark = pytest.mark.integration


async def put(bootstrap: str, prefix: str, *records: Cooldown | HealthTransition | bytes) -> None:
    names = Topics(prefix)
    for r in records:
        if isinstance(r, bytes):
            await produce(bootstrap, names.cooldowns, [(b"junk", r)])
        else:
            topic = names.cooldowns if isinstance(r, Cooldown) else names.health_transitions
            await produce(bootstrap, topic, [(r.deployment_id.encode(), encode(r))])


class Tail:
    """`python -m coolant.cli tail ...` with its stderr collected in the background."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.stderr: list[str] = []
        self._errs = asyncio.create_task(self._collect())

    @classmethod
    async def start(cls, bootstrap: str, prefix: str, *args: str) -> Tail:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "coolant.cli", "tail", "--bootstrap", bootstrap, "--topic-prefix", prefix, *args,
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "COLUMNS": "300"},
            preexec_fn=interruptible,
        )
        return cls(proc)

    async def _collect(self) -> None:
        assert self.proc.stderr is not None
        async for raw in self.proc.stderr:
            self.stderr.append(raw.decode())

    async def following(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not any("coolant tail: following" in line for line in self.stderr):
            assert self.proc.returncode is None, "".join(self.stderr)
            assert time.monotonic() < deadline, f"tail did not start: {''.join(self.stderr)}"
            await asyncio.sleep(0.1)

    async def lines(self, n: int, timeout: float = 60.0) -> list[bytes]:
        assert self.proc.stdout is not None
        out = []
        for _ in range(n):
            line = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
            assert line, f"tail ended early: {''.join(self.stderr)}"
            out.append(line.rstrip(b"\n"))
        return out

    async def interrupt(self) -> tuple[int, bytes, str]:
        """Ctrl-C; returns the exit status, what stdout still had, and all of stderr."""
        self.proc.send_signal(signal.SIGINT)
        assert self.proc.stdout is not None
        try:
            rest = await asyncio.wait_for(self.proc.stdout.read(), 30)
            rc = await asyncio.wait_for(self.proc.wait(), 30)
        except TimeoutError:
            self.proc.kill()
            stderr = "".join(self.stderr)
            raise AssertionError(f"tail did not end within 30 s of Ctrl-C; its stderr:\n{stderr}") from None
        await self._errs
        return rc, rest, "".join(self.stderr)


async def test_json_from_the_beginning_prints_exactly_the_records_produced(kafka_bootstrap: str, prefix: str) -> None:
    now = time.time()
    records: list[Cooldown | HealthTransition] = [
        cooldown(1, "dep-a", ts=now), cooldown(2, "dep-b", ts=now, reason="failure_rate", status=500),
        cooldown(3, "dep-c", ts=now, seconds=0.5), transition(1, healthy=False, previous=True),
        transition(2, healthy=True, previous=False),
    ]
    await put(kafka_bootstrap, prefix, *records[:2], b"\x00\xffnot a record", *records[2:])
    tail = await Tail.start(kafka_bootstrap, prefix, "--json", "--from-beginning")
    got = await tail.lines(len(records))
    rc, rest, err = await tail.interrupt()
    assert Counter(got) == Counter(encode(r) for r in records)
    assert rest == b""
    assert rc == 130
    assert "Traceback" not in err
    warnings = [line for line in err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and f"{prefix}cooldowns[" in warnings[0] and "skipped" in warnings[0]


async def test_by_default_only_new_records_are_shown_one_line_each(kafka_bootstrap: str, prefix: str) -> None:
    now = time.time()
    await put(kafka_bootstrap, prefix, cooldown(1, "dep-old", ts=now))
    tail = await Tail.start(kafka_bootstrap, prefix)
    await tail.following()
    await put(kafka_bootstrap, prefix, cooldown(2, "dep-new", ts=now, seconds=3600),
              transition(3, "dep-h", healthy=False, previous=True, ts=now))
    first, second = (line.decode() for line in await tail.lines(2))
    rc, rest, err = await tail.interrupt()
    assert rc == 130 and "Traceback" not in err
    assert "dep-old" not in first + second + rest.decode()
    assert "COOLDOWN" in first and "dep-new (grp-1)" in first and "rate_limited  429" in first
    assert "litellm.RateLimitError: you exceeded your current quota, please check…" in first
    assert "until " in first and "s left)" in first and "window 3 ok / 12 failed" in first
    assert "HEALTH" in second and "dep-h (grp-h)" in second and "healthy → unhealthy" in second
    assert "probe probe-dep-h-3 by prober-1" in second


async def test_topic_filter_and_since(kafka_bootstrap: str, prefix: str) -> None:
    now = time.time()
    await put(kafka_bootstrap, prefix, transition(1, healthy=False, previous=None, ts=now), cooldown(1, ts=now))
    tail = await Tail.start(kafka_bootstrap, prefix, "--json", "--since", "10m", "--no-transitions")
    got = await tail.lines(1)
    rc, rest, _ = await tail.interrupt()
    assert got == [encode(cooldown(1, ts=now))] and rest == b"" and rc == 130
