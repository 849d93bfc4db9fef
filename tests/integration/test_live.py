"""The live worker end to end, as subprocesses against real Kafka and Redis, checked against `coolant replay`.

Each test has its own topic prefix, consumer group / app id, Redis key prefix and data dir; the services of the
failure tests (a Redis to stop, a broker to restart) are private to the test, so the shared ones are untouched.
Completion is "the worker's consumer group has committed every input record": Faust commits an offset only when
its agent is done with the record, and the agents await their output sends, so all outputs are durable then.
Across a rebalance or a broker restart Faust's commits can lag far behind the processing, so the failover and
broker tests wait instead for sentinel records (one 401 per deployment at the end, see `sentinels`) to be
decided: their cooldowns are on the topic only once every earlier record of every partition was processed.
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
import yaml

from coolant.config.overrides import override
from tests.support.kafka import group_lag, produce, produce_lines, read_json, read_topic, wait_caught_up, wait_sentinels
from tests.support.records import (
    DEPLOYMENTS,
    T0,
    by_id,
    diff_cooldowns,
    duplicates,
    fleet_traffic,
    key_of,
    latest_per_deployment,
    outcome,
    probe_traffic,
    run_replay,
    sentinels,
    write_jsonl,
)
from tests.support.redis import redis_mismatches
from tests.support.waiting import wait_for
from tests.support.worker import Case, wait_assigned

pytestmark = pytest.mark.integration

INTAKES = ("lanes", "agents")
"""Every live test runs on both of the worker's intakes (`--intake`): the input lanes (the boundary's fetch loop,
coolant/streams/faust/) and Faust's agents over take_events batches."""


@pytest.fixture(params=INTAKES)
def case(case: Case, request: pytest.FixtureRequest) -> Iterator[Case]:
    """The shared `case`, with all its workers on one intake; afterwards, each worker's log shows it ran it."""
    case.intake = request.param
    yield case
    case.assert_intake()


def assert_same_cooldowns(got: list[dict[str, Any]], want: list[dict[str, Any]], *, allow_duplicates: bool) -> int:
    """Live cooldowns == replay's as sets of records (decoded dicts, same event ids). Identical re-emissions are
    tolerated when `allow_duplicates` (at-least-once); a copy that differs from replay's record never is.
    Returns the number of duplicate messages."""
    dups = duplicates(got)
    n_dups = sum(dups.values())
    if not allow_duplicates:
        assert not dups, f"cooldowns emitted more than once: {dups}"
    want_by_id = by_id(want)
    assert len(want_by_id) == len(want), "replay itself emitted an event id twice"
    differing = [cd for cd in got if cd["event_id"] in want_by_id and cd != want_by_id[cd["event_id"]]]
    assert not differing, f"{len(differing)} live records differ from replay's:\n" + "\n".join(
        f"  live   {cd}\n  replay {want_by_id[cd['event_id']]}" for cd in differing[:6])
    got_by_id = by_id(got)
    assert got_by_id == want_by_id, diff_cooldowns(got_by_id, want_by_id)
    return n_dups


async def test_replay_equals_live(case: Case, kafka_bootstrap: str, redis_url: str) -> None:
    lines = fleet_traffic(3000, seed=1)
    expected = case.replay(lines)
    assert len(expected) >= 30, "the traffic should cause dozens of cooldowns"
    w = await case.worker("a", kafka_bootstrap, redis_url=redis_url)
    await w.wait_ready()
    case.log("worker ready")

    await produce_lines(kafka_bootstrap, case.outcomes, lines)
    await wait_caught_up(kafka_bootstrap, case.app_id, case.outcomes, on_timeout=case.logs)
    case.log(f"{len(lines)} records processed")
    got = await read_json(kafka_bootstrap, case.cooldowns)
    assert_same_cooldowns(got, expected, allow_duplicates=False)
    assert await w.metric("coolant_cooldowns_total") == len(expected)

    # Redis: the materializer (same consumer group) has acknowledged every cooldown once its offsets are committed
    await wait_caught_up(kafka_bootstrap, case.app_id, case.cooldowns, on_timeout=case.logs)
    latest = latest_per_deployment(expected)
    idle = [d for d in DEPLOYMENTS if d not in latest]
    problems = await redis_mismatches(redis_url, case.key_prefix, latest, idle)
    assert not problems, "\n".join(problems[:10])
    # the deciding worker wrote them as they became durable; the materializer skipped those it wrote
    early = await w.metric("coolant_redis_early_writes_total", result="written")
    assert early > 0
    assert await w.metric("coolant_redis_writes_total", kind="cooldown", result="written early") > 0
    case.log(f"{len(expected)} cooldowns identical to replay; Redis holds the latest of {len(latest)} deployments "
             f"({early:.0f} written early)")


