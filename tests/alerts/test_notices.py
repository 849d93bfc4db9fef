"""The alerting policy per record and per tick, with a hand-driven clock."""

from __future__ import annotations

from coolant.alerts.notices import AlertState, on_record, on_tick
from tests.alerts.support import cooldown, transition

T = 1_800_000_000.0
P = 300.0


def test_one_alert_per_cooldown_then_one_recovery_at_the_latest_until() -> None:
    s, n = on_record(AlertState(), cooldown(1, ts=T, seconds=60), T, P)
    assert [(x.kind, x.payload is not None) for x in n] == [("cooldown", True)]
    s, n = on_record(s, cooldown(2, ts=T + 10, seconds=100), T + 10, P)  # extension: held back
    assert [(x.kind, x.payload is not None) for x in n] == [("cooldown", False)]
    s, n = on_tick(s, T + 60, P)
    assert n == []  # the first until passed, but the extension holds
    s, n = on_tick(s, T + 110, P)
    assert [x.kind for x in n] == ["recovery"]
    assert n[0].payload is not None and "1 similar alert suppressed" in n[0].payload["text"]
    assert s.recoveries == {}
    _, n = on_tick(s, T + 500, P)
    assert n == []


def test_health_flips_alert_first_healthy_probe_does_not() -> None:
    s, n = on_record(AlertState(), transition(1, healthy=True, previous=None), T, P)
    assert n == []
    s, n = on_record(s, transition(2, healthy=False, previous=True), T + 1, P)
    assert [(x.kind, x.payload is not None) for x in n] == [("unhealthy", True)]
    s, n = on_record(s, transition(3, healthy=True, previous=False), T + 2, P)
    assert [(x.kind, x.payload is not None) for x in n] == [("healthy", True)]
    _, n = on_record(s, transition(4, healthy=False, previous=True), T + 3, P)
    assert [(x.kind, x.payload is not None) for x in n] == [("unhealthy", False)]


def test_first_probe_unhealthy_alerts() -> None:
    _, n = on_record(AlertState(), transition(1, healthy=False, previous=None), T, P)
    assert n[0].kind == "unhealthy" and n[0].payload is not None
    assert "(was unknown)" in n[0].payload["blocks"][0]["text"]["text"]
