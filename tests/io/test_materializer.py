"""The materializer against a real Redis: LiteLLM's byte format, the write rule applied atomically, retries."""

from __future__ import annotations

import asyncio
import io
import json
import math
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import orjson
import pytest
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from rich.console import Console

from coolant.cli.status import render
from coolant.io.cooldowns import active_cooldowns
from coolant.io.materializer import (
    EarlyWrites,
    RedisSink,
    cooldown_channel,
    cooldown_key,
    detail_key,
    litellm_value,
    push_message,
    released_key,
    should_write,
)
from coolant.processors.state import HealthState
from coolant.schemas import Cooldown, Window, encode
from tests.support.ports import free_port
from tests.support.redis import scoped_redis


def make_cd(
    deployment_id: str = "d1",
    *,
    ts: float | None = None,
    duration: int | float = 5,
    status: int | None = 429,
    group: str = "gpt-4o",
    reason: str = "rate_limited",
) -> Cooldown:
    ts = time.time() if ts is None else ts
    return Cooldown(
        event_id=f"cd-{uuid.uuid4().hex}",
        deployment_id=deployment_id,
        model_group=group,
        ts=ts,
        until=ts + duration,
        cooldown_time=duration,
        reason=reason,  # type: ignore[arg-type]
        status_code=status,
        exception_type="RateLimitError",
        exception_received="litellm.RateLimitError: slow down" + "*" * 10,
        trigger_event_id="e1",
        window=Window(ts, 0, 1),
    )


@pytest.fixture
def prefix() -> str:
    return f"ctest-{uuid.uuid4().hex[:12]}:"


@pytest.fixture
async def r(redis_url: str, prefix: str) -> AsyncIterator[Redis]:
    async with scoped_redis(redis_url, prefix) as client:
        yield client


@pytest.fixture
def sink(r: Redis, prefix: str) -> RedisSink:
    return RedisSink(r, prefix)


# --- the pure rule ---------------------------------------------------------------------------------------------


WRITE_RULE = [
    (None, 110.0, 100.0, True),  # nothing there, still ahead
    (None, 100.0, 100.0, False),  # ends exactly now: already over
    (None, 99.0, 100.0, False),  # already passed
    (105.0, 110.0, 100.0, True),  # replaces a shorter entry
    (110.0, 110.0, 100.0, False),  # equal ends: keep what is there
    (120.0, 110.0, 100.0, False),  # never shortened
    (50.0, 110.0, 100.0, True),  # an expired leftover is replaced
    (120.0, 90.0, 100.0, False),  # passed and shorter
    (None, 100.000001, 100.0, True),  # a microsecond ahead still counts
    (100.0, 110.0, 100.0, True),  # an entry ending just now is replaced
    (90.0, 95.0, 100.0, False),  # passed, even over an older one
]
"""(existing entry's end or None, the cooldown's until, now, written?): the materialization rule (contract §4)."""


@pytest.mark.parametrize(("existing_end", "until", "now", "expected"), WRITE_RULE)
def test_should_write_truth_table(existing_end: float | None, until: float, now: float, expected: bool) -> None:
    assert should_write(existing_end, until, now) is expected


def _on_redis_clock(row: tuple[float | None, float, float, bool], server_now: int) -> tuple[int | None, int]:
    """The row's existing end and until moved onto the Redis server's clock, each relation of the row kept: a time
    before `now` lands 1000 s or more in the past, one after it 1000 s or more ahead (the script reads TIME
    while it runs, a little after `server_now`), one equal to it on `server_now` (over by then); two equal
    times stay equal and the order of the two is kept. Whole seconds, so `timestamp + cooldown_time` is exact
    in the script."""
    existing, until, now, _ = row
    times = sorted({t for t in (existing, until) if t is not None})

    def moved(t: float) -> int:
        if t == now:
            return server_now
        rank = times.index(t)
        return server_now - 1000 - 10 * (len(times) - rank) if t < now else server_now + 1000 + 10 * rank

    return (None if existing is None else moved(existing)), moved(until)


