"""Each tuning metric on inputs small enough to compute by hand (coolant.tuning.metrics)."""

from __future__ import annotations

import pytest

from coolant.tuning.metrics import (
    CooldownSpan,
    DeploymentTraffic,
    Incident,
    count_inside,
    detection_delays,
    failures_avoided,
    flap_flags,
    flaps,
    incidents,
    merge,
    percentile,
    policy_figures,
    successes_diverted,
    union_length,
)


def span(start: float, until: float, reason: str = "rate_limited", trigger: bool = True) -> CooldownSpan:
    return CooldownSpan(start, until, reason, trigger)


# --------------------------------------------------------------------------------------------
# Intervals and counting.


def test_merge_joins_overlapping_and_touching_intervals() -> None:
    assert merge([(20, 25), (0, 10), (5, 15), (25, 30), (40, 40)]) == [(0, 15), (20, 30)]
    assert merge([(0, 10), (2, 3)]) == [(0, 10)]  # contained
    assert merge([]) == []


def test_union_length_counts_overlaps_once() -> None:
    # [0,10) ∪ [5,15) = 15 s; [20,25) ∪ [25,30) = 10 s
    assert union_length([(0, 10), (5, 15), (20, 25), (25, 30)]) == 25
    assert union_length([]) == 0


def test_count_inside_is_half_open() -> None:
    ts = [0.0, 9.99, 10.0, 15.0, 20.0]
    assert count_inside(ts, [(0, 10)]) == 2  # 10.0 is the instant the cooldown ends: outside
    assert count_inside(ts, [(0, 10), (15, 20)]) == 3
    assert count_inside(ts, [(10, 10.5)]) == 1  # start <= ts


# --------------------------------------------------------------------------------------------
# Failures avoided, successes diverted.


def test_failures_avoided_excludes_the_trigger() -> None:
    # failure at 10 triggers [10, 30): 12 and 20 are inside, 10 is its own trigger, 45 is after
    assert failures_avoided([10, 12, 20, 45], [span(10, 30)]) == 2


def test_a_trigger_inside_an_earlier_cooldown_is_avoided() -> None:
    # 20 triggers [20, 50) while [10, 30) is on: the deployment was cooled, 20 would not have been sent
    assert failures_avoided([10, 12, 20, 45], [span(10, 30), span(20, 50)]) == 3  # 12, 20, 45


def test_a_trigger_right_after_a_cooldown_ended_is_not_avoided() -> None:
    # [10, 20) ends at 20; the failure at 20 starts [20, 40): nobody covered it
    assert failures_avoided([10, 20, 25], [span(10, 20), span(20, 40)]) == 1  # 25


def test_probe_triggered_cooldowns_exclude_nothing() -> None:
    # a health probe at 10 triggered it: the request failure at 10 is inside and avoided
    assert failures_avoided([10, 12], [span(10, 30, "health_check", trigger=False)]) == 2


def test_only_one_record_per_trigger_is_excluded() -> None:
    # two failures at the same instant, the first triggered [10, 30): the second is inside
    assert failures_avoided([10, 10], [span(10, 30)]) == 1
    # two cooldowns starting at 10 (the second extends the first): the first's trigger is excluded,
    # the second's trigger is covered by the first
    assert failures_avoided([10, 10], [span(10, 20), span(10, 30)]) == 1


def test_a_trigger_missing_from_the_failures_excludes_nothing() -> None:
    # defensive: a span claiming a counted trigger at 5 where no failure was counted
    assert failures_avoided([6, 7], [span(5, 10)]) == 2


def test_no_cooldowns_avoid_nothing() -> None:
    assert failures_avoided([1, 2, 3], []) == 0
    assert successes_diverted([1, 2, 3], []) == 0


def test_successes_diverted_over_the_union() -> None:
    # union [10, 25): 10, 19.9, 20 inside; 5 before, 35 after, 25 is the end instant
    assert successes_diverted([5, 10, 19.9, 20, 25, 35], [span(10, 20), span(15, 25)]) == 3


# --------------------------------------------------------------------------------------------
# Incidents and detection delay.


def test_incidents_split_on_gaps_longer_than_the_quiet_gap() -> None:
    # 10 -> 70 is a gap of exactly 60: not longer, same incident; 70 -> 200 splits
    assert incidents([0, 10, 70, 200, 201], 60) == [Incident(0, 70, 3), Incident(200, 201, 2)]
    assert incidents([0, 10, 70.5], 60) == [Incident(0, 10, 2), Incident(70.5, 70.5, 1)]
    assert incidents([], 60) == []


