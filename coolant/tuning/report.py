"""Ranking a grid's results by an objective, and writing them: terminal table, CSV, JSON.

`Result` ties a grid point to its figures. The JSON and CSV hold only deterministic content
(no timings, no host details), so the same inputs give byte-identical files.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from rich.console import Console
from rich.table import Table

from coolant.tuning.grid import GridPoint
from coolant.tuning.metrics import PolicyFigures

__all__ = [
    "OBJECTIVES",
    "Objective",
    "Result",
    "csv_text",
    "json_bytes",
    "pareto_front",
    "rank",
    "render_table",
]


@dataclass(frozen=True, slots=True)
class Objective:
    """A named ranking rule: a score per policy, higher or lower better; ties by net, then grid order."""

    name: str
    description: str
    score: Callable[[PolicyFigures], float]
    higher_is_better: bool = True

    def key(self, f: PolicyFigures) -> tuple[float, ...]:
        s = self.score(f)
        primary = -s if self.higher_is_better else s
        if self.name == "detected":  # then the faster detector
            return (primary, f.delay_mean if f.delay_mean is not None else math.inf, -f.net)
        return (primary, -f.net)


def _precision(f: PolicyFigures) -> float:
    acted = f.failures_avoided + f.successes_diverted
    return f.failures_avoided / acted if acted else 0.0


OBJECTIVES: dict[str, Objective] = {
    o.name: o
    for o in (
        Objective("net", "failures avoided − successes diverted (higher is better)", lambda f: f.net),
        Objective("avoided", "failures avoided (higher is better)", lambda f: f.failures_avoided),
        Objective(
            "precision",
            "failures avoided / (failures avoided + successes diverted) (higher is better)",
            _precision,
        ),
        Objective(
            "flaps",
            "cooldowns starting within the flap window after the previous one ended (lower is better)",
            lambda f: f.flaps,
            False,
        ),
        Objective(
            "detected",
            "incidents detected (higher is better; ties: lower mean detection delay)",
            lambda f: f.detected,
        ),
    )
}


@dataclass(slots=True)
class Result:
    point: GridPoint
    figures: PolicyFigures
    score: float = 0.0
    rank: int = 0
    pareto: bool = False


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indexes of the points not dominated in (maximise y = avoided, minimise x = diverted).

    q dominates p when q.y >= p.y and q.x <= p.x with one of them strict; equal points are both
    on the front. Returned sorted by x, then y.
    """
    front = []
    for i, (x, y) in enumerate(points):
        if not any((qy >= y and qx <= x) and (qy > y or qx < x) for qx, qy in points):
            front.append(i)
    return sorted(front, key=lambda i: (points[i][0], points[i][1], i))


def rank(results: list[Result], objective: Objective) -> list[Result]:
    """Score, rank (1 = best) and mark the Pareto front; returns the results best first."""
    for r in results:
        r.score = objective.score(r.figures)
    for i in pareto_front([(r.figures.successes_diverted, r.figures.failures_avoided) for r in results]):
        results[i].pareto = True
    order = sorted(range(len(results)), key=lambda i: (*objective.key(results[i].figures), i))
    for n, i in enumerate(order, 1):
        results[i].rank = n
    return [results[i] for i in order]


# --------------------------------------------------------------------------------------------
# Formats.


def _num(x: float | None, digits: int = 1) -> str:
    if x is None:
        return "–"
    if isinstance(x, int) or float(x).is_integer():
        return f"{int(x):,}"
    return f"{x:,.{digits}f}"


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "–"


def score_text(objective: Objective, score: float) -> str:
    return f"{score:.3f}" if objective.name == "precision" else _num(score)


NARROW = 130
"""Below this console width the terminal table is slimmer (no percentages, time cooled, detection)."""
_FIELDS = {"avoided": "failures_avoided", "diverted": "successes_diverted"}


def _plain_count(field: str) -> Callable[[Result], str]:
    return lambda r: _num(getattr(r.figures, field))