@pytest.mark.parametrize("literal", [False, True], ids=["json-entry", "python-literal-entry"])
async def test_the_lua_script_applies_should_write(r: Redis, prefix: str, literal: bool) -> None:
    """Every row of `should_write`'s table through the script production runs (`RedisSink.write`), on a real
    Redis and its clock; the entry in place is LiteLLM's JSON or its sync writer's Python literal."""
    sink = RedisSink(r, prefix, publish=False)
    server_now = int((await r.time())[0])
    for i, row in enumerate(WRITE_RULE):
        existing, until = _on_redis_clock(row, server_now)
        assert should_write(existing, until, server_now) is row[3], row  # the move kept the row's answer
        dep = f"lua-{i}"
        if existing is not None:
            fields = {"exception_received": "in force", "status_code": "429", "timestamp": float(existing - 30),
                      "cooldown_time": 30}
            value = repr(fields).encode() if literal else orjson.dumps(fields)
            await r.set(cooldown_key(prefix, dep), value)
        cd = make_cd(dep, ts=until - 20, duration=20)
        assert await sink.write(cd) is row[3], f"row {row}: the script disagrees with should_write"
        held = await r.get(cooldown_key(prefix, dep))
        assert (held == litellm_value(cd)) is row[3], (row, held)


def test_key_names() -> None:
    assert cooldown_key("", "abc") == "deployment:abc:cooldown"
    assert cooldown_key("ns:", "abc") == "ns:deployment:abc:cooldown"
    assert detail_key("ns:", "abc") == "ns:coolant:cooldown:abc"


def test_litellm_value_format() -> None:
    cd = make_cd(ts=1700000000.25, duration=5)
    assert litellm_value(cd) == (
        b'{"exception_received":"litellm.RateLimitError: slow down**********",'
        b'"status_code":"429","timestamp":1700000000.25,"cooldown_time":5}'
    )
    assert orjson.loads(litellm_value(make_cd(ts=1700000000.0, duration=5.0))) == {
        "exception_received": "litellm.RateLimitError: slow down**********",
        "status_code": "429",
        "timestamp": 1700000000.0,
        "cooldown_time": 5,
    }
    assert b'"timestamp":1700000000.0,"cooldown_time":5}' in litellm_value(make_cd(ts=1700000000.0, duration=5.0))
    assert b'"cooldown_time":2.5}' in litellm_value(make_cd(duration=2.5))
    # an error without a status: what LiteLLM itself writes then
    assert b'"status_code":"500"' in litellm_value(make_cd(status=None))


# --- write ------------------------------------------------------------------------------------------------------


async def test_write_exact_key_value_and_absolute_expiry(r: Redis, sink: RedisSink, prefix: str) -> None:
    cd = make_cd(ts=time.time(), duration=5)
    assert await sink.write(cd) is True
    key = f"{prefix}deployment:d1:cooldown"
    raw = await r.get(key)
    assert raw == litellm_value(cd)
    assert raw == (
        b'{"exception_received":"litellm.RateLimitError: slow down**********","status_code":"429",'
        b'"timestamp":' + repr(cd.ts).encode() + b',"cooldown_time":5}'
    )
    assert (await r.pexpiretime(key)) == math.ceil(cd.until * 1000)
    pttl = await r.pttl(key)
    assert 4000 < pttl <= 5001, pttl
    detail = f"{prefix}coolant:cooldown:d1"
    assert await r.get(detail) == encode(cd)
    assert (await r.pexpiretime(detail)) == math.ceil(cd.until * 1000)


async def test_later_ending_entry_is_not_replaced(r: Redis, sink: RedisSink, prefix: str) -> None:
    now = time.time()
    long = make_cd(ts=now, duration=10)
    assert await sink.write(long)
    assert await sink.write(make_cd(ts=now + 1, duration=5)) is False  # ends at now+6 < now+10
    assert await sink.write(make_cd(ts=now + 5, duration=5)) is False  # equal end
    assert await r.get(cooldown_key(prefix, "d1")) == litellm_value(long)
    assert await r.get(detail_key(prefix, "d1")) == encode(long)
    assert (await r.pexpiretime(cooldown_key(prefix, "d1"))) == math.ceil(long.until * 1000)


