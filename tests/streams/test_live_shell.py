"""The live shell's hot path in memory (tests/streams/memory.py): batching, acknowledgements, dedup, dead letters,
routing and draining, with the worker's real code and no broker. Each test runs in milliseconds; what needs a
broker (rebalances, commits, recovery, Faust's agents) is in tests/integration."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import orjson
import pytest
import yaml

from coolant.config.loader import Config, load_config, parse_config
from coolant.config.overrides import override
from coolant.io.materializer import EarlyWrites
from coolant.processors import Engine
from coolant.schemas import Cooldown, HealthTransition, InvalidRecord, decode, encode
from coolant.streams import metrics
from coolant.streams.faust import RawTable
from tests.support.records import T0, fleet_traffic, outcome, probe_traffic, write_config

from .memory import MemoryWorker, Message


@pytest.fixture
def cfg(tmp_path: Path) -> Config:
    return load_config(write_config(tmp_path / "litellm.yaml"))


def replayed(cfg: Config, lines: list[bytes]) -> tuple[list[Cooldown], list[HealthTransition]]:
    """What `coolant replay` decides for `lines`, in order (invalid lines skipped)."""
    engine = Engine(cfg.policy)
    cooldowns, transitions = [], []
    for line in lines:
        try:
            step = engine.feed(decode(line))
        except InvalidRecord:
            continue
        if step.cooldown is not None:
            cooldowns.append(step.cooldown)
        if step.transition is not None:
            transitions.append(step.transition)
    return cooldowns, transitions


def auth_error(eid: str, dep: str, dt: float) -> bytes:
    return outcome(eid, T0 + dt, dep, False, status_code=401, exception_type="AuthenticationError",
                   exception_message="litellm.AuthenticationError: bad key")


def decoded(values: list[dict[str, object]]) -> list[bytes]:
    return sorted(orjson.dumps(v, option=orjson.OPT_SORT_KEYS) for v in values)


def as_sorted(records: list[Cooldown] | list[HealthTransition]) -> list[bytes]:
    return decoded([orjson.loads(encode(r)) for r in records])


async def test_the_shell_decides_what_replay_decides(cfg: Config) -> None:
    """A fleet's outcomes and probes through lanes, deciders and path stores: the cooldowns and health transitions
    replay gives, each once, and every record acknowledged."""
    outcomes, probes = fleet_traffic(3000, seed=4), probe_traffic(10, seed=4)
    want_cooldowns, _ = replayed(cfg, outcomes)
    _, want_transitions = replayed(cfg, probes)
    assert len(want_cooldowns) >= 30 and len(want_transitions) >= 40
    async with MemoryWorker(cfg) as w:
        await w.deliver(w.names.outcomes, outcomes)
        await w.deliver(w.names.health, probes)
        await w.settled()
    assert decoded(w.records(w.names.cooldowns)) == as_sorted(want_cooldowns)
    assert decoded(w.records(w.names.health_transitions)) == as_sorted(want_transitions)
    assert Counter((m.topic, m.partition, m.offset) for m in w.consumer.acked) == Counter(
        {(m.topic, m.partition, m.offset): 1 for m in w.consumer.acked}), "a record acknowledged twice"
    assert len(w.consumer.acked) == len(outcomes) + len(probes)


async def test_a_shadow_policy_decides_the_same_records_into_its_own_topics_only(cfg: Config, tmp_path: Path) -> None:
    """The shadow decider routes cooldowns to `<cooldowns>.shadow` and publishes no health state or transition."""
    raw = yaml.safe_load((tmp_path / "litellm.yaml").read_text())
    candidate = parse_config(override(raw, "router_settings.allowed_fails", 0)).policy
    outcomes, probes = fleet_traffic(1500, seed=5), probe_traffic(4, seed=5)
    want, _ = replayed(cfg, outcomes)
    want_shadow = Engine(candidate).run(decode(line) for line in outcomes)
    assert as_sorted(want) != as_sorted(want_shadow), "the policies must differ"
    _, flips = replayed(cfg, probes)
    async with MemoryWorker(cfg, shadow=candidate) as w:
        await w.deliver(w.names.outcomes, outcomes)
        await w.deliver(w.names.health, probes)
        await w.settled()
    assert decoded(w.records(w.names.cooldowns)) == as_sorted(want)
    assert decoded(w.records(w.names.cooldowns + ".shadow")) == as_sorted(want_shadow)
    assert decoded(w.records(w.names.health_transitions)) == as_sorted(flips)  # the enforced decider's, once
    engine = Engine(cfg.policy)
    health_changes = sum(engine.feed(decode(probe)).health is not None for probe in probes)
    assert len(w.records(w.names.health_state)) == health_changes > 0  # one per change, the shadow's none


async def test_max_ejection_in_the_shell_is_replays_verdict(cfg: Config, tmp_path: Path) -> None:
    """X3 live: candidates go to the group-keyed ejection stage, which passes and suppresses what replay does.

    On a broker a group's candidates from several partitions meet in no fixed order; here they are sent in the
    order the batch decided them, which is the input order, so the verdicts must be replay's exactly."""
    raw = yaml.safe_load((tmp_path / "litellm.yaml").read_text())
    x3 = parse_config(override(raw, "coolant.max_ejection_percent", 25))
    lines = fleet_traffic(3000, seed=7)
    engine = Engine(x3.policy)
    steps = [engine.feed(decode(line)) for line in lines if b'"schema"' in line]
    want = [s.cooldown for s in steps if s.cooldown is not None]
    suppressed = [s.suppressed for s in steps if s.suppressed is not None]
    assert want and suppressed, "the traffic should both pass and suppress candidates"
    async with MemoryWorker(x3) as w:
        await w.deliver(w.names.outcomes, lines)
        await w.settled()
        assert w.records(w.names.cooldowns) == [], "with X3 on, cooldowns go through the ejection stage"
        assert await w.stage(w.names.candidates) == len(want) + len(suppressed)
    assert decoded(w.records(w.names.cooldowns)) == as_sorted(want)
    assert w.records(w.names.deadletter) == []
    ejections = RawTable(w.pipeline.enforced.ejection_table).changelog
    assert len(w.producer.on(ejections)) == len(want)  # the group's ejection state saved on every pass


