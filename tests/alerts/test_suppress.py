"""Flap suppression as a pure state machine: the clock is a number the test chooses."""

from __future__ import annotations

from coolant.alerts.suppress import Entry, Verdict, decide, prune

P = 300.0


def test_first_alert_goes_out_and_the_next_ones_within_the_period_are_counted() -> None:
    s, v = decide({}, "a", "cooldown", False, 1000.0, P)
    assert v == Verdict(True, 0)
    s, v = decide(s, "a", "cooldown", False, 1100.0, P)
    assert v == Verdict(False, 0)
    s, v = decide(s, "a", "health", False, 1200.0, P)  # one budget per deployment, whatever the feed
    assert v == Verdict(False, 0)
    assert s["a"].suppressed == 2
    s, v = decide(s, "a", "cooldown", False, 1300.0, P)  # the period is over: out, with the count
    assert v == Verdict(True, 2)
    assert s["a"] == Entry(last_sent=1300.0, suppressed=0, open=frozenset({"cooldown"}))  # health was held back


def test_deployments_are_independent() -> None:
    s, _ = decide({}, "a", "cooldown", False, 0.0, P)
    _, v = decide(s, "b", "cooldown", False, 1.0, P)
    assert v.send


def test_a_recovery_answering_an_alert_that_went_out_is_always_sent_and_keeps_the_period() -> None:
    s, _ = decide({}, "a", "cooldown", False, 0.0, P)
    s, _ = decide(s, "a", "cooldown", False, 10.0, P)  # an extension: held back
    s, v = decide(s, "a", "cooldown", True, 70.0, P)
    assert v == Verdict(True, 1)
    assert s["a"].last_sent == 0.0 and not s["a"].open
    # flapping on: the next cooldown and its recovery are both held back
    s, v1 = decide(s, "a", "cooldown", False, 100.0, P)
    s, v2 = decide(s, "a", "cooldown", True, 160.0, P)
    assert (v1.send, v2.send) == (False, False)
    s, v = decide(s, "a", "cooldown", False, 400.0, P)
    assert v == Verdict(True, 2)


def test_a_recovery_of_the_other_feed_is_not_exempt() -> None:
    s, _ = decide({}, "a", "cooldown", False, 0.0, P)
    _, v = decide(s, "a", "health", True, 5.0, P)
    assert not v.send


def test_period_zero_sends_everything() -> None:
    s: dict[str, Entry] = {}
    for t in range(5):
        s, v = decide(s, "a", "cooldown", False, float(t), 0.0)
        assert v.send


def test_a_clock_that_went_backwards_starts_a_new_period() -> None:
    s, _ = decide({}, "a", "cooldown", False, 1000.0, P)
    _, v = decide(s, "a", "cooldown", False, 900.0, P)
    assert v.send


def test_prune_keeps_only_entries_that_still_matter() -> None:
    state = {
        "fresh": Entry(last_sent=950.0),
        "old": Entry(last_sent=100.0),
        "held": Entry(last_sent=100.0, suppressed=3),
        "open": Entry(last_sent=100.0, open=frozenset({"cooldown"})),
    }
    assert set(prune(state, 1000.0, P)) == {"fresh", "held", "open"}