async def test_shorter_existing_entry_is_replaced(r: Redis, sink: RedisSink, prefix: str) -> None:
    now = time.time()
    assert await sink.write(make_cd(ts=now, duration=5))
    longer = make_cd(ts=now + 1, duration=10, status=503, reason="failure_rate")
    assert await sink.write(longer) is True
    assert await r.get(cooldown_key(prefix, "d1")) == litellm_value(longer)
    assert await r.get(detail_key(prefix, "d1")) == encode(longer)
    assert (await r.pexpiretime(cooldown_key(prefix, "d1"))) == math.ceil(longer.until * 1000)


async def test_already_expired_cooldown_is_not_written(r: Redis, sink: RedisSink, prefix: str) -> None:
    now = time.time()
    past = make_cd("d2", ts=now - 10, duration=5)
    assert await sink.write(past) is False
    assert await r.exists(cooldown_key(prefix, "d2"), detail_key(prefix, "d2")) == 0
    current = make_cd("d2", ts=now, duration=10)
    assert await sink.write(current)
    assert await sink.write(past) is False  # does not delete or touch what is in force
    assert await r.get(cooldown_key(prefix, "d2")) == litellm_value(current)
    assert (await r.pexpiretime(cooldown_key(prefix, "d2"))) == math.ceil(current.until * 1000)


async def test_unparseable_existing_value_is_replaced(r: Redis, sink: RedisSink, prefix: str) -> None:
    key = cooldown_key(prefix, "d1")
    for junk in (b"garbage", b"[1,2]", b'{"timestamp":"x"}', b"\xff\xfe"):
        await r.set(key, junk)
        cd = make_cd()
        assert await sink.write(cd) is True, junk
        assert await r.get(key) == litellm_value(cd)
        assert (await r.pexpiretime(key)) == math.ceil(cd.until * 1000)
    await r.delete(key)
    await r.hset(key, "a", "b")  # even the wrong type
    assert await sink.write(make_cd()) is True


async def test_litellm_written_entries_are_honoured(r: Redis, sink: RedisSink, prefix: str) -> None:
    """A router's own cooldown ending later is kept, whether its async (JSON) or sync (str(dict)) writer made it."""
    now = time.time()
    key = cooldown_key(prefix, "d1")
    as_json = json.dumps({"exception_received": "x", "status_code": "429", "timestamp": now, "cooldown_time": 60})
    as_repr = str(
        {"exception_received": "it's {odd}, 'x': 1", "status_code": "429", "timestamp": now, "cooldown_time": 60}
    )
    for existing in (as_json, as_repr):
        await r.set(key, existing, ex=60)
        assert await sink.write(make_cd(ts=now, duration=30)) is False
        assert (await r.get(key)).decode() == existing
        assert await sink.write(make_cd(ts=now, duration=90)) is True


async def test_an_identical_entry_is_written_again_with_the_workers_detail(
    r: Redis, sink: RedisSink, prefix: str
) -> None:
    """A pod's fast path wrote the same LiteLLM value first (same decision, its own reason and window in the
    detail key): the worker's write of that decision goes through, so the detail key ends up the worker's."""
    pod = make_cd(ts=time.time(), duration=30, reason="non_retryable")
    assert await sink.write(pod, prefetch=True) is True
    assert await sink.write(pod, prefetch=True) is False  # a prefetch never rewrites an identical entry
    worker = Cooldown(**{**{f: getattr(pod, f) for f in pod.__struct_fields__}, "reason": "failure_rate",
                         "window": Window(pod.ts, 3, 5)})
    assert litellm_value(worker) == litellm_value(pod)
    assert await sink.write(worker) is True
    assert await r.get(cooldown_key(prefix, "d1")) == litellm_value(worker)
    assert await r.get(detail_key(prefix, "d1")) == encode(worker)
    assert (await r.pexpiretime(detail_key(prefix, "d1"))) == math.ceil(worker.until * 1000)
    assert await sink.write(pod, prefetch=True) is False  # a late prefetch leaves the worker's detail alone
    assert await r.get(detail_key(prefix, "d1")) == encode(worker)


