"""Issue 16 live: a hostile corpus cannot stop the worker, Redis is repaired after data loss, no secret leaks.

docs/input-bounds.md has the rules (B, P, S, K). Each test has its own topics, app id and Redis key prefix; the Redis
this file restarts is its own (`case.redis_server()`), never the shared one.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import signal
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from redis.asyncio import Redis

from coolant.config.loader import load_config
from coolant.streams.app import Pipeline, WorkerOptions
from coolant.streams.faust import OVERDUE_EXIT, producer_state
from coolant.topics import Topics
from tests.support.kafka import produce, produce_lines, read_json, read_topic, wait_caught_up, wait_sentinels
from tests.support.ports import free_port
from tests.support.records import (
    by_id,
    diff_cooldowns,
    fleet_traffic,
    key_of,
    latest_per_deployment,
    outcome,
    sentinels,
    uid,
)
from tests.support.redis import redis_mismatches
from tests.support.waiting import wait_for
from tests.support.worker import Case

from . import hostile_mix
from .test_live import assert_same_cooldowns

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "litellm.yaml"

SECRETS = {
    "aws": "AKIAQ3EGUWY7ZK2LMN4P",
    "openai": "sk-proj-Hq8Zr2Lp5Vn9Tx3Bc7Mk1Wd6Fg4Js0Ya",
    "jwt": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJjb29sYW50In0.c2lnbmF0dXJlLW9mLWEtand0",
    "google": "AIzaSyB-3kLm9QpX7rT2vW5yZ8aC1eF4hJ6nO0s",
    "bearer": "b3ar3rT0kenV4lue99",
}


def _deep(n: int) -> bytes:
    return b"[" * n + b"]" * n


def _hostile(now: float) -> list[tuple[str, bytes | None]]:
    """(what, value): each must be dead-lettered (or, for a tombstone, counted), and change no decision."""
    good = outcome("h-base", now, "dep-03", False, status_code=401, exception_type="AuthenticationError")
    head = good[:-1]
    return [
        ("10k deep", _deep(10_000)),
        ("10k deep in an unknown field", head + b',"x":' + _deep(10_000) + b"}"),
        ("ts 1e300", outcome("h-ts300", 1e300, "dep-03", False, status_code=500)),
        ("ts 1e12 (ms)", outcome("h-ms", now * 1000, "dep-03", False, status_code=500,
                                 exception_message=f"bad key {SECRETS['openai']}")),
        ("10 years ahead", outcome("h-future", now + 10 * 365 * 86400, "dep-03", False, status_code=500)),
        ("300 KB of \\xff", b'{"schema":"coolant.outcome/1","x":"' + b"\xff" * 300_000 + b'"}'),
        ("600 KB of escaped quotes", b'{"schema":"coolant.outcome/1","x":"' + b'\\"' * 300_000 + b'"}'),
        ("cooldown_time 1e308", outcome("h-ct", now, "dep-03", False, status_code=500, cooldown_time=1e308)),
        ("status_code 10**25", outcome("h-sc", now, "dep-03", False, status_code=599).replace(
            b'"status_code":599', b'"status_code":10000000000000000000000000')),
        ("secret in an invalid record", outcome("h-sec", now, "dep-03", "no",
                                                exception_message=f"Authorization: Bearer {SECRETS['bearer']}")),
    ]


def _valid_extras(now: float) -> list[bytes]:
    """Valid records the old worker refused or mishandled, and planted secrets that must be redacted."""
    def auth(eid: str, dep: str, dt: float, **fields: Any) -> bytes:
        fields.setdefault("exception_type", "AuthenticationError")
        return outcome(eid, round(now + dt, 3), dep, False, status_code=401, **fields)

    return [
        outcome("x-int", round(now + 1, 3), "dep-05", False, status_code=500.0, exception_type="InternalServerError"),
        outcome("x-5e2", round(now + 1.5, 3), "dep-05", False, status_code=429, retry_after="9" * 400,
                exception_type="RateLimitError").replace(b'"status_code":429', b'"status_code":4.29e2'),
        auth("x-sur", "dep-06", 2, exception_message="SURROGATE").replace(b"SURROGATE", b"\\ud800 broken"),
        auth("s-aws", "dep-07", 3, exception_message=f"{SECRETS['aws']}: The security token is invalid"),
        auth("s-oai", "dep-09", 4, exception_message=f"Incorrect API key provided: {SECRETS['openai']}."),
        auth("s-jwt", "dep-10", 5, exception_message=f"{SECRETS['jwt']} rejected"),
        # its own long duration: a cooldown in force from the traffic (D7 can cool dep-11 earlier) must not absorb it
        auth("s-type", "dep-11", 6, exception_type=f"Error {SECRETS['google']}", exception_message=None,
             cooldown_time=3600),
        auth("s-bear", "dep-13", 7, exception_message=f"401: Authorization: Bearer {SECRETS['bearer']} refused"),
    ]


def _leaks(where: str, blob: bytes | str) -> list[str]:
    text = blob.decode("utf-8", "replace") if isinstance(blob, bytes) else blob
    return [f"{where}: {name}" for name, s in SECRETS.items() if s[:16] in text]


async def test_hostile_corpus_against_a_live_worker(case: Case, kafka_bootstrap: str, redis_url: str) -> None:
    now = time.time() - 30  # dated around now: B6 is checked with its default allowance here
    valid = fleet_traffic(600, seed=7, t0=now - 40, tag="hc") + _valid_extras(now)
    # keyed by deployment explicitly: key_of's JSON reader refuses the lone surrogate, and a record on another
    # partition than its deployment's is decided in another order than replay's (issue 17's misrouting)
    keys = [key_of(line) or orjson.loads(line.replace(b"\\ud800", b""))["deployment_id"].encode() for line in valid]
    hostile = _hostile(now)
    # hostile records ride on the valid deployments' partitions, interleaved with their traffic
    sequence: list[tuple[str, bytes, bytes | None]] = []
    step = len(valid) // (len(hostile) + 1)
    for i, (key, line) in enumerate(zip(keys, valid, strict=True)):
        sequence.append(("valid", key, line))
        if i % step == step - 1 and hostile:
            what, value = hostile.pop(0)
            sequence.append((what, b"dep-03", value))
    sequence.append(("tombstone", b"dep-03", None))
    n_hostile = sum(1 for what, _, _ in sequence if what not in ("valid", "tombstone"))
    assert not hostile and n_hostile == 10

    expected = case.replay(valid)
    assert expected, "the corpus must cause cooldowns"
    # P2: replay reads the hostile lines too, reports them and decides the rest exactly the same
    offline = [v for what, _, v in sequence if v is not None and what != "10 years ahead"]
    offline_got = by_id(case.replay(offline, name="with-hostile"))
    assert offline_got == by_id(expected), diff_cooldowns(offline_got, by_id(expected))

    w = await case.worker("a", kafka_bootstrap, redis_url=redis_url, extra_args=("--max-ts-ahead", "60"))
    await w.wait_ready()
    assert w.proc is not None
    pid = w.proc.pid
    sent = await produce(kafka_bootstrap, case.outcomes, [(k, v) for _, k, v in sequence])  # type: ignore[misc]
    health = Topics(case.prefix).health
    await produce(kafka_bootstrap, health, [(b"dep-03", None)])  # type: ignore[list-item]
    await wait_caught_up(kafka_bootstrap, case.app_id, case.outcomes, timeout=120, on_timeout=case.logs)
    await wait_caught_up(kafka_bootstrap, case.app_id, health, on_timeout=case.logs)
    await wait_caught_up(kafka_bootstrap, case.app_id, case.cooldowns, on_timeout=case.logs)

    assert w.alive and w.proc.pid == pid, "the worker must survive every hostile record"
    got = by_id(await read_json(kafka_bootstrap, case.cooldowns))
    assert got == by_id(expected), diff_cooldowns(got, by_id(expected))  # decided exactly as replay decides

    where = {(meta.partition, meta.offset): what for (what, _, _), meta in zip(sequence, sent, strict=True)}
    dead = {}
    for msg in await read_topic(kafka_bootstrap, case.deadletter):
        assert len(msg.value) < 200_000, "B7: a dead letter is bounded"
        d = orjson.loads(msg.value)
        if d["topic"] == case.outcomes and (d["partition"], d["offset"]) in where:  # not wait_ready's T0 probes
            dead[where[d["partition"], d["offset"]]] = d
    missing = {what for what, _, _ in sequence if what not in ("valid", "tombstone")} - set(dead)
    assert not missing, f"not dead-lettered: {missing}"
    assert set(dead) - {"valid"} == set(dead) and len(dead) == n_hostile, sorted(dead)
    assert "milliseconds" in dead["ts 1e12 (ms)"]["error"]
    assert "ts_in_future" in dead["10 years ahead"]["error"]
    assert dead["300 KB of \\xff"]["raw_truncated"] is True and dead["300 KB of \\xff"]["raw_size"] > 300_000
    assert await w.metric("coolant_records_total", topic=case.outcomes, disposition="tombstone") == 1
    assert await w.metric("coolant_records_total", topic=health, disposition="tombstone") == 1

    # S1/S2: no planted secret in any output
    leaks: list[str] = []
    for msg in await read_topic(kafka_bootstrap, case.cooldowns):
        leaks += _leaks("cooldowns topic", msg.value)
    for d in dead.values():
        raw = base64.b64decode(d["raw"]) if d.get("raw_encoding") == "base64" else d["raw"]
        leaks += _leaks("dead letter", raw) + _leaks("dead-letter error", d["error"])
    client = Redis.from_url(redis_url)
    try:
        async for key in client.scan_iter(match=f"{case.key_prefix}*"):
            value = await client.get(key)
            if value is not None:
                leaks += _leaks(f"redis {key!r}", value)
    finally:
        await client.aclose()
    for path in ("/cooldowns", *(f"/deployments/dep-{i:02d}" for i in (7, 9, 10, 11, 13))):
        _, body = await w.get(path)
        leaks += _leaks(f"GET {path}", body)
    leaks += _leaks("worker log", w.log_path.read_bytes())
    assert not leaks, leaks
    cooled = {cd["trigger_event_id"]: cd for cd in got.values()}
    assert "[REDACTED]" in cooled["s-aws"]["exception_received"]
    assert cooled["s-type"]["exception_type"].startswith("Error [REDACTED]")


async def test_redis_restart_without_persistence_is_repaired(case: Case, kafka_bootstrap: str) -> None:
    """K2: every cooldown in force is back in Redis within 5 s of a restart that lost everything."""
    lines = fleet_traffic(800, seed=3, tag="rr")  # dated from T0 (2027): every cooldown is still in force
    redis = case.redis_server()
    w = await case.worker("a", kafka_bootstrap, redis_url=redis.url)
    await w.wait_ready()
    await produce_lines(kafka_bootstrap, case.outcomes, lines)
    await wait_caught_up(kafka_bootstrap, case.app_id, case.outcomes, on_timeout=case.logs)
    await wait_caught_up(kafka_bootstrap, case.app_id, case.cooldowns, on_timeout=case.logs)
    latest = latest_per_deployment(await read_json(kafka_bootstrap, case.cooldowns))
    assert len(latest) >= 3, "the traffic must leave several cooldowns in force"

    async def in_place() -> bool:
        return not await redis_mismatches(redis.url, case.key_prefix, latest)

    await wait_for(in_place, "the cooldowns materialized", on_timeout=case.logs)
    before = await w.metric("coolant_redis_reasserted_total", result="written")

    redis.stop()  # SHUTDOWN NOSAVE: every key is gone
    redis.start()
    restarted = time.monotonic()
    client = Redis.from_url(redis.url)
    try:
        lost = await client.dbsize()
    finally:
        await client.aclose()
    case.log(f"redis restarted with {lost} keys; waiting for {len(latest)} cooldowns to come back")
    await wait_for(in_place, "every cooldown in force back in Redis", timeout=5, interval=0.1,
                   on_timeout=lambda: "\n".join(["(see redis_mismatches)", case.logs()]))
    case.log(f"repaired {time.monotonic() - restarted:.1f} s after the restart")
    assert await w.metric("coolant_redis_reasserted_total", result="written") >= before + len(latest)
    assert w.alive
    # a plain restart closes every pooled connection, as a TLS-only server closes a plain one: no TLS hint for it
    assert b"TLS" not in w.log_path.read_bytes(), case.logs()


async def test_junk_on_the_cooldowns_topic_stops_no_stage(case: Case, kafka_bootstrap: str, redis_url: str) -> None:
    """P1 for the materializer and the history agent: a cooldown record Redis or the encoder refuses is
    dead-lettered, and the next one is written."""
    w = await case.worker("a", kafka_bootstrap, redis_url=redis_url)
    await w.wait_ready()
    assert w.proc is not None
    pid = w.proc.pid
    now = time.time()

    def cooldown(dep: str, until: float, status: int | str = 429) -> bytes:
        rec = {"schema": "coolant.cooldown/1", "event_id": f"cd-junk-{dep}", "deployment_id": dep,
               "model_group": "grp-0", "ts": now, "until": until, "cooldown_time": 600, "reason": "manual",
               "status_code": 0, "exception_type": None, "exception_received": "", "trigger_event_id": "t",
               "window": {"start": now, "successes": 0, "failures": 0}}
        return orjson.dumps(rec).replace(b'"status_code":0', b'"status_code":' + str(status).encode())

    junk = [(b"dep-00", cooldown("dep-00", 1e308)), (b"dep-01", cooldown("dep-01", now + 600, "1" + "0" * 25)),
            (b"dep-02", b"not json"), (b"dep-04", None)]
    good = cooldown("dep-05", now + 600)
    sent = await produce(kafka_bootstrap, case.cooldowns, [*junk, (b"dep-05", good)])  # type: ignore[list-item]
    client = Redis.from_url(redis_url)
    try:
        async def written() -> bool:
            return await client.get(f"{case.key_prefix}deployment:dep-05:cooldown") is not None

        await wait_for(written, "the good cooldown after the junk in Redis", on_timeout=case.logs)
    finally:
        await client.aclose()
    junk_at = {(m.partition, m.offset) for m in sent[:-1]}

    async def all_dead() -> list[dict[str, Any]]:
        dead = [orjson.loads(m.value) for m in await read_topic(kafka_bootstrap, case.deadletter)]
        mine = [d for d in dead if d["topic"] == case.cooldowns and (d["partition"], d["offset"]) in junk_at]
        return mine if {(d["partition"], d["offset"]) for d in mine} == junk_at else []  # each one, once or more

    dead = await wait_for(all_dead, "every junk cooldown dead-lettered", on_timeout=case.logs)
    assert any("materializer" in d["error"] for d in dead), [d["error"] for d in dead]
    assert w.alive and w.proc.pid == pid


async def test_a_topic_tracked_first_strands_no_other_topics_batch(kafka_bootstrap: str, tmp_path: Path) -> None:
    """Issue 26's stall at its root: the worker's producer knows topics from an all-topic metadata refresh without
    tracking them; the first topic it does track (here C, created after that refresh) makes the next refresh cover
    only the tracked ones. A batch waiting then for an untracked topic (A) lost its partition leader and waited
    for the producer's request timeout (20 minutes): Faust's commit, which flushes the producer, with it. Every
    topic is now tracked before its first send (`faust.producer.TrackedProducer`), so both batches are delivered.
    The producer lingers 0.5 s so that A's batch is still waiting when the refresh C asks for lands."""
    cfg = load_config(EXAMPLE)
    kafka = replace(cfg.runtime.kafka, bootstrap_servers=kafka_bootstrap)
    cfg = replace(cfg, runtime=replace(cfg.runtime, kafka=kafka))
    app = Pipeline(cfg, WorkerOptions(web_port=free_port(), partitions=2, datadir=str(tmp_path)), sink=None).app
    app.conf.producer_linger = 0.5
    producer = app.producer
    tag = uid()
    a, c = f"it-{tag}.a", f"it-{tag}.c"
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(a, 2, 1)])
        await producer.start()
        client = producer._producer.client

        async def known(topic: str) -> bool:
            await client.force_metadata_update()
            return client.cluster.partitions_for_topic(topic) is not None

        await wait_for(lambda: known(a), "topic A in an all-topic refresh")  # as Faust's topic declarations do
        await admin.create_topics([NewTopic(c, 1, 1)])
        sent_a = await producer.send(a, b"k", b"to A", 1, None, None)
        state = producer_state(app)
        assert f"{a}[1] 1 batch(es)" in state, state
        sent_c = await producer.send(c, b"k", b"to C", 0, None, None)
        # a generous bound on what is otherwise a 20-minute hang (delivery takes about the linger, 0.5 s)
        got = await asyncio.wait_for(asyncio.gather(sent_a, sent_c), 60)
        assert [(m.topic, m.partition) for m in got] == [(a, 1), (c, 0)]
        assert producer_state(app).startswith("producer: 0 partition(s)")
    finally:
        with contextlib.suppress(Exception):  # (a stranded batch would hold the stop too)
            await asyncio.wait_for(producer.stop(), 30)
        with contextlib.suppress(Exception):
            await admin.delete_topics([a, c])
        await admin.close()


