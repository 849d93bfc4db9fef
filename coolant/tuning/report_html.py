"""The self-contained HTML tuning report: one file, inline CSS and SVG drawn here, no script, no URL.

Sections: the inputs; a scatter chart of failures avoided against successes diverted with the
Pareto front drawn and every policy labelled; the ranked table; one timeline per charted
deployment (recorded successes and failures over time, then each policy's would-be cooldowns).

Stable hooks for tests and readers: `svg#scatter` holds one `circle.policy[data-id]` per policy
and `path#pareto-front`; each timeline is `svg.timeline[data-deployment]` with one `g.lane` per
policy and one `rect.cooldown` per would-be cooldown.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from html import escape
from typing import Any

from coolant.tuning.metrics import CooldownSpan, DeploymentTraffic, flap_flags
from coolant.tuning.report import Objective, Result, score_text
from coolant.tuning.runner import Interval

__all__ = ["nice_ticks", "render_html", "time_ticks"]

REASON_COLORS = {
    "rate_limited": "#e69f00",
    "failure_rate": "#d55e00",
    "total_outage": "#7f0000",
    "non_retryable": "#cc79a7",
    "allowed_fails": "#0072b2",
    "health_check": "#009e73",
    "manual": "#666666",
    "quota_exhausted": "#56b4e9",
    "probation": "#f0e442",
    "consecutive_failures": "#8c564b",
    "recent_failure_rate": "#9467bd",
}
SUCCESS = "#5aa469"
FAILURE = "#d1495b"
FRONT = "#e4572e"
POINT = "#4c78a8"

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1200px;
color:#222;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
.muted{color:#666}.inputs td{padding:1px 12px 1px 0;vertical-align:top}
table.ranked{border-collapse:collapse;font-size:12px;width:100%}
.scroll{overflow-x:auto}
table.ranked th,table.ranked td{border-bottom:1px solid #e4e4e4;padding:4px 5px;text-align:right;white-space:nowrap}
table.ranked th{background:#f4f4f4;position:sticky;top:0;white-space:normal;vertical-align:bottom;font-weight:600}
table.ranked td.l,table.ranked th.l{text-align:left;white-space:normal}
tr.front td.id{color:#e4572e;font-weight:600}
table.ranked .objective{font-weight:600;background:#fff8e6}
svg{display:block;max-width:100%;height:auto;margin:6px 0}
svg text{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif}
.legend span{display:inline-block;margin-right:14px;font-size:12px}
.legend i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:-2px;border-radius:2px}
code{background:#f4f4f4;padding:1px 4px;border-radius:3px}
"""


def _f(x: float) -> str:
    """A coordinate: short, stable text."""
    return f"{x:.1f}".rstrip("0").rstrip(".") if math.isfinite(x) else "0"


def _fmt(x: float | None, digits: int = 1) -> str:
    if x is None:
        return "–"
    if float(x).is_integer():
        return f"{int(x):,}"
    return f"{x:,.{digits}f}"


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About `n` round tick values covering [lo, hi] (1, 2, 5 × 10^k steps)."""
    if not math.isfinite(lo) or not math.isfinite(hi):
        return [0.0]
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / max(1, n)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    ticks = []
    k = 0
    while (t := first + k * step) <= hi + step * 1e-9:
        ticks.append(round(t, 10))
        k += 1
    return ticks


# --------------------------------------------------------------------------------------------
# Scatter: failures avoided (y) against successes diverted (x).

_LABEL_OFFSETS = ((9, -8), (9, 16), (-9, -8), (-9, 16), (9, -22), (9, 30), (-9, -22), (-9, 30), (9, -36), (9, 44))
"""Where a point's label may go, tried in order until it overlaps no other label (x mirrored near the right edge)."""


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]



