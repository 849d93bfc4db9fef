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
    assert p.app.transport.Consumer is faust_adapter.SeekSafeConsumer


def test_a_misspelt_switch_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(faust_adapter.PATH_ENV, "plian")
    with pytest.raises(ValueError, match="plian"):
        pipeline()