async def test_a_batch_is_acknowledged_only_once_its_outputs_are_durable(cfg: Config) -> None:
    """Cooldown first, then the states, then the acks: a crash before the ack re-decides, never loses a cooldown."""
    async with MemoryWorker(cfg) as w:
        w.producer.hold()  # the broker does not acknowledge anything yet
        lines = [outcome(f"ok-{i}", T0 + i, "dep-00", True) for i in range(5)] + [auth_error("boom", "dep-00", 6)]
        await w.deliver(w.names.outcomes, lines)
        await w.changed.until(lambda: w.producer.held >= 1, "the cooldown to be sent")
        assert not w.consumer.acked, "acknowledged before the cooldown was durable"
        assert not w.producer.on(w.state_changelog), "the state was saved before the cooldown was durable"
        w.producer.release()
        await w.settled()
    cooldown = w.index("send", w.names.cooldowns)
    state = w.index("send", w.state_changelog, b"dep-00")
    acks = w.index("ack", w.names.outcomes)
    assert len(cooldown) == 1 and len(state) == 1 and len(acks) == len(lines)
    assert cooldown[0] < state[0] < min(acks)


async def test_a_busy_deployment_costs_one_state_write_per_batch(cfg: Config) -> None:
    """Records pending together are one batch: decided in order, the deployment's state written once."""
    w = MemoryWorker(cfg)
    first = [outcome(f"a-{i}", T0 + i / 10, "dep-03", True) for i in range(300)]
    await w.deliver(w.names.outcomes, first)  # all pending before the decider runs: one batch
    async with w:
        await w.settled()
        assert len(w.producer.on(w.state_changelog)) == 1
        # the fetch loop yields every YIELD_EVERY records, and a decider woken by the first waits only FILL_WITHIN
        # for more: on a loaded machine that can expire mid-delivery. A generous window keeps the 300 one batch.
        w.pipeline.intake.lanes[w.names.outcomes].fill_within = 1.0
        await w.deliver(w.names.outcomes, [outcome(f"b-{i}", T0 + 30 + i / 10, "dep-03", True) for i in range(300)])
        await w.settled()
    writes = w.producer.on(w.state_changelog)
    assert len(writes) == 2, f"{len(writes)} state writes for two batches"
    assert all(s.key == b"dep-03" and s.partition == w.partition("dep-03") for s in writes)