async def test_replay_transitions_equal_live(case: Case, kafka_bootstrap: str) -> None:
    """`coolant replay --transitions-out` writes the records the live worker publishes on the transitions topic."""
    lines = probe_traffic(12, seed=2)
    expected = case.replay_transitions(lines)
    flips = {(t["previous"], t["healthy"]) for t in expected}
    assert {(None, True), (None, False), (True, False), (False, True)} <= flips, flips
    assert len(expected) >= 60, "the probes should flip dozens of times"
    w = await case.worker("a", kafka_bootstrap)
    await w.wait_ready()

    await produce_lines(kafka_bootstrap, case.health, lines)
    await wait_caught_up(kafka_bootstrap, case.app_id, case.health, on_timeout=case.logs)
    got = await read_json(kafka_bootstrap, case.transitions)
    assert not duplicates(got), f"transitions published more than once: {duplicates(got)}"
    assert by_id(got) == by_id(expected), diff_cooldowns(by_id(got), by_id(expected))

    def per_deployment(records: list[dict[str, Any]]) -> dict[str, list[str]]:
        order: dict[str, list[str]] = {}
        for t in records:
            order.setdefault(t["deployment_id"], []).append(t["event_id"])
        return order

    assert per_deployment(got) == per_deployment(expected)  # each deployment's flips in the same order
    assert await w.metric("coolant_health_transitions_total") == len(expected)
    case.log(f"{len(expected)} transitions identical to replay's")


