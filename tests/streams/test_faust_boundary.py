"""The Faust boundary's version gate (an untested faust-streaming is refused, or allowed with nothing of the
boundary installed), what each intake installs, the fetch settings, and the recovery watch."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from faust.types import TP

from coolant.config.loader import load_config
from coolant.streams import faust
from coolant.streams.app import Pipeline, WorkerOptions
from coolant.streams.faust import version
from coolant.streams.faust.consumer import SeekSafeConsumer
from coolant.streams.faust.producer import TrackedProducer
from coolant.streams.faust.recovery import RecoveryWatch
from coolant.streams.options import Intake
from coolant.streams.worker import build_pipeline

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "litellm.yaml"


def pipeline(**options: Any) -> Pipeline:
    return Pipeline(load_config(EXAMPLE), WorkerOptions(web_port=16067, partitions=2, **options), sink=None)


def test_a_tested_version_gets_the_lanes_and_the_guards() -> None:
    p = pipeline()
    assert faust.faust_version() in faust.TESTED_FAUST
    assert p.lanes_on and p.agents_because is None
    assert issubclass(p.app.transport.Consumer, SeekSafeConsumer)
    assert p.app.transport.Producer is TrackedProducer
    assert "resume_if_suspended" in repr(p.app.flow_control.resume)


def test_an_untested_version_is_refused_and_says_how_to_run_anyway(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(version, "faust_version", lambda: "9.9.9")
    with pytest.raises(faust.UntestedFaust, match=r"9\.9\.9.*--allow-untested-faust.*failover guards"):
        pipeline()


def test_an_untested_version_is_refused_before_the_worker_connects(monkeypatch: pytest.MonkeyPatch) -> None:
    """`coolant worker` checks before it creates topics: the refusal is the error, not an unreachable broker."""
    monkeypatch.setattr(version, "faust_version", lambda: "9.9.9")
    cfg = load_config(EXAMPLE)
    cfg = replace(cfg, runtime=replace(cfg.runtime, kafka=replace(cfg.runtime.kafka, bootstrap_servers="127.0.0.1:9")))
    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(faust.UntestedFaust):
            build_pipeline(cfg, WorkerOptions(), loop)
    finally:
        loop.close()


def test_an_untested_version_allowed_installs_nothing_and_says_what_is_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(version, "faust_version", lambda: "9.9.9")
    p = pipeline(allow_untested_faust=True)
    assert not p.lanes_on
    assert not issubclass(p.app.transport.Consumer, SeekSafeConsumer)
    assert p.app.transport.Producer is not TrackedProducer
    assert "resume_if_suspended" not in repr(p.app.flow_control.resume)
    assert p.agents_because is not None and "9.9.9" in p.agents_because  # logged at start (the live tests check it)
    assert "failover guards" in p.agents_because and "recovery watch" in p.agents_because
    assert set(p.app.agents) >= {"decide-outcomes", "decide-health"}


def test_agents_on_a_tested_version_keep_the_failover_guards() -> None:
    p = pipeline(intake="agents")
    assert not p.lanes_on
    assert p.agents_because is not None and "--intake agents" in p.agents_because
    consumer = p.app.transport.Consumer
    assert issubclass(consumer, SeekSafeConsumer)
    assert consumer.__mro__[1] is SeekSafeConsumer, "Faust's agents must not get the lanes' consumer"
    assert p.app.transport.Producer is TrackedProducer
    assert set(p.app.agents) >= {"decide-outcomes", "decide-health"}


@pytest.mark.parametrize("intake", ["lanes", "agents"])
async def test_the_fetch_settings_reach_the_kafka_consumer_on_both_intakes(intake: Intake) -> None:
    """--fetch-max-wait-ms / --fetch-min-bytes: set on the aiokafka consumer Faust's thread creates (Faust itself
    fixes 1500 ms and 1 byte), for this app only."""
    p = pipeline(intake=intake, fetch_max_wait_ms=7, fetch_min_bytes=1234)
    other = pipeline()  # another app in the same process keeps its own (the defaults)
    async def conductor(message: object) -> None:
        """Never called: the consumer is not started."""

    consumer = p.app.transport.create_consumer(callback=conductor, on_partitions_revoked=None,
                                               on_partitions_assigned=None)
    thread = consumer._thread
    client = thread._create_worker_consumer(p.app.transport)  # what the thread starts (never started here)
    try:
        assert (client._fetch_max_wait_ms, client._fetch_min_bytes) == (7, 1234)
    finally:
        await client.stop()
    tuning = other.app.transport.Consumer.fetch_tuning
    defaults = WorkerOptions()
    assert (tuning.max_wait_ms, tuning.min_bytes) == (defaults.fetch_max_wait_ms, defaults.fetch_min_bytes)


class _Recovery:
    def __init__(self, offsets: dict[Any, int], highwaters: dict[Any, int]) -> None:
        self.in_recovery = True
        self.active_offsets = offsets
        self.active_highwaters = highwaters

    def active_remaining(self) -> dict[Any, int]:
        return {tp: hw - self.active_offsets[tp] for tp, hw in self.active_highwaters.items()}


class _State:
    def __init__(self, position: int) -> None:
        self.position = position


class _Consumer:
    """Faust's consumer as `RecoveryWatch` reads it: aiokafka's fetch positions, and `seek`."""

    def __init__(self, positions: dict[Any, int]) -> None:
        self.positions = positions
        self.sought: list[tuple[Any, int]] = []
        assignment = SimpleNamespace(state_value=lambda tp: _State(self.positions[tp]))
        client = SimpleNamespace(_subscription=SimpleNamespace(subscription=SimpleNamespace(assignment=assignment)))
        self._thread = SimpleNamespace(_consumer=client)

    async def seek(self, tp: Any, offset: int) -> None:
        self.sought.append((tp, offset))
        self.positions[tp] = offset


async def test_a_changelog_partition_whose_recovery_stands_still_behind_the_fetch_is_read_again() -> None:
    """The stall seen: recovery at -1 of 9, aiokafka's position at 10 (the batch dropped by Faust's getmany)."""
    lost, busy = TP("app-request-state-changelog", 2), TP("app-request-seen-changelog", 0)
    recovery = _Recovery({lost: -1, busy: 3}, {lost: 9, busy: 40})
    consumer = _Consumer({lost: 10, busy: 20})
    watch = RecoveryWatch(SimpleNamespace(tables=SimpleNamespace(recovery=recovery), consumer=consumer))
    await watch.tick()
    assert consumer.sought == [], "one look is no evidence: the records may be on their way"
    recovery.active_offsets[busy] = 12  # this one moved on
    await watch.tick()
    assert consumer.sought == [(lost, 0)]
    recovery.active_offsets[busy] = 19
    await watch.tick()  # the rewind took the position back: nothing more to do
    assert consumer.sought == [(lost, 0)]
    recovery.in_recovery = False
    await watch.tick()
    assert consumer.sought == [(lost, 0)]