async def test_redelivered_records_are_duplicates_within_a_batch_across_batches_and_after_a_restart(
    cfg: Config,
) -> None:
    """L2 in the shell: the seen ids live with the state, so a record delivered again (at-least-once publishers,
    a worker that crashed before its commit) never cools twice, even on the worker that takes over."""
    lines = [auth_error(f"e{i}", dep, i) for i, dep in enumerate(("dep-00", "dep-05", "dep-10", "dep-15"))]
    async with MemoryWorker(cfg, app_id="dedup") as first:
        topic = first.names.outcomes
        before = duplicates(topic)
        await first.deliver(topic, lines + lines[:2])  # copies in the same batch
        await first.settled()
        await first.deliver(topic, lines)  # and in a later one
        await first.settled()
    assert len(first.records(first.names.cooldowns)) == len(lines)
    assert duplicates(topic) - before == 6

    async with MemoryWorker(cfg, app_id="dedup") as second:  # the next owner, its tables recovered
        second.recover(first)
        await second.deliver(topic, lines)
        await second.settled()
    assert second.records(second.names.cooldowns) == [], "a redelivered record cooled again after the restart"
    assert duplicates(topic) - before == 6 + len(lines)
    assert len(second.consumer.acked) == len(lines)


def duplicates(topic: str) -> float:
    """The worker's count of records dropped as duplicates (L2) on `topic` so far (the process's registry)."""
    return metrics.REGISTRY.get_sample_value("coolant_records_total", {"topic": topic, "disposition": "duplicate"}) or 0


async def test_bad_input_is_dead_lettered_and_acknowledged_in_order(cfg: Config) -> None:
    async with MemoryWorker(cfg) as w:
        topic = w.names.outcomes
        await w.deliver(topic, [
            auth_error("v1", "dep-00", 1),
            (b"dep-00", b"not json {"),
            (b"dep-00", None),  # a tombstone: nothing to decide, nothing to report
            (b"dep-00", outcome("v2", T0, "dep-00", True).replace(b"outcome/1", b"outcome/9")),
            auth_error("v3", "dep-04", 3),
        ])
        await w.settled()
    dead = w.records(w.names.deadletter)
    assert [d["offset"] for d in dead] == [1, 3] and all(d["topic"] == topic for d in dead)
    assert [cd["trigger_event_id"] for cd in w.records(w.names.cooldowns)] == ["v1", "v3"]
    assert max(w.index("send", w.names.deadletter)) < min(w.index("ack", topic))


async def test_a_misrouted_record_is_republished_and_decided_once_on_its_partition(cfg: Config) -> None:
    async with MemoryWorker(cfg) as w:
        right = w.partition("dep-07")
        [wrong] = await w.deliver(w.names.outcomes, [auth_error("m1", "dep-07", 1)], partition=(right + 1) % 4)
        await w.settled()
        assert w.records(w.names.cooldowns) == [], "decided on the wrong partition"
        [copy] = await w.pump(w.names.outcomes)
        await w.settled()
    assert (copy.partition, copy.value) == (right, wrong.value)
    assert [cd["trigger_event_id"] for cd in w.records(w.names.cooldowns)] == ["m1"]
    # the copy was durable before the original was acknowledged
    assert w.index("send", w.names.outcomes)[0] < w.log.index(("ack", w.names.outcomes, b"dep-07", wrong.partition))


async def test_stopping_lets_the_batch_in_hand_finish(cfg: Config) -> None:
    """SIGTERM while a batch waits for the broker: the batch is decided, saved and acknowledged before the stop
    returns, so the commit Faust makes then covers it."""
    w = MemoryWorker(cfg)
    w.start()
    w.producer.hold()
    await w.deliver(w.names.outcomes, [auth_error("s1", "dep-02", 1)])
    await w.changed.until(lambda: w.producer.held >= 1, "the cooldown to be sent")
    stopping = asyncio.create_task(w.stop())
    await asyncio.sleep(0)
    assert not stopping.done() and not w.consumer.acked
    w.producer.release()
    await asyncio.wait_for(stopping, 10)
    assert len(w.consumer.acked) == 1 and len(w.records(w.names.cooldowns)) == 1