async def test_each_write_that_took_effect_is_published_after_it(r: Redis, sink: RedisSink, prefix: str) -> None:
    pubsub = r.pubsub()
    await pubsub.subscribe(cooldown_channel(prefix))
    try:
        assert (await pubsub.get_message(timeout=5))["type"] == "subscribe"
        now = time.time()
        long = make_cd(ts=now, duration=60)
        assert await sink.write(long)
        assert await sink.write(make_cd(ts=now, duration=5)) is False  # skipped: not announced
        message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=5)
        assert message is not None and message["data"] == push_message(long)
        assert orjson.loads(message["data"])["value"] == orjson.loads(await r.get(cooldown_key(prefix, "d1")))
        later = make_cd("d2", ts=now, duration=7)
        assert await sink.write(later)
        message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=5)
        assert message is not None and orjson.loads(message["data"])["deployment_id"] == "d2"  # not the skipped one
    finally:
        await pubsub.aclose()
    quiet = RedisSink(r, prefix, publish=False)
    assert quiet.channel is None


async def test_a_probe_release_ends_only_cooldowns_that_started_by_it(r: Redis, sink: RedisSink, prefix: str) -> None:
    """RC4: the release deletes the cooldown in force when it started at or before the release, leaves one
    decided after it (a half-open re-cool a pod wrote first), moves the marker only forward, is announced to the
    pods either way, and no cooldown that started by it is written back (materializer, early write, repair)."""
    pubsub = r.pubsub()
    await pubsub.subscribe(cooldown_channel(prefix))
    try:
        assert (await pubsub.get_message(timeout=5))["type"] == "subscribe"
        now = time.time()
        held = make_cd(ts=now - 10, duration=60)
        assert await sink.write(held)
        assert await sink.release("d1", now - 5) is True
        assert await r.get(cooldown_key(prefix, "d1")) is None and await r.get(detail_key(prefix, "d1")) is None
        assert float(await r.get(released_key(prefix, "d1"))) == now - 5
        assert await sink.write(held) is False  # started before the release: stays released
        after = make_cd(ts=now - 1, duration=60, reason="probation")
        assert await sink.write(after) is True
        assert await sink.release("d1", now - 3) is False  # a later release, but before the re-cool: it stands
        assert await r.get(cooldown_key(prefix, "d1")) == litellm_value(after)
        assert float(await r.get(released_key(prefix, "d1"))) == now - 3
        assert await sink.release("d1", now - 7) is False  # an older release: the marker stays
        assert float(await r.get(released_key(prefix, "d1"))) == now - 3
        as_repr = str({"exception_received": "x", "status_code": "503", "timestamp": now - 2, "cooldown_time": 60})
        await r.set(cooldown_key(prefix, "d2"), as_repr, ex=60)  # a router's own (sync writer) value
        assert await sink.release("d2", now) is True
        messages = []
        while (m := await pubsub.get_message(ignore_subscribe_messages=True, timeout=1)) is not None:
            messages.append(orjson.loads(m["data"]))
        releases = [m for m in messages if "released" in m]
        assert [(m["deployment_id"], m["released"]) for m in releases] == [
            ("d1", now - 5), ("d1", now - 3), ("d1", now - 7), ("d2", now)]
    finally:
        await pubsub.aclose()


# --- write_with_retry -------------------------------------------------------------------------------------------


