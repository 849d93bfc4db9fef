"""Recovery scheduling: one pending notice per deployment, due at the latest `until`."""

from __future__ import annotations

from coolant.alerts.recovery import Pending, add, due, next_due
from tests.alerts.support import cooldown

T = 1_800_000_000.0


def test_a_cooldown_schedules_its_recovery_at_until() -> None:
    s = add({}, cooldown(1, ts=T, seconds=60))
    assert s == {"dep-a": Pending("dep-a", "grp-1", T, T + 60, "rate_limited", 1)}
    assert next_due(s) == T + 60


def test_a_later_cooldown_pushes_the_recovery_back_an_earlier_until_never_shortens_it() -> None:
    s = add({}, cooldown(1, ts=T, seconds=60))
    s = add(s, cooldown(2, ts=T + 30, seconds=120, reason="failure_rate"))
    assert (s["dep-a"].until, s["dep-a"].reason, s["dep-a"].cooldowns) == (T + 150, "failure_rate", 2)
    s = add(s, cooldown(3, ts=T + 40, seconds=5, reason="allowed_fails"))
    assert (s["dep-a"].until, s["dep-a"].reason, s["dep-a"].cooldowns, s["dep-a"].since) == (
        T + 150, "failure_rate", 3, T,
    )


def test_due_splits_off_what_is_over_earliest_first() -> None:
    s = add({}, cooldown(1, "a", ts=T, seconds=60))
    s = add(s, cooldown(1, "b", ts=T, seconds=30))
    s = add(s, cooldown(1, "c", ts=T, seconds=90))
    rest, ready = due(s, T + 60)
    assert [p.deployment_id for p in ready] == ["b", "a"]
    assert set(rest) == {"c"}
    assert due(rest, T + 89) == (rest, [])
    assert next_due({}) is None