async def test_a_revocation_waits_for_the_batch_in_hand_and_leaves_what_was_fetched_before_it(cfg: Config) -> None:
    """A rebalance: Faust's `on_partitions_revoked` signal returns only once the batch being decided is durable
    (its states flushed), so the next owner recovers them. A message fetched in an earlier consumer generation is
    stale: neither decided nor acknowledged (its partition is read again from the commit, here or elsewhere)."""
    w = MemoryWorker(cfg)
    app, p = w.pipeline.app, w.pipeline
    app.consumer_generation_id = 3
    w.start()
    w.producer.hold()
    await w.deliver(w.names.outcomes, [auth_error("r1", "dep-02", 1)])
    await w.changed.until(lambda: w.producer.held >= 1, "the cooldown to be sent")
    revoking = asyncio.create_task(p.fence.on_partitions_revoked(app, {("outcomes", 0)}))
    await asyncio.sleep(0.05)
    assert not revoking.done(), "the revocation must wait for the batch in hand"
    w.producer.release()
    await asyncio.wait_for(revoking, 10)
    assert w.producer.flushes >= 1
    assert [m.offset for m in w.consumer.acked] == [0]
    assert [cd["deployment_id"] for cd in w.records(w.names.cooldowns)] == ["dep-02"]

    stale_before = metrics.RECORDS.labels(w.names.outcomes, "stale")._value.get()
    r2 = auth_error("r2", "dep-05", 2)
    during = Message(w.names.outcomes, w.partition("dep-05"), 0, b"dep-05", r2, generation_id=3)
    await p.intake.decide_batch(w.names.outcomes, [during])  # taken before the new assignment came
    assert not w.records(w.names.cooldowns)[1:] and during not in w.consumer.acked
    plain = Message(w.names.outcomes, w.partition("dep-05"), 0, b"dep-05", r2, generation_id=3)
    await p.intake.decide_batch(w.names.outcomes, [plain], ack=False)  # Faust's agents' take_events batch
    assert plain.acked, "Faust's own acknowledgement of the batch must record nothing for a stale message"

    app.consumer_generation_id = 4  # the consumer took the new generation; Faust's assignment signal comes later
    late = Message(w.names.outcomes, w.partition("dep-05"), 1, b"dep-05", r2, generation_id=3)
    await p.intake.decide_batch(w.names.outcomes, [late])  # fetched before the rebalance, taken after it
    again = await w.deliver(w.names.outcomes, [r2])  # read again from the commit
    await w.changed.until(lambda: len(w.consumer.acked) == 2, "the re-read record to be acknowledged")
    assert w.consumer.acked[1] is again[0]
    assert metrics.RECORDS.labels(w.names.outcomes, "stale")._value.get() == stale_before + 3
    assert [cd["deployment_id"] for cd in w.records(w.names.cooldowns)] == ["dep-02", "dep-05"]
    await p.fence.on_partitions_assigned(app, {("outcomes", 0)})

    app.consumer_generation_id = 1  # a group deleted and made again counts its generations from the start
    await w.deliver(w.names.outcomes, [auth_error("r3", "dep-07", 3)])
    await w.changed.until(lambda: len(w.consumer.acked) == 3, "a record of the lower generation to be decided")
    await w.stop()


async def test_the_fetch_loop_skips_what_it_read_already_and_routes_other_topics_to_faust(cfg: Config) -> None:
    """`LaneConsumer._drain_messages`: input messages go to their lane once; a message fetched again after a seek
    (below the read offset) never reaches the deciders; a topic no lane reads goes to Faust's conductor."""
    async with MemoryWorker(cfg) as w:
        topic = w.names.outcomes
        part = w.partition("dep-01")
        fetched = [Message(topic, part, i, b"dep-01", outcome(f"f{i}", T0 + i, "dep-01", True)) for i in range(7)]
        before = duplicates(topic)
        await w.fetch(fetched[:5])
        await w.fetch(fetched[2:])  # a seek back: 2-4 again, then 5 and 6
        other = Message("some-other-topic", 0, 0, b"k", b"{}")
        await w.fetch([other])
        await w.settled()
    # 2 and 3 are below the read offset (4): skipped. 4 itself passes again, as in Faust's own loop (after a seek
    # the read offset is the next one to read); the deciders drop it as a duplicate (L2).
    assert [m.offset for m in w.consumer.acked] == [0, 1, 2, 3, 4, 4, 5, 6]
    assert duplicates(topic) - before == 1
    assert w.conducted == [other]


async def test_the_fetch_loop_drops_input_while_flow_is_suspended(cfg: Config) -> None:
    """During a rebalance Faust suspends flow: what is fetched then is dropped (and read again from the commit)."""
    async with MemoryWorker(cfg) as w:
        w.fetcher.flow_active = False
        await w.deliver(w.names.outcomes, [auth_error("r1", "dep-00", 1)])
        w.fetcher.flow_active = True
        await w.settled()
    assert w.delivered == 0 and w.records(w.names.cooldowns) == []


