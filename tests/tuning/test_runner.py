"""Replaying one recording through several policies (coolant.tuning.runner, .traffic)."""

from __future__ import annotations

import pytest

from coolant.config.loader import parse_config
from coolant.io.sources import Line
from coolant.processors.policy import Policy
from coolant.schemas import Health, Outcome, encode
from coolant.tuning.grid import build_grid, parse_axis
from coolant.tuning.metrics import Incident
from coolant.tuning.runner import GridRun, evaluate, tasks
from coolant.tuning.traffic import index_traffic, load_recording

from .support import CONFIG, T0, synthetic


def policies(axis: str) -> list[Policy]:
    return [p.policy for p in build_grid(CONFIG, [parse_axis(axis)])]


def test_known_incidents_allowed_fails_0_against_5() -> None:
    """allowed_fails 0 cools on the first failure: it avoids more failures and diverts more successes.

    By hand (router cooldown_time 30, so every cooldown lasts 30 s and the V1 counter lives 30 s):
    - af=0: cooled [100, 140) (each failure 100..110 re-cools, the last ends at 140) and [300, 333).
      Avoided: 101..110 and 301..303 = 13 (the first trigger of each is not). Diverted: d0's successes
      at k+0.5 in those spans = 40 + 33 = 73. Both incidents detected with delay 0.
    - af=5: the 6th failure (105) cools [105, 135), 106..110 extend it to 140; the 4 failures at
      300..303 never reach 6. Avoided 106..110 = 5; diverted 105.5..139.5 = 35; one incident
      detected (delay 5), one not.
    """
    records = synthetic()
    traffic = index_traffic(records, quiet_gap=60)
    assert traffic["d0"].incidents == (Incident(T0 + 100, T0 + 110, 11), Incident(T0 + 300, T0 + 303, 4))
    af0, af5 = (evaluate(p, records, traffic, 30).figures for p in policies("router_settings.allowed_fails=0,5"))

    assert af0.failures_avoided > af5.failures_avoided
    assert af0.successes_diverted > af5.successes_diverted

    assert (af0.failures, af0.successes) == (15, 1200)
    assert af0.cooldowns == 15 and af0.by_reason == {"allowed_fails": 15}
    assert (af0.failures_avoided, af0.successes_diverted) == (13, 73)
    assert af0.cooled_by_deployment == {"d0": pytest.approx(73.0)}
    assert (af0.incidents, af0.detected, af0.delay_mean, af0.delay_max) == (2, 2, 0, 0)
    assert af0.flaps == 0

    assert af5.cooldowns == 6
    assert (af5.failures_avoided, af5.successes_diverted) == (5, 35)
    assert af5.cooled_seconds == pytest.approx(35.0)
    assert (af5.detected, af5.undetected, af5.delay_mean) == (1, 1, 5)


def test_timelines_hold_the_charted_deployments_only() -> None:
    records = synthetic()
    (policy,) = policies("router_settings.allowed_fails=5")
    ev = evaluate(policy, records, index_traffic(records, 60), 30, charted=["d0", "d1"])
    assert set(ev.timelines) == {"d0", "d1"}
    assert ev.timelines["d1"] == []
    assert ev.timelines["d0"][0] == (T0 + 105, T0 + 135, "allowed_fails")
    assert max(u for _, u, _ in ev.timelines["d0"]) == T0 + 140


def test_parallel_and_serial_runs_agree() -> None:
    records = synthetic()
    traffic = index_traffic(records, 60)
    grid = policies("router_settings.allowed_fails=0,1,2,5,null")
    results = {}
    for jobs in (1, 2, 3):
        with GridRun(grid, records, traffic, 30, ["d0"], jobs) as run:
            done = sorted(i for i, _ in run.completed())
        assert done == list(range(len(grid)))
        results[jobs] = [(ev.figures.to_dict(), ev.timelines) for ev in run.ordered()]
    assert results[1] == results[2] == results[3]