def scatter_svg(results: Sequence[Result]) -> str:
    width, height = 760, 460
    left, right, top, bottom = 72, 24, 18, 52
    pw, ph = width - left - right, height - top - bottom
    xs = [r.figures.successes_diverted for r in results]
    ys = [r.figures.failures_avoided for r in results]
    xmax = max([*xs, 1]) * 1.08
    ymax = max([*ys, 1]) * 1.08

    def px(x: float) -> float:
        return left + x / xmax * pw

    def py(y: float) -> float:
        return top + ph - y / ymax * ph

    out = [
        f'<svg id="scatter" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        'aria-label="failures avoided against successes diverted, one point per policy">',
        f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="#fbfbfb" stroke="#ccc"/>',
    ]
    for t in nice_ticks(0, xmax):
        x = px(t)
        out.append(f'<line x1="{_f(x)}" y1="{top}" x2="{_f(x)}" y2="{top + ph}" stroke="#eee"/>')
        out.append(
            f'<text x="{_f(x)}" y="{top + ph + 16}" font-size="11" text-anchor="middle" fill="#555">{_fmt(t)}</text>'
        )
    for t in nice_ticks(0, ymax):
        y = py(t)
        out.append(f'<line x1="{left}" y1="{_f(y)}" x2="{left + pw}" y2="{_f(y)}" stroke="#eee"/>')
        out.append(
            f'<text x="{left - 6}" y="{_f(y + 4)}" font-size="11" text-anchor="end" fill="#555">{_fmt(t)}</text>'
        )
    out.append(
        f'<text x="{left + pw / 2}" y="{height - 12}" font-size="12" text-anchor="middle">'
        "successes diverted (capacity given up) →</text>"
    )
    out.append(
        f'<text transform="translate(16 {top + ph / 2}) rotate(-90)" font-size="12" text-anchor="middle">'
        "failures avoided →</text>"
    )
    front = sorted(
        (r for r in results if r.pareto), key=lambda r: (r.figures.successes_diverted, r.figures.failures_avoided)
    )
    if front:
        d = " ".join(
            f"{'M' if i == 0 else 'L'}{_f(px(r.figures.successes_diverted))},{_f(py(r.figures.failures_avoided))}"
            for i, r in enumerate(front)
        )
        out.append(
            f'<path id="pareto-front" class="pareto" d="{d}" fill="none" stroke="{FRONT}" stroke-width="2" '
            'stroke-dasharray="6 4"/>'
        )
    # points, best-ranked drawn last (on top); coincident points share one label
    labels: dict[tuple[str, str], list[str]] = defaultdict(list)
    for r in sorted(results, key=lambda r: -r.rank):
        f = r.figures
        cx, cy = _f(px(f.successes_diverted)), _f(py(f.failures_avoided))
        fill = FRONT if r.pareto else POINT
        tip = (
            f"{r.point.pid} {r.point.label}: {f.failures_avoided:,} avoided, {f.successes_diverted:,} diverted, "
            f"rank {r.rank}{', Pareto front' if r.pareto else ''}"
        )
        out.append(
            f'<circle class="policy{" front" if r.pareto else ""}" data-id="{escape(r.point.pid)}" cx="{cx}" '
            f'cy="{cy}" r="6" fill="{fill}" fill-opacity="0.85" stroke="#222" stroke-width="0.8">'
            f"<title>{escape(tip)}</title></circle>"
        )
    for r in sorted(results, key=lambda r: r.rank):
        f = r.figures
        labels[_f(px(f.successes_diverted)), _f(py(f.failures_avoided))].append(r.point.pid)
    placed: list[tuple[float, float, float, float]] = []  # label boxes (x0, y0, x1, y1), to avoid overlaps
    for (cx, cy), ids in labels.items():
        text = ", ".join(ids) if len(ids) <= 4 else f"{', '.join(ids[:3])} +{len(ids) - 3}"
        x, y = float(cx), float(cy)
        w, h = 7.0 * len(text), 12.0
        prefer_left = x > left + pw * 0.8
        for dx, dy in _LABEL_OFFSETS:
            if prefer_left:
                dx = -dx
            tx, ty = x + dx, y + dy
            x0 = tx - w if dx < 0 else tx
            box = (x0, ty - h + 2, x0 + w, ty + 2)
            inside = left <= box[0] and box[2] <= left + pw + right and top <= box[1] and box[3] <= top + ph
            if inside and not any(_overlap(box, b) for b in placed):
                break
        placed.append(box)
        anchor = "end" if dx < 0 else "start"
        out.append(
            f'<text class="point-label" x="{_f(tx)}" y="{_f(ty)}" font-size="12" '
            f'text-anchor="{anchor}" fill="#222">{escape(text)}</text>'
        )
    out.append("</svg>")
    return "\n".join(out)


