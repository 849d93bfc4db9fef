"""The version gate of the fast path (on an untested faust-streaming nothing private is installed), and the
recovery watch."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from faust.types import TP

from coolant.config.loader import load_config
from coolant.streams import faust_adapter
from coolant.streams.app import Pipeline, WorkerOptions

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "litellm.yaml"


def pipeline() -> Pipeline:
    return Pipeline(load_config(EXAMPLE), WorkerOptions(web_port=16067, partitions=2), sink=None)


def test_tested_version_gets_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(faust_adapter.PATH_ENV, raising=False)
    p = pipeline()
    assert faust_adapter.faust_version() in faust_adapter.TESTED_FAUST
    assert p.fast and p.plain_because is None
    assert issubclass(p.app.transport.Consumer, faust_adapter.SeekSafeConsumer)


def test_untested_version_installs_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(faust_adapter.PATH_ENV, raising=False)
    monkeypatch.setattr(faust_adapter, "faust_version", lambda: "9.9.9")
    p = pipeline()
    assert not p.fast
    assert not issubclass(p.app.transport.Consumer, faust_adapter.SeekSafeConsumer)
    assert "resume_if_suspended" not in repr(p.app.flow_control.resume)
    assert p.plain_because is not None and "9.9.9" in p.plain_because  # logged at start (the live tests check it)
    assert set(p.app.agents) >= {"decide-outcomes", "decide-health"}


def test_plain_on_a_tested_version_keeps_the_failover_guards(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(faust_adapter.PATH_ENV, "plain")
    p = pipeline()
    assert not p.fast
    assert p.plain_because is not None and faust_adapter.PATH_ENV in p.plain_because
    consumer = p.app.transport.Consumer
    assert issubclass(consumer, faust_adapter.SeekSafeConsumer)
    assert consumer.__mro__[1] is faust_adapter.SeekSafeConsumer, "the plain path must not get the lane consumer"


def test_a_misspelt_switch_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(faust_adapter.PATH_ENV, "plian")
    with pytest.raises(ValueError, match="plian"):
        pipeline()


@pytest.mark.parametrize("path", ["fast", "plain"])
async def test_the_fetch_settings_reach_the_kafka_consumer_on_both_paths(monkeypatch: pytest.MonkeyPatch,
                                                                        path: str) -> None:
    """--fetch-max-wait-ms / --fetch-min-bytes: set on the aiokafka consumer Faust's thread creates (Faust itself
    fixes 1500 ms and 1 byte), for this app only."""
    monkeypatch.setenv(faust_adapter.PATH_ENV, path)
    opts = WorkerOptions(web_port=16067, partitions=2, fetch_max_wait_ms=7, fetch_min_bytes=1234)
    p = Pipeline(load_config(EXAMPLE), opts, sink=None)
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
    watch = faust_adapter.RecoveryWatch(SimpleNamespace(tables=SimpleNamespace(recovery=recovery), consumer=consumer))
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
