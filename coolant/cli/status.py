"""`coolant status`: the active cooldowns (read by `coolant.io.cooldowns`) as a table."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from rich.console import Console, JustifyMethod
from rich.table import Table
from rich.text import Text

from coolant.io.cooldowns import ActiveCooldown
from coolant.processors.redact import printable, shown

_EXCEPTION_WIDTH = 40


def _short(exception: str) -> str:
    """The masked tail (`*`s) says nothing; keep the readable head (redacted: a router's own key is not masked;
    control characters escaped: a newline would break the table's row)."""
    exception = shown(exception)
    text = exception.rstrip("*") + ("…" if exception.endswith("*") else "")
    return text if len(text) <= _EXCEPTION_WIDTH else text[: _EXCEPTION_WIDTH - 1] + "…"


def _utc(ts: float) -> str:
    """ISO time; a stored value beyond what a datetime holds (year 58886: a ts in milliseconds) is shown as is."""
    try:
        return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    except (ValueError, OverflowError, OSError):
        return f"{ts:.6g} (out of range)"


def render(cooldowns: Sequence[ActiveCooldown], console: Console) -> None:
    if not cooldowns:
        console.print("no active cooldowns")
        return
    table = Table(title=f"{len(cooldowns)} active cooldown{'s' if len(cooldowns) != 1 else ''}")
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("deployment", "left"),
        ("group", "left"),
        ("reason", "left"),
        ("status", "right"),
        ("exception", "left"),
        ("remaining s", "right"),
        ("until (UTC)", "left"),
    )
    for name, justify in columns:
        # wrap (fold) rather than cut: ids of one group often differ only at the end
        table.add_column(name, justify=justify, overflow="fold")
    for c in cooldowns:
        # Text, not str: a str cell is read as rich markup, and these values come from Redis, written by anyone
        cells = (c.deployment_id, c.model_group or "-", c.reason or "-", c.status_code or "-", _short(c.exception))
        table.add_row(*(Text(printable(v)) for v in cells), f"{c.remaining:.1f}", _utc(c.until))
    console.print(table)