class LoggedSink:
    """Stands for the worker's `RedisSink`: each cooldown write is logged in the worker's event log as it starts
    ("redis", "cooldown", deployment id, None)."""

    def __init__(self, w: MemoryWorker) -> None:
        self.w = w

    async def write(self, cd: Cooldown, *, prefetch: bool = False) -> bool:
        self.w.log.append(("redis", "cooldown", cd.deployment_id.encode(), None))
        self.w.changed.notify()
        return True


def early_writes(w: MemoryWorker) -> None:
    early = EarlyWrites(LoggedSink(w), on_latency=metrics.STAGE["redis"].observe)  # type: ignore[arg-type]
    w.pipeline.early = w.pipeline.enforced.early = early  # the drain's and the decider's


async def test_an_early_write_goes_out_as_soon_as_its_cooldown_is_decided(cfg: Config) -> None:
    """The deciding worker's Redis write waits for nothing: not for the cooldown record's acknowledgement by the
    broker, nor for the rest of its batch to be decided, nor for the batch's states to be saved. The batch's
    acknowledgement and its states still wait for the cooldown record to be durable."""
    lines = [auth_error("early", "dep-00", 0)]
    lines += [outcome(f"ok-{i}", T0 + i, f"dep-{i:02d}", True) for i in range(1, 20)]
    async with MemoryWorker(cfg) as w:
        early_writes(w)
        w.producer.hold()
        await w.deliver(w.names.outcomes, lines)
        await w.changed.until(lambda: bool(w.index("redis", "cooldown")), "the early write, its record not durable")
        assert w.producer.held >= 1
        assert not w.consumer.acked, "acknowledged before the cooldown was durable"
        assert not w.producer.on(w.state_changelog), "the state was saved before the cooldown was durable"
        w.producer.release()
        await w.settled()
    redis, cooldown = w.index("redis", "cooldown"), w.index("send", w.names.cooldowns)
    states = w.index("send", w.state_changelog)
    assert len(redis) == 1 and len(cooldown) == 1 and len(states) == len(lines)
    assert cooldown[0] < redis[0] < min(states), "the early write waited for the batch"


async def test_a_batch_sends_all_its_cooldowns_before_awaiting_any(cfg: Config) -> None:
    """Five deployments cooled in one batch: the five cooldowns are in flight together (one broker round trip for
    the batch, not one per cooldown in turn), and still every one is durable before the states are saved."""
    lines = [auth_error(f"b{i}", f"dep-{i:02d}", i) for i in range(5)]
    async with MemoryWorker(cfg) as w:
        w.producer.hold()
        await w.deliver(w.names.outcomes, lines)
        await w.changed.until(lambda: w.producer.held >= 5, "all five cooldowns sent before any is acknowledged")
        assert not w.producer.on(w.state_changelog), "a state saved before its cooldown was durable"
        w.producer.release()
        await w.settled()
    cooldowns = w.index("send", w.names.cooldowns)
    assert len(cooldowns) == 5 and max(cooldowns) < min(w.index("send", w.state_changelog))


def stage_counts() -> dict[str, float]:
    return {stage: metrics.REGISTRY.get_sample_value("coolant_cooldown_stage_seconds_count", {"stage": stage}) or 0.0
            for stage in metrics.COOLDOWN_STAGES}


async def test_each_enforced_cooldown_times_its_stages_once(cfg: Config) -> None:
    """publish -> fetched -> queued -> decided, then durable and redis: one observation per stage per cooldown (the
    figures bench/live_bench.py breaks its latency into); records that cool nothing time nothing."""
    before = stage_counts()
    async with MemoryWorker(cfg) as w:
        early_writes(w)
        await w.deliver(w.names.outcomes, [outcome(f"ok-{i}", T0 + i, "dep-01", True) for i in range(10)])
        await w.settled()
        assert stage_counts() == before
        await w.deliver(w.names.outcomes, [auth_error("t1", "dep-00", 20), auth_error("t2", "dep-05", 21)])
        await w.settled()
        await w.changed.until(lambda: len(w.index("redis", "cooldown")) == 2, "both early writes")
        await w.pipeline.drain()  # the early writes' own bookkeeping done
    after = stage_counts()
    assert {stage: after[stage] - before[stage] for stage in after} == dict.fromkeys(metrics.COOLDOWN_STAGES, 2.0)
