"""Ranking, the Pareto front, and the HTML report's structure without a browser (coolant.tuning.report*)."""

from __future__ import annotations

import re

from coolant.config.loader import parse_config
from coolant.tuning.grid import GridPoint
from coolant.tuning.metrics import DeploymentTraffic, PolicyFigures
from coolant.tuning.report import OBJECTIVES, Result, csv_text, pareto_front, rank
from coolant.tuning.report_html import nice_ticks, render_html, time_ticks

from .support import CONFIG


def result(n: int, avoided: int, diverted: int, flaps: int = 0) -> Result:
    point = GridPoint(f"P{n}", (("k", n),), (str(n),), f"k={n}", parse_config(CONFIG))
    return Result(point, PolicyFigures(failures=100, failures_avoided=avoided, successes=1000,
                                       successes_diverted=diverted, flaps=flaps))


def test_pareto_front_maximises_avoided_and_minimises_diverted() -> None:
    # (diverted, avoided): (5, 5) dominates (10, 5); (20, 30) dominates (30, 25); (0, 0) diverts nothing
    points = [(10.0, 5.0), (5.0, 5.0), (20.0, 30.0), (20.0, 30.0), (30.0, 25.0), (0.0, 0.0)]
    assert pareto_front(points) == [5, 1, 2, 3]  # sorted by diverted; equal points both on it
    assert pareto_front([]) == []


def test_rank_by_objective_ties_by_net_then_grid_order() -> None:
    results = [result(1, 10, 5, flaps=3), result(2, 20, 30, flaps=1), result(3, 8, 3, flaps=1), result(4, 8, 3)]
    by_net = rank(list(results), OBJECTIVES["net"])
    assert [r.point.pid for r in by_net] == ["P1", "P3", "P4", "P2"]  # nets 5, 5, 5, -10: grid order on ties
    assert [r.rank for r in by_net] == [1, 2, 3, 4]
    by_flaps = rank(list(results), OBJECTIVES["flaps"])
    assert [r.point.pid for r in by_flaps] == ["P4", "P3", "P2", "P1"]  # 0; 1 (net 5), 1 (net -10); 3
    assert [r.score for r in by_flaps] == [0, 1, 1, 3]
    by_precision = rank(list(results), OBJECTIVES["precision"])
    assert by_precision[0].point.pid == "P3" and round(by_precision[0].score, 3) == round(8 / 11, 3)
    assert all(r.pareto for r in results)  # (avoided, diverted) 8/3 twice, 10/5, 20/30: none dominated


def test_csv_has_one_row_per_policy_best_first() -> None:
    ranked = rank([result(1, 1, 0), result(2, 5, 1)], OBJECTIVES["net"])
    lines = csv_text(ranked, ["k"]).splitlines()
    assert lines[0].startswith("rank,id,label,k,score,pareto,cooldowns,")
    assert lines[1].startswith("1,P2,k=2,2,4,True,") and lines[2].startswith("2,P1,k=1,1,1,True,")


def test_ticks() -> None:
    assert nice_ticks(0, 1000) == [0, 200, 400, 600, 800, 1000]
    assert nice_ticks(0, 7) == [0, 2, 4, 6]
    assert nice_ticks(5, 5) == [5]
    # 600 s in about 8 ticks: every 120 s, on round clock times
    assert time_ticks(1_800_000_013, 1_800_000_613) == [1_800_000_120 + 120 * k for k in range(5)]
    assert time_ticks(10, 10) == [10]


def test_html_structure() -> None:
    ranked = rank([result(1, 10, 5), result(2, 20, 30), result(3, 5, 20)], OBJECTIVES["net"])
    traffic = {"d0": DeploymentTraffic(failures=(100.0, 101.0), successes=(50.0, 150.0))}
    lanes = {"d0": [(r, [(100.0, 130.0, "allowed_fails"), (131.0, 160.0, "allowed_fails")]) for r in ranked]}
    inputs = {"events": ["a.jsonl"], "config": "c.yaml", "grid": ["k=1,2,3"]}
    totals = {"records": 4, "invalid": 0, "failures": 2, "successes": 2, "incidents": 1}
    page = render_html(ranked, OBJECTIVES["net"], inputs, totals, traffic, lanes, flap_window=30, quiet_gap=60)
    assert page.startswith("<!DOCTYPE html>")
    assert "<script" not in page and "http" not in page
    scatter = page[page.index('<svg id="scatter"') : page.index("</svg>")]
    assert sorted(re.findall(r'<circle class="policy[^"]*" data-id="(P\d)"', scatter)) == ["P1", "P2", "P3"]
    assert 'id="pareto-front"' in scatter  # P1 and P2 are on it; P3 is dominated by P1
    # worst rank drawn first, so the best ends on top
    assert re.findall(r'<circle class="policy front" data-id="(P\d)"', scatter) == ["P2", "P1"]
    assert page.count('class="lane"') == 3
    assert page.count('<rect class="cooldown flap"') == 3  # 131 is 1 s after 130, in every lane
    assert 'data-deployment="d0"' in page