def render_table(ranked: Sequence[Result], objective: Objective, console: Console, limit: int | None = None) -> None:
    """The ranked terminal table; `limit` keeps only the best rows. The objective's column is bold."""
    table = Table(
        title=f"policies ranked by objective [bold]{objective.name}[/bold]: {objective.description}",
        title_justify="left",
        caption="avoided: failed records inside a would-be cooldown; diverted: successes inside one; "
        "* = on the Pareto front (avoided vs diverted)",
        caption_justify="left",
    )
    shown = ranked if limit is None else ranked[:limit]
    columns: list[tuple[str, Callable[[Result], str]]] = [
        ("#", lambda r: str(r.rank)),
        ("id", lambda r: r.point.pid + ("*" if r.pareto else "")),
        ("policy", lambda r: r.point.label),
        ("cooldowns", lambda r: _num(r.figures.cooldowns)),
        (
            "avoided",
            lambda r: f"{r.figures.failures_avoided:,} ({_pct(r.figures.failures_avoided, r.figures.failures)})",
        ),
        (
            "diverted",
            lambda r: f"{r.figures.successes_diverted:,} ({_pct(r.figures.successes_diverted, r.figures.successes)})",
        ),
        ("net", lambda r: _num(r.figures.net)),
        ("cooled s", lambda r: _num(r.figures.cooled_seconds)),
        ("detected", lambda r: f"{r.figures.detected:,}/{r.figures.incidents:,}"),
        ("mean delay s", lambda r: _num(r.figures.delay_mean)),
        ("flaps", lambda r: _num(r.figures.flaps)),
    ]
    if objective.name not in {name for name, _ in columns}:
        columns.insert(3, (objective.name, lambda r: score_text(objective, r.score)))
    if console.width < NARROW:  # keep the policy labels readable: drop what the CSV/JSON/HTML still have
        dropped = {"cooled s", "mean delay s", "detected"} - {objective.name}
        columns = [c for c in columns if c[0] not in dropped]
        columns = [(name, _plain_count(_FIELDS[name]) if name in _FIELDS else cell) for name, cell in columns]
    for name, _ in columns:
        bold = name == objective.name
        table.add_column(
            f"[bold]{name}[/bold]" if bold else name,
            justify="left" if name in ("id", "policy") else "right",
            style="bold" if bold else None,
            overflow="fold",
        )
    for r in shown:
        table.add_row(*(cell(r) for _, cell in columns))
    if limit is not None and len(ranked) > limit:
        table.caption = f"{table.caption}; {len(ranked) - limit} more policies in the CSV/JSON/HTML"
    console.print(table)


def _reasons(results: Sequence[Result]) -> list[str]:
    return sorted({reason for r in results for reason in r.figures.by_reason})


def _row(r: Result, keys: Sequence[str], reasons: Sequence[str]) -> dict[str, Any]:
    f = r.figures.to_dict()
    row: dict[str, Any] = {"rank": r.rank, "id": r.point.pid, "label": r.point.label}
    for key, text in zip(keys, r.point.texts, strict=True):
        row[key] = text
    row["score"] = r.score
    row["pareto"] = r.pareto
    row["cooldowns"] = f["cooldowns"]
    for reason in reasons:
        row[f"cooldowns_{reason}"] = f["by_reason"].get(reason, 0)
    for name in (
        "suppressed",
        "failures",
        "failures_avoided",
        "successes",
        "successes_diverted",
    ):
        row[name] = f[name]
    row["net"] = r.figures.net
    for name in (
        "cooled_seconds",
        "incidents",
        "detected",
        "undetected",
        "delay_mean",
        "delay_median",
        "delay_p95",
        "delay_max",
        "flaps",
        "flapping_deployments",
    ):
        row[name] = f[name]
    return row


def csv_text(ranked: Sequence[Result], keys: Sequence[str]) -> str:
    """One row per policy, best first: settings (as typed), score, every scalar figure."""
    reasons = _reasons(ranked)
    rows = [_row(r, keys, reasons) for r in ranked]
    buf = io.StringIO()
    if not rows:
        return ""
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: "" if v is None else (round(v, 6) if isinstance(v, float) else v) for k, v in row.items()})
    return buf.getvalue()


def to_document(
    ranked: Sequence[Result],
    objective: Objective,
    keys: Sequence[str],
    inputs: dict[str, Any],
    traffic: dict[str, Any],
) -> dict[str, Any]:
    """The JSON report: inputs, traffic totals, and every policy (best first) with all figures."""
    return {
        "tool": "coolant tune",
        "objective": {"name": objective.name, "description": objective.description},
        "inputs": inputs,
        "grid": keys,
        "traffic": traffic,
        "policies": [
            {
                "rank": r.rank,
                "id": r.point.pid,
                "label": r.point.label,
                "settings": dict(r.point.settings),
                "score": r.score,
                "pareto": r.pareto,
                "net": r.figures.net,
                "figures": r.figures.to_dict(),
            }
            for r in ranked
        ],
    }


def json_bytes(document: dict[str, Any]) -> bytes:
    return orjson.dumps(document, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS, default=str) + b"\n"