# --------------------------------------------------------------------------------------------
# Ranked table.


_OBJECTIVE_COLUMN = {"net": "net", "avoided": "failures avoided", "detected": "incidents detected", "flaps": "flaps"}
"""The table column an objective's score already is (its header is marked); others get a score column."""


def ranked_table(results: Sequence[Result], objective: Objective) -> str:
    reasons = sorted({reason for r in results for reason in r.figures.by_reason})
    columns: list[tuple[str, str, Callable[[Result], str]]] = [
        ("#", "", lambda r: str(r.rank)),
        ("id", "l id", lambda r: r.point.pid + (" *" if r.pareto else "")),
        ("policy", "l", lambda r: r.point.label),
        ("cooldowns", "", lambda r: _fmt(r.figures.cooldowns)),
        *((reason, "", _reason_cell(reason)) for reason in reasons),
        ("failures avoided", "", lambda r: f"{r.figures.failures_avoided:,} of {r.figures.failures:,}"),
        ("successes diverted", "", lambda r: f"{r.figures.successes_diverted:,} of {r.figures.successes:,}"),
        ("net", "", lambda r: _fmt(r.figures.net)),
        ("time cooled s", "", lambda r: _fmt(r.figures.cooled_seconds)),
        ("incidents detected", "", lambda r: f"{r.figures.detected:,} of {r.figures.incidents:,}"),
        (
            "delay mean / p95 / max s",
            "",
            lambda r: f"{_fmt(r.figures.delay_mean)} / {_fmt(r.figures.delay_p95)} / {_fmt(r.figures.delay_max)}",
        ),
        ("flaps", "", lambda r: _fmt(r.figures.flaps)),
        ("flapping deployments", "", lambda r: _fmt(r.figures.flapping_deployments)),
    ]
    marked = _OBJECTIVE_COLUMN.get(objective.name)
    if marked is None:
        marked = objective.name
        columns.insert(3, (objective.name, "", lambda r: score_text(objective, r.score)))
    out = ['<div class="scroll"><table class="ranked"><thead><tr>']
    for name, cls, _ in columns:
        obj = name == marked
        title = f' title="the objective: {escape(objective.description)}"' if obj else ""
        out.append(f'<th class="{cls}{" objective" if obj else ""}"{title}>{escape(name)}{" ▼" if obj else ""}</th>')
    out.append("</tr></thead><tbody>")
    for r in results:
        out.append(f'<tr class="{"front" if r.pareto else ""}" data-id="{escape(r.point.pid)}">')
        for name, cls, cell in columns:
            out.append(f'<td class="{cls}{" objective" if name == marked else ""}">{escape(cell(r))}</td>')
        out.append("</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def _reason_cell(reason: str) -> Callable[[Result], str]:
    return lambda r: _fmt(r.figures.by_reason.get(reason, 0))


# --------------------------------------------------------------------------------------------
# Timelines.


_TIME_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)


