"""Command-line errors of `coolant tail` and `coolant alerts` that need no broker: one line, exit 2."""

from __future__ import annotations

import socket

from typer.testing import CliRunner

from coolant.cli.commands import app


def dead_bootstrap() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def test_unreachable_broker_is_one_line_and_exit_2() -> None:
    addr = dead_bootstrap()
    for args in (["tail"], ["alerts", "--dry-run"]):
        r = CliRunner().invoke(app, [*args, "--bootstrap", addr, "--connect-timeout", "10"])
        assert r.exit_code == 2, r.output
        expected = f"coolant: error: kafka {addr}: cannot connect (is Kafka running there?)"
        assert r.output.strip().splitlines() == [expected]


def test_option_errors() -> None:
    run = CliRunner().invoke
    r = run(app, ["alerts", "--bootstrap", dead_bootstrap()], env={"COOLANT_ALERTS_WEBHOOK": ""})
    assert r.exit_code == 2 and "--webhook URL (or COOLANT_ALERTS_WEBHOOK) is required" in r.output
    r = run(app, ["alerts", "--webhook", "ftp://example.com/x"])
    assert r.exit_code == 2 and "not an http(s) URL" in r.output
    r = run(app, ["tail", "--no-cooldowns", "--no-transitions"])
    assert r.exit_code == 2 and "nothing to follow" in r.output
    assert run(app, ["tail", "--from-beginning", "--since", "5m"]).exit_code == 2
    assert run(app, ["tail", "--since", "soon"]).exit_code == 2


def test_durations() -> None:
    import pytest

    from coolant.alerts.feed import parse_duration

    assert [parse_duration(t) for t in ("90", "90s", "10m", "2h", "1d", "1.5m")] == [90, 90, 600, 7200, 86400, 90]
    for bad in ("", "0", "-5m", "10 minutes", "m"):
        with pytest.raises(ValueError):
            parse_duration(bad)