async def test_sigterm_ends_a_worker_stuck_on_a_broker_that_never_answers(case: Case) -> None:
    """A worker whose broker stops answering mid-stream (SIGSTOP: sends, the commit's flush and the group's leave
    never complete) still ends on SIGTERM, within the bound on a stop (15 s, `faust.STOP_WITHIN`; the
    test's 60 s only proves that it ends by itself). The broker answers again, an orchestrator starts the worker
    again, and it recovers: every cooldown replay gives, none different (at-least-once: a re-decided record's
    cooldown may come twice, with the same event id), and everything committed."""
    lines = fleet_traffic(4000, seed=12, tag="stuck")
    lines += sentinels(lines)
    expected = case.replay(lines)
    broker = case.broker()
    bs = broker.bootstrap
    w = await case.worker("a", bs)
    await w.wait_ready()
    pid = int((broker.state / f"node-{broker.port}" / "kafka.pid").read_text())
    await produce_lines(bs, case.outcomes, lines)
    os.kill(pid, signal.SIGSTOP)  # mid-stream: the worker is still deciding what was just produced
    try:
        await asyncio.sleep(2)  # its sends and commits are waiting on the broker now (not an assertion)
        stopped = time.monotonic()
        rc = await asyncio.to_thread(w.stop, 60)
        took = time.monotonic() - stopped
    finally:
        os.kill(pid, signal.SIGCONT)
    overdue = "shutdown: still stopping" in w.log_path.read_text(errors="replace")
    case.log(f"SIGTERM to exit: {took:.1f} s, rc={rc}, {'overdue stop' if overdue else 'clean stop'}")
    assert rc in (0, OVERDUE_EXIT), f"the worker did not end by itself (rc={rc})\n{w.log_tail()}"
    assert (rc == OVERDUE_EXIT) == overdue, w.log_tail()

    again = await case.worker("a-restarted", bs)
    got = await wait_sentinels(bs, case.cooldowns, lines, timeout=120, on_timeout=case.logs)
    assert_same_cooldowns(got, expected, allow_duplicates=True)
    await wait_caught_up(bs, case.app_id, case.outcomes, timeout=60, on_timeout=case.logs)
    assert again.alive