def test_detection_delay_is_the_first_start_within_the_incident() -> None:
    found = [Incident(0, 70, 3), Incident(200, 201, 2), Incident(300, 300, 1), Incident(400, 410, 2)]
    starts = [5, 150, 300, 411]
    # 5 - 0; nothing in [200, 201] (150 is before it); 300 - 300; 411 is after 410: undetected
    assert detection_delays(found, starts) == [5, None, 0, None]
    assert detection_delays(found, []) == [None, None, None, None]


# --------------------------------------------------------------------------------------------
# Flapping.


def test_flaps_count_recools_soon_after_release_not_extensions() -> None:
    spans = [span(0, 30), span(40, 70), span(75, 100), span(90, 120), span(200, 230)]
    # 40: released at 30, back after 10 s -> flap; 75: released at 70 -> flap;
    # 90: starts before 100 (still cooled): an extension; 200: 80 s after 120: not a flap
    assert flap_flags(spans, 30) == [False, True, True, False, False]
    assert flaps(spans, 30) == 2
    assert flaps(spans, 4) == 0  # 40 - 30 = 10 > 4, 75 - 70 = 5 > 4


def test_flap_window_boundary_and_order() -> None:
    # exactly flap_window after the release counts; input order does not matter
    assert flaps([span(60, 90), span(0, 30)], 30) == 1
    assert flaps([span(0, 30), span(60.5, 90)], 30) == 0
    assert flaps([], 30) == 0


# --------------------------------------------------------------------------------------------
# Percentiles and one whole policy.


def test_percentile_nearest_rank() -> None:
    assert percentile([], 50) is None
    assert percentile([3.0], 95) == 3.0
    assert percentile([4, 1, 3, 2], 50) == 2
    assert percentile([4, 1, 3, 2], 95) == 4
    assert percentile(list(range(1, 21)), 95) == 19


def test_policy_figures_on_two_deployments() -> None:
    a = DeploymentTraffic(
        failures=(10, 11, 12, 100),
        successes=(5, 10.5, 15, 40, 41),
        incidents=tuple(incidents([10, 11, 12, 100], 60)),
    )
    b = DeploymentTraffic(failures=(50,), successes=(49, 51), incidents=(Incident(50, 50, 1),))
    spans = {
        "a": [span(10, 40, "rate_limited"), span(60, 70, "failure_rate")],
        "probe-only": [span(0, 5, "health_check", trigger=False)],
    }
    f = policy_figures({"a": a, "b": b}, spans, flap_window=30, suppressed=2)
    assert f.cooldowns == 3
    assert f.by_reason == {"rate_limited": 1, "failure_rate": 1, "health_check": 1}
    assert f.suppressed == 2
    assert (f.failures, f.successes) == (5, 7)
    assert f.failures_avoided == 2  # 11, 12 (10 is the trigger; 100 is outside; nothing failed at 60)
    assert f.successes_diverted == 2  # 10.5, 15 (40 is the end instant)
    assert f.net == 0
    assert f.cooled_by_deployment == {"a": 40.0, "probe-only": 5.0}
    assert f.cooled_seconds == 45.0
    # a: incidents [10, 12] (delay 0) and [100, 100] (60 starts before it: undetected); b: undetected
    assert (f.incidents, f.detected, f.undetected) == (3, 1, 2)
    assert f.delay_mean == f.delay_max == 0
    assert f.flaps == 1 and f.flaps_by_deployment == {"a": 1}  # 60 is 20 s after 40
    d = f.to_dict()
    assert d["undetected"] == 2 and d["flapping_deployments"] == 1
    assert d["cooled_by_deployment"] == {"a": 40.0, "probe-only": 5.0}


def test_policy_figures_without_cooldowns() -> None:
    t = DeploymentTraffic(failures=(1.0,), successes=(2.0,), incidents=(Incident(1, 1, 1),))
    f = policy_figures({"a": t}, {}, 30)
    assert f.cooldowns == f.failures_avoided == f.successes_diverted == f.detected == 0
    assert f.undetected == 1
    assert f.delay_mean is None and f.to_dict()["delay_mean"] is None


@pytest.mark.parametrize("gap", [0, 0.5])
def test_quiet_gap_zero_splits_distinct_instants(gap: float) -> None:
    assert len(incidents([1, 1, 2, 3], gap)) == 3
