"""Tables keep whole ids on a narrow terminal: `coolant status` and the replay summary wrap (fold) a long id
instead of cutting it with an ellipsis (two keys of one group often differ only in their last characters)."""

from __future__ import annotations

import io

from rich.console import Console

from coolant.cli.status import render
from coolant.io.cooldowns import ActiveCooldown
from coolant.replay.report import render_summary
from coolant.replay.run import ReplaySummary

IDS = ("gemini-flash-free-tier-key-number-1", "gemini-flash-free-tier-key-number-2")


def narrow() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, width=60, force_terminal=False, color_system=None), buf


def first_column(text: str) -> str:
    """The body's first cells, joined back: a folded id reads whole again."""
    lines = text.splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith(("┡", "├")))
    return "".join(line.split("│")[1].strip() for line in lines[start + 1:] if line.startswith("│"))


def test_status_table_folds_ids() -> None:
    console, buf = narrow()
    render([ActiveCooldown(i, "gemini-flash", "rate_limited", "429", "litellm.RateLimitError: quota", 1.0, 61.0,
                           60.0) for i in IDS], console)
    out = buf.getvalue()
    assert "…" not in out, out
    assert first_column(out) == "".join(IDS), out


def test_replay_summary_folds_ids() -> None:
    summary = ReplaySummary()
    for i in IDS:
        summary.deployments[i].outcomes = 10
        summary.records += 10
    console, buf = narrow()
    render_summary(summary, console, 0.1)
    out = buf.getvalue()
    assert "…" not in out, out
    deployments = out[out.index("deployments (top"):]
    assert first_column(deployments) == "".join(sorted(IDS)), out