async def test_bad_input_goes_to_deadletter(case: Case, kafka_bootstrap: str) -> None:
    def fail(eid: str, dep: str, status: int, exc: str, dt: float) -> bytes:
        return outcome(eid, T0 + dt, dep, False, status_code=status, exception_type=exc,
                       exception_message=f"litellm.{exc}: no")

    valid = {
        "v1": fail("dl-v1", "dep-00", 401, "AuthenticationError", 1),
        "v2": fail("dl-v2", "dep-04", 429, "RateLimitError", 2),
        "v3": fail("dl-v3", "dep-08", 401, "AuthenticationError", 3),
        "v4": fail("dl-v4", "dep-12", 429, "RateLimitError", 4),
        "ok": outcome("dl-ok", T0 + 5, "dep-12", True),
    }
    health = orjson.dumps({"schema": "coolant.health/1", "event_id": "dl-h1", "ts": T0 + 2, "deployment_id": "dep-01",
                           "model_group": "grp-0", "healthy": False, "status_code": 500})
    bad = {
        "not json": (b"dep-01", b"this is not json {"),
        "invalid utf-8": (b"dep-01", b'{"schema": "coolant.outcome/1", "event_id": "\xff\xfe"}'),
        "wrong type": (b"dep-01", outcome("dl-b3", T0, "dep-01", True).replace(b'"ok":true', b'"ok":"yes"')),
        "unknown schema": (b"dep-01", outcome("dl-b4", T0, "dep-01", True).replace(b"outcome/1", b"outcome/9")),
        "missing field": (b"dep-01", orjson.dumps({"schema": "coolant.outcome/1", "event_id": "dl-b5", "ts": T0,
                                                   "model_group": "grp-0", "ok": True})),
        "health on outcomes": (b"dep-01", health),
        "not an object": (b"", b"[1, 2, 3]"),
    }
    assert b'"ok":"yes"' in bad["wrong type"][1] and b"outcome/9" in bad["unknown schema"][1]
    k = {name: key_of(line) for name, line in valid.items()}
    sequence: list[tuple[str, bytes, bytes]] = [
        ("v1", k["v1"], valid["v1"]),
        ("not json", *bad["not json"]),
        ("invalid utf-8", *bad["invalid utf-8"]),
        ("v2", k["v2"], valid["v2"]),
        ("dup", k["v2"], valid["v2"]),  # the same event_id again: dropped, one cooldown only
        ("wrong type", *bad["wrong type"]),
        ("unknown schema", *bad["unknown schema"]),
        ("missing field", *bad["missing field"]),
        ("health on outcomes", *bad["health on outcomes"]),
        ("v3", k["v3"], valid["v3"]),
        ("not an object", *bad["not an object"]),
        ("v4", k["v4"], valid["v4"]),
        ("ok", k["ok"], valid["ok"]),
    ]
    expected = case.replay([line for _, _, line in sequence])
    assert sorted(cd["trigger_event_id"] for cd in expected) == ["dl-v1", "dl-v2", "dl-v3", "dl-v4"]

    w = await case.worker("a", kafka_bootstrap)
    await w.wait_ready()
    sent = await produce(kafka_bootstrap, case.outcomes, [(key, line) for _, key, line in sequence])
    where = {name: (meta.partition, meta.offset) for (name, _, _), meta in zip(sequence, sent, strict=True)}
    await wait_caught_up(kafka_bootstrap, case.app_id, case.outcomes, on_timeout=case.logs)

    got = await read_json(kafka_bootstrap, case.cooldowns)
    assert_same_cooldowns(got, expected, allow_duplicates=False)
    assert [cd["trigger_event_id"] for cd in got].count("dl-v2") == 1

    dead = {}
    for msg in await read_topic(kafka_bootstrap, case.deadletter):
        d = orjson.loads(msg.value)
        assert set(d) - {"raw_encoding"} == {"error", "topic", "partition", "offset", "raw", "raw_size"}, d
        dead[d["partition"], d["offset"]] = (msg.key, d)
    assert len(dead) == len(bad), f"{len(dead)} dead letters for {len(bad)} bad records: {list(dead.values())}"
    for name, (key, raw) in bad.items():
        assert where[name] in dead, f"{name!r} (partition/offset {where[name]}) not dead-lettered"
        dl_key, d = dead[where[name]]
        assert d["topic"] == case.outcomes
        assert isinstance(d["error"], str) and d["error"], d
        kept = base64.b64decode(d["raw"]) if d.get("raw_encoding") == "base64" else d["raw"].encode()
        assert kept == raw and d["raw_size"] == len(raw), (name, d)  # B7: byte for byte (base64 if not UTF-8)
        assert (dl_key or b"") == key, (name, dl_key)
    assert "schema" in dead[where["health on outcomes"]][1]["error"]
    assert "schema" in dead[where["unknown schema"]][1]["error"]

    assert await w.metric("coolant_deadletter_total", topic=case.outcomes) == len(bad)
    assert await w.metric("coolant_records_total", topic=case.outcomes, disposition="duplicate") == 1
    case.log(f"{len(bad)} dead letters, 1 duplicate dropped, {len(got)} cooldowns")