async def test_the_hostile_mix_with_a_doubled_flood(case: Case, kafka_bootstrap: str, redis_url: str) -> None:
    """Issue 26's mix (tests/integration/hostile_mix.py) as a fresh worker's first input, its flood of misrouted
    health records doubled (600): the worker stays up, every bad record is dead-lettered with a reason, tombstones
    are counted, the offsets of both input topics are committed, each flood record is re-published once, and the
    cooldowns and health transitions of the valid rest are exactly `coolant replay`'s."""
    w = await case.worker("a", kafka_bootstrap, redis_url=redis_url, extra_args=("--max-ts-ahead", "60"))
    await w.wait_healthy()  # not probed: the mix is its first input, as in the run that found the stall
    assert w.proc is not None
    pid = w.proc.pid
    await hostile_mix.allow_big_records(kafka_bootstrap, [case.outcomes])
    mix = hostile_mix.build(time.time() - 30, case.tag, 2, flood=600)
    decided = hostile_mix.decided_lines(mix)
    expected = case.replay(decided)
    assert expected, "the valid rest must cause cooldowns"
    expected_flips = case.replay_transitions(decided, name="transitions")
    sent = await hostile_mix.produce(kafka_bootstrap, case.prefix, mix)
    for topic in (case.outcomes, case.health):
        await wait_caught_up(kafka_bootstrap, case.app_id, topic, timeout=180, on_timeout=case.logs)
    await wait_caught_up(kafka_bootstrap, case.app_id, case.cooldowns, on_timeout=case.logs)

    assert w.alive and w.proc.pid == pid, "the worker must survive the mix\n" + w.log_tail()
    topic = {"outcomes": case.outcomes, "health": case.health}
    bad = {(topic[s.topic], m.partition, m.offset): s.what for s, m in zip(mix, sent, strict=True) if s.kind == "bad"}
    reasons = {}
    for msg in await read_topic(kafka_bootstrap, case.deadletter):
        d = orjson.loads(msg.value)
        at = (d["topic"], d["partition"], d["offset"])
        if at in bad:
            reasons[bad[at]] = d["error"]
    assert set(reasons) == set(bad.values()), f"not dead-lettered: {sorted(set(bad.values()) - set(reasons))}"
    assert all(reasons.values()), [what for what, why in reasons.items() if not why]
    assert "milliseconds" in reasons["ts in ms"] and "ts_in_future" in reasons["ts 10 years ahead"]
    assert reasons["2 MB record"].startswith("record of"), reasons["2 MB record"]
    assert await w.metric("coolant_records_total", topic=case.outcomes, disposition="tombstone") == 3
    assert await w.metric("coolant_records_total", topic=case.health, disposition="tombstone") == 1
    assert await w.metric("coolant_misrouted_total", topic=case.health) >= 600

    got = by_id(await read_json(kafka_bootstrap, case.cooldowns))
    assert got == by_id(expected), diff_cooldowns(got, by_id(expected))
    flips = by_id(await read_json(kafka_bootstrap, case.transitions))
    assert flips == by_id(expected_flips), diff_cooldowns(flips, by_id(expected_flips))
