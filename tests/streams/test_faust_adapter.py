"""The version gate of the fast path: on an untested faust-streaming nothing private is installed."""

from __future__ import annotations

from pathlib import Path

import pytest

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