async def test_redis_outage(case: Case, kafka_bootstrap: str) -> None:
    lines = fleet_traffic(3000, seed=3)
    expected = case.replay(lines)
    parts = lines[:1000], lines[1000:2000], lines[2000:]
    part2_ids = {orjson.loads(line)["event_id"] for line in parts[1]}
    assert any(cd["trigger_event_id"] in part2_ids for cd in expected), "the outage must see cooldowns to write"

    redis = case.redis_server()
    w = await case.worker("a", kafka_bootstrap, redis_url=redis.url)
    await w.wait_ready()

    await produce_lines(kafka_bootstrap, case.outcomes, parts[0])
    await wait_caught_up(kafka_bootstrap, case.app_id, case.outcomes, on_timeout=case.logs)
    await wait_caught_up(kafka_bootstrap, case.app_id, case.cooldowns, on_timeout=case.logs)
    before = by_id(await read_json(kafka_bootstrap, case.cooldowns))
    assert before, "the first third should already cause cooldowns"
    assert await w.metric("coolant_redis_errors_total") == 0

    redis.stop()  # SHUTDOWN NOSAVE: everything written so far is gone, as after a crash
    case.log(f"redis stopped after {len(before)} cooldowns")
    await produce_lines(kafka_bootstrap, case.outcomes, parts[1])

    async def erroring() -> bool:
        return await w.metric("coolant_redis_errors_total") > 0

    await wait_for(erroring, "coolant_redis_errors_total > 0 while Redis is down", on_timeout=case.logs)
    # deciding goes on while Redis is away: the outcome agent is not blocked by the materializer
    await wait_caught_up(kafka_bootstrap, case.app_id, case.outcomes, on_timeout=case.logs)
    await asyncio.sleep(3)  # keep Redis down a little longer (not an assertion)
    redis.start()
    case.log(f"redis restarted; {await w.metric('coolant_redis_errors_total'):.0f} errors so far")
    await produce_lines(kafka_bootstrap, case.outcomes, parts[2])
    await wait_caught_up(kafka_bootstrap, case.app_id, case.outcomes, on_timeout=case.logs)
    await wait_caught_up(kafka_bootstrap, case.app_id, case.cooldowns, timeout=90, on_timeout=case.logs)

    got = await read_json(kafka_bootstrap, case.cooldowns)
    assert_same_cooldowns(got, expected, allow_duplicates=False)
    # Redis lost everything at the stop; every cooldown decided since must be there, at its deployment's latest end
    since = [cd for cd in got if cd["event_id"] not in before]
    future = [cd for cd in since if cd["until"] > time.time()]
    assert future, "the cooldowns must end in the future for this test to mean anything"
    latest = latest_per_deployment(since)
    for cd in future:
        assert latest[cd["deployment_id"]]["until"] >= cd["until"]
    problems = await redis_mismatches(redis.url, case.key_prefix, latest)
    assert not problems, "\n".join(problems[:10])
    errors = await w.metric("coolant_redis_errors_total")
    assert errors > 0
    case.log(f"{len(since)} cooldowns after the stop, all in Redis; {errors:.0f} Redis errors counted")


def assert_barrier_covers(sent: list[Any], lines: list[bytes], partitions: int) -> None:
    """The sentinels are a completion barrier only if every partition got one."""
    covered = {meta.partition for meta, line in zip(sent, lines, strict=True) if b'"sentinel-' in line}
    assert covered == set(range(partitions)), f"sentinels reached partitions {covered} of {partitions}"


async def test_worker_failover(case: Case, kafka_bootstrap: str) -> None:
    lines = fleet_traffic(3000, seed=4)
    lines += sentinels(lines)
    expected = case.replay(lines)
    half = len(lines) // 2
    # a dead member is noticed after the session timeout: the worker's default (10 s), nothing set here
    a = await case.worker("a", kafka_bootstrap, partitions=4)
    await a.wait_ready()
    b = await case.worker("b", kafka_bootstrap, partitions=4)
    await b.wait_healthy()
    await wait_assigned([a, b])  # the rebalance has given b its share
    base_a, base_b = await a.records_processed(), await b.records_processed()
    case.log("both workers up and assigned")

    await produce_lines(kafka_bootstrap, case.outcomes, lines[:half])

    async def both_processing() -> bool:
        return await a.records_processed() > base_a and await b.records_processed() > base_b

    await wait_for(both_processing, "both workers to process records (partitions split)", 90, 0.2, case.logs)
    done_a = await a.records_processed()
    a.kill()
    case.log(f"worker a killed after processing {done_a - base_a:.0f} records; b: {await b.records_processed():.0f}")

    sent = await produce_lines(kafka_bootstrap, case.outcomes, lines[half:])
    assert_barrier_covers(sent, lines[half:], 4)
    # completion = every partition's last record (a sentinel) decided; the survivor must have taken a's partitions
    got = await wait_sentinels(kafka_bootstrap, case.cooldowns, lines, timeout=120, on_timeout=case.logs)
    assert b.alive, b.log_tail()
    case.log(f"survivor done, {await b.records_processed():.0f} records processed by b")

    n_dups = assert_same_cooldowns(got, expected, allow_duplicates=True)
    lag = await group_lag(kafka_bootstrap, case.app_id, case.outcomes)
    # and the survivor commits what it processed, the taken-over partitions included
    await wait_caught_up(kafka_bootstrap, case.app_id, case.outcomes, timeout=60, on_timeout=case.logs)
    print(f"failover: {len(got)} cooldown messages, {len(by_id(got))} distinct, {n_dups} duplicate messages; "
          f"outcome records not yet committed when the sentinels were seen: {lag}")