def test_ordered_before_completion_is_an_error() -> None:
    run = GridRun(policies("router_settings.allowed_fails=0,1"), [], {}, 30)
    with pytest.raises(RuntimeError):
        run.ordered()


def test_load_recording_counts_what_the_metrics_use() -> None:
    ok = Outcome("a", T0, "d0", "g", True)
    lines: list[Line] = [
        ("f", 1, encode(ok)),
        ("f", 2, encode(ok)),  # a republished copy: one attempt
        ("f", 3, encode(Outcome("b", T0 + 1, "d0", "g", False, 429, "RateLimitError"))),
        ("f", 4, encode(Outcome("c", T0 + 2, "d0", "g", True, source="pre_call_check"))),  # not an attempt
        ("f", 5, encode(Outcome("d", T0 + 3, "d0", "g", False, source="pre_call_check"))),  # a 429 (N2)
        ("f", 6, encode(Health("p", T0 - 5, "d1", "g", False, 500))),
        ("f", 7, b'{"schema": "coolant.outcome/1"}'),
        ("f", 8, b'{"schema": "coolant.deployment/1", "deployment_id": "d9", "model_group": "g"}'),
    ]
    rec = load_recording([("f", 1, b"\n".join(line for _, _, line in lines) + b"\n")], quiet_gap=60)
    assert rec.lines == 8 and rec.invalid == 1 and rec.ignored == 1
    assert rec.invalid_samples and rec.invalid_samples[0].startswith("f:7: ")
    assert len(rec.records) == 6  # outcomes and probes, in file order
    assert (rec.first_ts, rec.last_ts) == (T0 - 5, T0 + 3)
    assert rec.traffic["d0"].successes == (T0,)
    assert rec.traffic["d0"].failures == (T0 + 1, T0 + 3)
    assert "d1" not in rec.traffic  # probes are not traffic
    assert (rec.failures, rec.successes, rec.incidents) == (2, 1, 1)
    assert rec.busiest(3) == ["d0"]


def test_probe_cooldowns_count_but_exclude_no_request() -> None:
    raw = {**CONFIG, "coolant": {"health": {"cooldown": True}}, "router_settings": {"allowed_fails": 0}}
    policy = parse_config(raw).policy
    records = [
        Health("p1", T0, "d0", "g", False, 500, "InternalServerError"),
        Outcome("o1", T0 + 1, "d0", "g", False, 500, "InternalServerError"),
    ]
    f = evaluate(policy, records, index_traffic(records, 60), 30).figures
    assert f.by_reason["health_check"] == 1
    assert f.failures_avoided == 1  # the request failure at T0+1 is inside the probe's 5 s cooldown


def test_tasks_run_the_policies_that_share_a_pass_together() -> None:
    """GridRun's runs: the policies MultiEngine serves together (same window here) in one, a policy it does not
    serve (quota rules) alone; halved, largest first, until every process has one."""
    grid = [p.policy for p in build_grid(CONFIG, [parse_axis("router_settings.allowed_fails=0,1,2"),
                                                  parse_axis("coolant.window=tumbling,sliding")])]
    tumbling = [i for i, p in enumerate(grid) if p.options.window == "tumbling"]
    sliding = [i for i, p in enumerate(grid) if p.options.window == "sliding"]
    assert len(tumbling) == len(sliding) == 3
    assert sorted(tasks(grid, 1)) == sorted([tumbling, sliding])
    assert sorted(tasks(grid, 2)) == sorted([tumbling, sliding])
    four = tasks(grid, 4)
    assert len(four) == 4 and sorted(i for t in four for i in t) == list(range(6))
    assert all(set(t) <= set(tumbling) or set(t) <= set(sliding) for t in four)
    assert sorted(tasks(grid, 12)) == [[i] for i in range(6)]
    quota = [p.policy for p in build_grid(CONFIG, [parse_axis('coolant.quota=null,{}')])]
    assert sorted(tasks(quota, 1)) == [[0], [1]]  # the quota policy alone, the other alone too (one run of one)