class _Server:
    """A throwaway redis-server we can take down and bring back on the same port."""

    def __init__(self, port: int, workdir: Path) -> None:
        self.port = port
        self.workdir = workdir
        self.pidfile = workdir / f"redis-{port}.pid"

    def start(self) -> None:
        subprocess.run(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--daemonize", "yes", "--pidfile", str(self.pidfile), "--dir", str(self.workdir),
             "--logfile", str(self.workdir / "redis.log")],
            check=True, capture_output=True, timeout=10,
        )  # fmt: skip
        self._wait(self._ping)

    def stop(self) -> None:
        pid = self._pid()
        subprocess.run(["redis-cli", "-p", str(self.port), "shutdown", "nosave"], capture_output=True, timeout=10)
        if pid is not None:
            try:
                self._wait(lambda: not _alive(pid))
            except TimeoutError:
                os.kill(pid, signal.SIGKILL)
        self.pidfile.unlink(missing_ok=True)

    def _pid(self) -> int | None:
        try:
            return int(self.pidfile.read_text().strip())
        except (OSError, ValueError):
            return None

    def _ping(self) -> bool:
        proc = subprocess.run(["redis-cli", "-p", str(self.port), "ping"], capture_output=True, timeout=5)
        return proc.stdout.strip() == b"PONG"

    @staticmethod
    def _wait(cond: Callable[[], bool], timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if cond():
                return
            time.sleep(0.05)
        raise TimeoutError


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def flaky_redis(tmp_path: Path) -> Iterator[_Server]:
    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        pytest.skip("redis-server/redis-cli not installed")
    server = _Server(free_port(), tmp_path)
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.integration  # a redis-server of its own
async def test_write_with_retry_waits_for_redis(flaky_redis: _Server) -> None:
    flaky_redis.start()
    flaky_redis.stop()  # the port is ours, and nobody answers on it
    # no retries inside redis-py (its default retries 3 times with backoff), so the sink's own loop is what we see
    client = Redis(
        host="127.0.0.1",
        port=flaky_redis.port,
        socket_connect_timeout=0.5,
        socket_timeout=1,
        retry=Retry(NoBackoff(), 0),
    )
    sink = RedisSink(client, "retry:")
    errors: list[tuple[Exception, float]] = []
    cd = make_cd(ts=time.time(), duration=60)
    try:
        retried = asyncio.Event()

        def on_error(exc: Exception, delay: float) -> None:
            errors.append((exc, delay))
            if len(errors) >= 4:  # 0.1, 0.2, 0.4, 0.4: the backoff has reached its cap
                retried.set()

        task = asyncio.create_task(sink.write_with_retry(cd, on_error=on_error, max_backoff=0.4))
        await asyncio.wait_for(retried.wait(), 30)
        assert not task.done(), "the write gave up while Redis was down"
        await asyncio.to_thread(flaky_redis.start)
        assert await asyncio.wait_for(task, 20) is True
        assert await client.get(cooldown_key("retry:", "d1")) == litellm_value(cd)
        assert await client.get(detail_key("retry:", "d1")) == encode(cd)
        delays = [d for _, d in errors]
        assert delays[0] == pytest.approx(0.1)
        assert max(delays) <= 0.4
        assert delays == sorted(delays)
    finally:
        await client.aclose()


async def test_early_writes_write_once_and_tell_the_materializer(r: Redis, sink: RedisSink, prefix: str) -> None:
    results: list[tuple[str, str]] = []
    early = EarlyWrites(sink, on_result=lambda cd, result: results.append((cd.event_id, result)))
    cd, over = make_cd("d1", duration=60), make_cd("d2", ts=time.time() - 120, duration=5)
    early.submit(cd)
    early.submit(over)  # ended already: the rule skips it, and the materializer need not try again
    await early.drain()
    assert sorted(results) == sorted([(cd.event_id, "written"), (over.event_id, "skipped")])
    assert await r.get(cooldown_key(prefix, "d1")) == litellm_value(cd)
    assert await r.get(cooldown_key(prefix, "d2")) is None
    assert early.written_early(cd.event_id) and early.written_early(over.event_id)
    assert not early.written_early(cd.event_id), "the materializer skips a cooldown once, then forgets it"
    assert not early.written_early("never-submitted")


@pytest.mark.integration  # a redis-server of its own
async def test_early_writes_are_bounded_and_leave_failures_to_the_materializer(flaky_redis: _Server) -> None:
    flaky_redis.start()
    flaky_redis.stop()  # nobody answers: each early write fails once, and is not retried
    client = Redis(host="127.0.0.1", port=flaky_redis.port, socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0))
    results: list[str] = []
    early = EarlyWrites(RedisSink(client, "early:"), on_result=lambda cd, result: results.append(result),
                        max_in_flight=2, remembered=1)
    cds = [make_cd(f"d{i}", duration=60) for i in range(3)]
    try:
        for cd in cds:
            early.submit(cd)
        await early.drain()
        assert sorted(results) == ["dropped", "failed", "failed"]
        assert not any(early.written_early(cd.event_id) for cd in cds)
        await asyncio.to_thread(flaky_redis.start)
        for cd in cds:
            early.submit(cd)
            await early.drain()
        assert results[3:] == ["written"] * 3
        # only the newest is remembered (remembered=1): the materializer writes the others again, harmlessly
        assert [early.written_early(cd.event_id) for cd in cds] == [False, False, True]
    finally:
        await client.aclose()


