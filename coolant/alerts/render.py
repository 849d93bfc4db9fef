"""How `coolant tail` shows a record to a person: one styled line each, `now` passed in for "remaining".

Every text from the record is shown `printable` (control characters escaped) and its exception redacted: a
record's newline cannot forge a line of its own, nor an escape sequence restyle the terminal.
"""

from __future__ import annotations

from datetime import UTC, datetime

from rich.text import Text

from coolant.alerts.slack import exception_text
from coolant.processors.redact import printable
from coolant.schemas import Cooldown, HealthTransition, Record


def clock(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _status(code: int | None) -> str:
    return str(code) if code is not None else "-"


def line(rec: Record, now: float) -> Text | None:
    """The line for a cooldown or a health transition; None for records tail does not show."""
    if isinstance(rec, Cooldown):
        left = rec.until - now
        remaining = f"{left:,.0f} s left" if left > 0 else "over"
        return Text.assemble(
            (clock(rec.ts), "dim"), "  ",
            ("COOLDOWN ", "bold cyan"),
            (printable(rec.deployment_id), "bold"), f" ({printable(rec.model_group)})  ",
            (rec.reason, "yellow"), f"  {_status(rec.status_code)}  ",
            exception_text(rec.exception_type, rec.exception_received),
            f"  until {clock(rec.until)} ({rec.cooldown_time:g} s, {remaining})",
            (f"  window {rec.window.successes} ok / {rec.window.failures} failed", "dim"),
        )
    if isinstance(rec, HealthTransition):
        before = {None: "unknown", True: "healthy", False: "unhealthy"}[rec.previous]
        after = "healthy" if rec.healthy else "unhealthy"
        parts: list[str | tuple[str, str]] = [
            (clock(rec.ts), "dim"), "  ",
            ("HEALTH   ", "bold green" if rec.healthy else "bold red"),
            (printable(rec.deployment_id), "bold"), f" ({printable(rec.model_group)})  ",
            (f"{before} → {after}", "green" if rec.healthy else "red"),
        ]
        if not rec.healthy:
            parts.append(f"  {_status(rec.status_code)}  {exception_text(rec.exception_type, rec.exception_received)}")
        prober = f" by {printable(rec.prober)}" if rec.prober else ""
        parts.append((f"  probe {printable(rec.probe_event_id)}{prober}", "dim"))
        return Text.assemble(*parts)
    return None