def time_ticks(t0: float, t1: float, n: int = 8) -> list[float]:
    """About `n` ticks on round clock times (multiples of 1 s ... 1 day) within [t0, t1]."""
    if t1 <= t0:
        return [t0]
    step = next((s for s in _TIME_STEPS if s >= (t1 - t0) / n), _TIME_STEPS[-1])
    first = math.ceil(t0 / step) * step
    return [first + k * step for k in range(int((t1 - first) // step) + 1)]


def _clock(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%H:%M:%S")


def timeline_svg(
    deployment: str,
    traffic: DeploymentTraffic,
    lanes: Sequence[tuple[Result, Sequence[Interval]]],
    flap_window: float,
) -> str:
    """Recorded outcomes binned over time (successes up, failures down), then one lane per policy."""
    width = 1000
    left, right = 210, 16
    pw = width - left - right
    hist_h = 90
    lane_h = 16
    top = 22
    axis_h = 30
    times = [*traffic.failures, *traffic.successes]
    for _, intervals in lanes:
        for start, until, _ in intervals:
            times += [start, until]
    t0 = min(times) if times else 0.0
    t1 = max(times) if times else 1.0
    if t1 <= t0:
        t1 = t0 + 1
    span = t1 - t0
    height = top + hist_h + 8 + lane_h * len(lanes) + axis_h

    def px(t: float) -> float:
        return left + (t - t0) / span * pw

    out = [
        f'<svg class="timeline" data-deployment="{escape(deployment)}" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="timeline of {escape(deployment)}">',
        f'<text x="4" y="14" font-size="12" font-weight="600">{escape(deployment)}</text>',
    ]
    # histogram: successes above the midline, failures below
    bins = max(1, min(240, int(span)))
    width_bin = span / bins
    ok = [0] * bins
    bad = [0] * bins
    for t in traffic.successes:
        ok[min(bins - 1, int((t - t0) / width_bin))] += 1
    for t in traffic.failures:
        bad[min(bins - 1, int((t - t0) / width_bin))] += 1
    peak = max([*ok, *bad, 1])
    mid = top + hist_h / 2
    half = hist_h / 2 - 2
    out.append(f'<text x="4" y="{_f(mid - 10)}" font-size="11" fill="{SUCCESS}">successes ↑</text>')
    out.append(f'<text x="4" y="{_f(mid + 18)}" font-size="11" fill="{FAILURE}">failures ↓</text>')
    out.append(
        f'<text x="4" y="{_f(mid + 32)}" font-size="10" fill="#777">per {_fmt(width_bin)} s, max {peak:,}</text>'
    )
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{hist_h}" fill="#fbfbfb" stroke="#ddd"/>')
    bw = pw / bins
    for i in range(bins):
        bx = _f(left + i * bw)
        w = _f(max(bw - 0.3, 0.6))
        if ok[i]:
            h = ok[i] / peak * half
            out.append(f'<rect class="ok" x="{bx}" y="{_f(mid - h)}" width="{w}" height="{_f(h)}" fill="{SUCCESS}"/>')
        if bad[i]:
            h = bad[i] / peak * half
            out.append(f'<rect class="fail" x="{bx}" y="{_f(mid)}" width="{w}" height="{_f(h)}" fill="{FAILURE}"/>')
    out.append(f'<line x1="{left}" y1="{_f(mid)}" x2="{left + pw}" y2="{_f(mid)}" stroke="#bbb"/>')
    # policy lanes
    y = top + hist_h + 8
    for r, intervals in lanes:
        spans = [CooldownSpan(s, u, reason) for s, u, reason in intervals]
        flags = flap_flags(spans, flap_window)
        out.append(f'<g class="lane" data-id="{escape(r.point.pid)}">')
        out.append(
            f'<text x="4" y="{_f(y + lane_h - 4)}" font-size="11" fill="{FRONT if r.pareto else "#222"}">'
            f"{escape(r.point.pid)} {escape(_short(r.point.label, 30))}<title>{escape(r.point.label)}</title></text>"
        )
        out.append(
            f'<rect x="{left}" y="{_f(y + 1)}" width="{pw}" height="{lane_h - 2}" fill="#f6f6f6"/>'
        )
        for span_, flap in zip(spans, flags, strict=True):
            x0, x1 = px(span_.start), px(span_.until)
            color = REASON_COLORS.get(span_.reason, "#888")
            stroke = ' stroke="#000" stroke-width="1.2"' if flap else ""
            tip = f"{span_.reason} {_clock(span_.start)}–{_clock(span_.until)} ({_fmt(span_.until - span_.start)} s)"
            out.append(
                f'<rect class="cooldown{" flap" if flap else ""}" x="{_f(x0)}" y="{_f(y + 2)}" '
                f'width="{_f(max(x1 - x0, 1.0))}" height="{lane_h - 4}" fill="{color}" fill-opacity="0.8"{stroke}>'
                f"<title>{escape(tip + (', flap' if flap else ''))}</title></rect>"
            )
        out.append("</g>")
        y += lane_h
    # time axis
    for t in time_ticks(t0, t1):
        x = px(t)
        out.append(f'<line x1="{_f(x)}" y1="{top}" x2="{_f(x)}" y2="{_f(y + 3)}" stroke="#000" stroke-opacity="0.08"/>')
        out.append(
            f'<text x="{_f(x)}" y="{_f(y + 16)}" font-size="10" text-anchor="middle" fill="#555">{_clock(t)}</text>'
        )
    out.append("</svg>")
    return "\n".join(out)


def _short(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _legend() -> str:
    items = [f'<span><i style="background:{SUCCESS}"></i>success</span>',
             f'<span><i style="background:{FAILURE}"></i>failure</span>']
    items += [f'<span><i style="background:{c}"></i>{escape(r)}</span>' for r, c in REASON_COLORS.items()
              if r != "manual"]
    items.append('<span><i style="background:#fff;border:1.5px solid #000"></i>flap (outlined)</span>')
    return '<div class="legend">' + "".join(items) + "</div>"


# --------------------------------------------------------------------------------------------
# The page.


def render_html(
    results_ranked: Sequence[Result],
    objective: Objective,
    inputs: dict[str, Any],
    traffic_totals: dict[str, Any],
    traffic: dict[str, DeploymentTraffic],
    timelines: dict[str, list[tuple[Result, Sequence[Interval]]]],
    flap_window: float,
    quiet_gap: float,
) -> str:
    """The whole report as one HTML string (UTF-8, no external resources)."""
    rows = "".join(
        f"<tr><td class=muted>{escape(k)}</td><td>{escape(str(v))}</td></tr>"
        for k, v in (
            ("records", ", ".join(inputs["events"])),
            ("config", inputs["config"]),
            ("grid", " × ".join(inputs["grid"]) or "(none: the config alone)"),
            ("policies", f"{len(results_ranked):,}"),
            (
                "traffic",
                f"{traffic_totals['records']:,} records ({traffic_totals['invalid']:,} invalid); "
                f"{traffic_totals['failures']:,} failures and {traffic_totals['successes']:,} successes counted; "
                f"{traffic_totals['incidents']:,} incidents (quiet gap {_fmt(quiet_gap)} s)",
            ),
            ("objective", f"{objective.name}: {objective.description}"),
        )
    )
    best = results_ranked[0] if results_ranked else None
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>coolant tune report</title>",
        f"<style>{CSS}</style></head><body>",
        "<h1>coolant tune</h1>",
        '<p class="muted">What each cooldown policy would have done to the recorded traffic. '
        "<b>Failures avoided</b>: failed records inside a would-be cooldown of their deployment "
        "(start ≤ ts &lt; until, the trigger itself excluded). <b>Successes diverted</b>: successful records "
        "inside one (capacity given up). <b>Flap</b>: a cooldown starting within "
        f"{_fmt(flap_window)} s after the previous one of the deployment ended.</p>",
        f'<table class="inputs">{rows}</table>',
    ]
    if best is not None:
        parts.append(
            f"<p>Best by <b>{escape(objective.name)}</b>: <b>{escape(best.point.pid)}</b> "
            f"<code>{escape(best.point.label)}</code> (score {escape(score_text(objective, best.score))}).</p>"
        )
    parts += [
        "<h2>Failures avoided against successes diverted</h2>",
        '<p class="muted">Up is better, left is better. Orange points joined by the dashed line are the '
        "Pareto front: no other policy avoids more failures while diverting no more successes.</p>",
        scatter_svg(results_ranked),
        f"<h2>Policies ranked by {escape(objective.name)}</h2>",
        ranked_table(results_ranked, objective),
        "<h2>Timelines</h2>",
        '<p class="muted">Per deployment: recorded outcomes over time, then each policy\'s would-be '
        "cooldowns (one lane per policy, in rank order).</p>",
        _legend(),
    ]
    empty = DeploymentTraffic()
    for dep, lanes in timelines.items():
        parts.append(timeline_svg(dep, traffic.get(dep, empty), lanes, flap_window))
    if not timelines:
        parts.append('<p class="muted">No deployment to chart.</p>')
    parts.append("</body></html>\n")
    return "\n".join(parts)
