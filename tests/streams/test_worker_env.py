"""Faust lets environment variables override settings coolant sets from its own options; the worker drops them."""

from __future__ import annotations

from pathlib import Path

import pytest

from coolant.config.errors import ConfigError
from coolant.config.loader import load_config
from coolant.streams.app import Pipeline, WorkerOptions
from coolant.streams.worker import FAUST_ENV_SET_BY_COOLANT, drop_conflicting_env

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "litellm.yaml"


def test_drops_only_the_variables_coolant_sets() -> None:
    env = {"WEB_PORT": "1", "BROKER_URL": "kafka://elsewhere:9092", "BROKER_SESSION_TIMEOUT": "60",
           "BROKER_MAX_POLL_RECORDS": "10", "HOME": "/root"}
    assert sorted(drop_conflicting_env(env)) == ["BROKER_SESSION_TIMEOUT", "BROKER_URL", "WEB_PORT"]
    assert env == {"BROKER_MAX_POLL_RECORDS": "10", "HOME": "/root"}


def test_options_win_once_the_variables_are_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the guard Faust would take WEB_PORT and TOPIC_PARTITIONS from the environment."""
    monkeypatch.setenv("WEB_PORT", "1")
    monkeypatch.setenv("TOPIC_PARTITIONS", "99")
    import os

    dropped = drop_conflicting_env(os.environ)
    assert set(dropped) == {"WEB_PORT", "TOPIC_PARTITIONS"}
    assert all(name not in os.environ for name in FAUST_ENV_SET_BY_COOLANT)
    cfg = load_config(EXAMPLE)
    app = Pipeline(cfg, WorkerOptions(web_port=16066, partitions=3), sink=None).app
    assert app.conf.web_port == 16066
    assert app.conf.topic_partitions == 3


def test_takeover_timeouts_reach_faust(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--session-timeout` & co. are Faust settings; BROKER_SESSION_TIMEOUT in the environment must not win."""
    import os

    monkeypatch.setenv("BROKER_SESSION_TIMEOUT", "60")
    drop_conflicting_env(os.environ)
    opts = WorkerOptions(session_timeout=7.5, heartbeat_interval=0.5, rebalance_timeout=12.0)
    conf = Pipeline(load_config(EXAMPLE), opts, sink=None).app.conf
    assert (conf.broker_session_timeout, conf.broker_heartbeat_interval, conf.broker_rebalance_timeout) == (
        7.5, 0.5, 12.0)


def test_config_loaded_in_a_child_is_the_config(tmp_path: Path) -> None:
    from coolant.streams.worker import load_config_in_child

    assert load_config_in_child(EXAMPLE) == load_config(EXAMPLE)
    bad = tmp_path / "bad.yaml"
    bad.write_text("model_list: [\n")
    with pytest.raises(ConfigError) as direct:
        load_config(bad)
    with pytest.raises(ConfigError) as via_child:
        load_config_in_child(bad)
    assert str(via_child.value) == str(direct.value)