async def test_sigterm_hands_over_without_gap_or_duplicate(case: Case, kafka_bootstrap: str) -> None:
    """A rolling restart: SIGTERM one of two workers mid-stream. It finishes its batch, commits and leaves the group,
    so the other takes its partitions from exactly where it stopped: every cooldown once, none missing."""
    lines = fleet_traffic(3000, seed=7)
    lines += sentinels(lines)
    expected = case.replay(lines)
    third = len(lines) // 3
    a = await case.worker("a", kafka_bootstrap, partitions=4, loglevel="info")
    await a.wait_ready()
    b = await case.worker("b", kafka_bootstrap, partitions=4, loglevel="info")  # its recovery, if it fails
    await b.wait_healthy()
    await wait_assigned([a, b])
    base_a, base_b = await a.records_processed(), await b.records_processed()

    await produce_lines(kafka_bootstrap, case.outcomes, lines[:third])

    async def both_processing() -> bool:
        return await a.records_processed() > base_a and await b.records_processed() > base_b

    await wait_for(both_processing, "both workers to process records (partitions split)", 90, 0.2, case.logs)
    # records keep arriving while a shuts down: the second third goes out concurrently with the SIGTERM
    producing = asyncio.create_task(produce_lines(kafka_bootstrap, case.outcomes, lines[third:2 * third]))
    rc = await asyncio.to_thread(a.stop)
    await producing
    assert rc == 0, f"worker a exited with {rc}\n{a.log_tail()}"
    assert "batches in hand decided" in a.log_path.read_text(), a.log_tail()
    case.log("worker a stopped cleanly")

    sent = await produce_lines(kafka_bootstrap, case.outcomes, lines[2 * third:])
    assert_barrier_covers(sent, lines[2 * third:], 4)
    got = await wait_sentinels(kafka_bootstrap, case.cooldowns, lines, timeout=120, on_timeout=case.logs)
    assert b.alive, b.log_tail()
    assert_same_cooldowns(got, expected, allow_duplicates=False)
    await wait_caught_up(kafka_bootstrap, case.app_id, case.outcomes, timeout=60, on_timeout=case.logs)
    print(f"sigterm handover: {len(got)} cooldowns, each once, identical to replay")


@pytest.mark.timeout(900)  # two broker restarts, each waited out by both workers
async def test_broker_restart(case: Case) -> None:
    lines = fleet_traffic(3000, seed=5)
    lines += sentinels(lines)
    expected = case.replay(lines)
    half = len(lines) // 2
    broker = case.broker()
    bs = broker.bootstrap
    case.log(f"second broker up on {bs}")
    w = await case.worker("a", bs)
    await w.wait_ready()

    await produce_lines(bs, case.outcomes, lines[:half])
    await wait_caught_up(bs, case.app_id, case.outcomes, on_timeout=case.logs)
    case.log("first half processed; stopping the broker")
    broker.stop()
    await asyncio.sleep(5)  # the broker stays away a while (not an assertion)
    assert w.alive, "the worker must survive a broker outage\n" + w.log_tail()
    broker.start()
    case.log("broker restarted")

    sent = await produce_lines(bs, case.outcomes, lines[half:])
    assert_barrier_covers(sent, lines[half:], 2)
    got = await wait_sentinels(bs, case.cooldowns, lines, timeout=120,
                               on_timeout=lambda: case.logs() + broker.log_tail())
    assert w.alive, w.log_tail()
    n_dups = assert_same_cooldowns(got, expected, allow_duplicates=True)
    # the worker's consumer group works again too: it commits what it processed
    await wait_caught_up(bs, case.app_id, case.outcomes, timeout=60, on_timeout=case.logs)
    print(f"broker restart: {len(got)} cooldown messages, {len(by_id(got))} distinct, {n_dups} duplicate messages")