async def test_write_health_with_retry_passes_through_when_up(sink: RedisSink, r: Redis, prefix: str) -> None:
    calls: list[object] = []
    state = HealthState(False, time.time(), "background_health_check_failed")
    assert await sink.write_health_with_retry("d1", state, on_error=lambda e, d: calls.append(e)) is True
    assert calls == []
    assert await sink.write_with_retry(make_cd(), on_error=lambda e, d: calls.append(e)) is True
    assert calls == []


# --- health map -------------------------------------------------------------------------------------------------


# --- status -----------------------------------------------------------------------------------------------------


async def test_status_lists_active_cooldowns(r: Redis, sink: RedisSink, prefix: str) -> None:
    now = time.time()
    assert await sink.write(make_cd("dep-a", ts=now, duration=30, group="g1", reason="rate_limited"))
    assert await sink.write(make_cd("dep-b", ts=now, duration=60, status=None, group="g2", reason="total_outage"))
    # written by a LiteLLM router itself: no detail key
    litellm_own = {"exception_received": "boom", "status_code": "401", "timestamp": now, "cooldown_time": 45}
    await r.set(cooldown_key(prefix, "dep-c"), json.dumps(litellm_own), ex=45)
    # LiteLLM's sync writer (str(dict)), and an entry whose time is up although its key lingers
    await r.set(cooldown_key(prefix, "dep-d"), str({**litellm_own, "cooldown_time": 10}), ex=10)
    await r.set(cooldown_key(prefix, "dep-e"), json.dumps({**litellm_own, "timestamp": now - 100}), ex=100)
    # a cooldown coolant wrote, then replaced by a router's own longer one: the detail no longer describes it
    assert await sink.write(make_cd("dep-f", ts=now, duration=5, group="g3"))
    await r.set(cooldown_key(prefix, "dep-f"), json.dumps({**litellm_own, "cooldown_time": 20}), ex=20)

    got = await active_cooldowns(r, prefix)
    assert [c.deployment_id for c in got] == ["dep-b", "dep-c", "dep-a", "dep-f", "dep-d"]
    b, c, a, f, d = got
    assert (b.model_group, b.reason, b.status_code) == ("g2", "total_outage", None)
    assert (a.model_group, a.reason, a.status_code, a.exception) == ("g1", "rate_limited", "429", "RateLimitError")
    assert a.started == now and a.until == now + 30
    assert 25 < a.remaining <= 30
    assert (c.model_group, c.reason, c.status_code, c.exception) == (None, None, "401", "boom")
    assert (d.model_group, d.reason, d.until) == (None, None, now + 10)
    assert (f.model_group, f.reason, f.status_code, f.until) == ("g3", None, "401", now + 20)
    # another prefix sees none of them
    assert await active_cooldowns(r, f"{prefix}other:") == []

    buf = io.StringIO()
    render(got, Console(file=buf, width=200, color_system=None))
    out = buf.getvalue()
    for text in ("dep-a", "g1", "rate_limited", "429", "RateLimitError", "dep-c", "401"):
        assert text in out
    assert time.strftime("%Y-%m-%dT", time.gmtime(a.until)) in out


async def test_status_empty(r: Redis, prefix: str) -> None:
    assert await active_cooldowns(r, prefix) == []
    buf = io.StringIO()
    render([], Console(file=buf, width=120, color_system=None))
    assert buf.getvalue().strip() == "no active cooldowns"


async def test_status_prefix_with_glob_characters(redis_url: str) -> None:
    client = Redis.from_url(redis_url, decode_responses=True)
    prefix = f"ctest[{uuid.uuid4().hex[:8]}]*:"
    try:
        assert await RedisSink(client, prefix).write(make_cd("x"))
        got = await active_cooldowns(client, prefix)
        assert [c.deployment_id for c in got] == ["x"]
        assert got[0].model_group == "gpt-4o"
    finally:
        await client.delete(cooldown_key(prefix, "x"), detail_key(prefix, "x"))
        await client.aclose()