async def test_shadow_policy_writes_only_the_shadow_topic(case: Case, kafka_bootstrap: str, redis_url: str) -> None:
    """`--shadow-config`: a candidate decides on the same records, into `<prefix>cooldowns.shadow` only."""
    lines = fleet_traffic(3000, seed=6)
    raw = yaml.safe_load(case.config.read_text())
    candidate = case.tmp / "candidate.yaml"
    candidate.write_text(yaml.safe_dump(override(raw, "router_settings.allowed_fails", 0)))
    expected = case.replay(lines)
    expected_shadow = run_replay(write_jsonl(case.tmp / "shadow.jsonl", lines), candidate, case.tmp / "shadow.out")
    assert {cd["event_id"] for cd in expected_shadow} != {cd["event_id"] for cd in expected}, "policies must differ"
    w = await case.worker("a", kafka_bootstrap, redis_url=redis_url,
                          extra_args=("--shadow-config", str(candidate)))
    await w.wait_ready()
    await produce_lines(kafka_bootstrap, case.outcomes, lines)
    await wait_caught_up(kafka_bootstrap, case.app_id, case.outcomes, on_timeout=case.logs)
    assert_same_cooldowns(await read_json(kafka_bootstrap, case.cooldowns), expected, allow_duplicates=False)
    shadow = await read_json(kafka_bootstrap, case.cooldowns + ".shadow")
    assert_same_cooldowns(shadow, expected_shadow, allow_duplicates=False)
    assert await w.metric("coolant_shadow_cooldowns_total") == len(expected_shadow)
    # Redis holds the enforced policy's cooldowns only
    await wait_caught_up(kafka_bootstrap, case.app_id, case.cooldowns, on_timeout=case.logs)
    latest = latest_per_deployment(expected)
    idle = [d for d in DEPLOYMENTS if d not in latest]
    problems = await redis_mismatches(redis_url, case.key_prefix, latest, idle)
    assert not problems, "\n".join(problems[:10])


async def test_max_ejection_through_the_ejection_stage(case: Case, kafka_bootstrap: str) -> None:
    """X3 live: cooldowns go through the group-keyed ejection stage, which passes and suppresses as replay does.

    A group's candidates come from several partitions, so their order is fixed here by waiting for each verdict
    before publishing the next failure (replay reads them in that same order)."""
    raw = yaml.safe_load(case.config.read_text())
    case.config.write_text(yaml.safe_dump(override(raw, "coolant.max_ejection_percent", 50)))
    deps = ("dep-00", "dep-01", "dep-02", "dep-03")  # grp-0: at most 2 cooled at once

    def auth(i: int, dep: str) -> bytes:
        return outcome(f"x3-{i}", T0 + i, dep, False, status_code=401, exception_type="AuthenticationError",
                       exception_message="litellm.AuthenticationError: bad key")

    lines = [auth(i, dep) for i, dep in enumerate(deps)]
    expected = case.replay(lines)
    assert [cd["deployment_id"] for cd in expected] == ["dep-00", "dep-01"]
    w = await case.worker("a", kafka_bootstrap)
    await w.wait_ready()
    for n, line in enumerate(lines, 1):
        await produce_lines(kafka_bootstrap, case.outcomes, [line])

        async def decided(n: int = n) -> bool:
            passed = await w.metric("coolant_cooldowns_total")
            return passed + await w.metric("coolant_cooldowns_suppressed_total") == n

        await wait_for(decided, f"the X3 verdict on candidate {n}", on_timeout=case.logs)
    assert_same_cooldowns(await read_json(kafka_bootstrap, case.cooldowns), expected, allow_duplicates=False)
    assert await w.metric("coolant_cooldowns_suppressed_total", model_group="grp-0") == 2
