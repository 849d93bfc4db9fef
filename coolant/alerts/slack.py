"""Slack-compatible webhook payloads (`{"text": ..., "blocks": [...]}`): pure functions of the records.

`text` is the notification and fallback line; the mrkdwn section says who (deployment, group), why
(reason, status, masked exception), the evidence the decision saw and until when. Record text is
escaped (`&`, `<`, `>`) so an exception message cannot inject mentions or links, and its control characters are
escaped so it cannot start a line of its own.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from coolant.alerts.recovery import Pending
from coolant.processors.redact import printable, shown
from coolant.schemas import Cooldown, HealthTransition

Payload = dict[str, Any]

SECTION_LIMIT = 3000
"""Slack rejects a section text longer than this."""
_EXCEPTION_WIDTH = 120


def utc(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def seconds(value: float) -> str:
    return f"{value:,.0f} s" if value >= 10 else f"{value:.3g} s"


def escape(text: str) -> str:
    """Slack's three control characters; backticks would end a code span, so they become quotes; a newline or
    another control character is escaped (`printable`): record text never starts a line of the alert."""
    return printable(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("`", "'")


def code(text: str) -> str:
    return f"`{escape(text)}`"


def exception_text(exception_type: str | None, received: str) -> str:
    """The readable head of masked text (the `*` tail says nothing), with the type when it adds something.

    Redacted again (S1): the records on the topic already are, unless written by an older version or by hand.
    Control characters escaped (`shown`), for `tail` as for alerts."""
    received, exception_type = shown(received), None if exception_type is None else shown(exception_type)
    head = received.rstrip("*") + ("…" if received.endswith("*") else "")
    if len(head) > _EXCEPTION_WIDTH:
        head = head[: _EXCEPTION_WIDTH - 1] + "…"
    kind = (exception_type or "").rstrip("*")
    if kind and kind not in head:
        return f"{kind}: {head}" if head else kind
    return head or "-"


def suppressed_note(count: int) -> str:
    return f"{count} similar alert{'s' if count != 1 else ''} suppressed"


def _payload(text: str, body: str, suppressed: int) -> Payload:
    if suppressed:
        text = f"{text} ({suppressed_note(suppressed)})"
    if len(body) > SECTION_LIMIT:
        body = body[: SECTION_LIMIT - 1] + "…"
    blocks: list[dict[str, Any]] = [{"type": "section", "text": {"type": "mrkdwn", "text": body}}]
    if suppressed:
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": suppressed_note(suppressed)}]})
    return {"text": text, "blocks": blocks}


def cooldown_payload(cd: Cooldown, suppressed: int = 0) -> Payload:
    status = str(cd.status_code) if cd.status_code is not None else "no status"
    text = (
        f"Cooldown: {cd.deployment_id} ({cd.model_group}) {cd.reason}, {status}, "
        f"until {utc(cd.until)} ({seconds(cd.cooldown_time)})"
    )
    w = cd.window
    body = "\n".join(
        (
            f":snowflake: *Cooldown* {code(cd.deployment_id)} in group {code(cd.model_group)}",
            f"*Why:* {escape(cd.reason)} · status {status} · "
            f"{code(exception_text(cd.exception_type, cd.exception_received))}",
            f"*Evidence:* window from {utc(w.start)}: {w.successes} successes, {w.failures} failures · "
            f"trigger {code(cd.trigger_event_id)}",
            f"*Until:* {utc(cd.until)} ({seconds(cd.cooldown_time)} from {utc(cd.ts)})",
        )
    )
    return _payload(escape(text), body, suppressed)


def recovery_payload(p: Pending, suppressed: int = 0) -> Payload:
    lasted = max(0.0, p.until - p.since)
    extra = f", {p.cooldowns} cooldowns" if p.cooldowns > 1 else ""
    text = f"Recovered: {p.deployment_id} ({p.model_group}) cooldown over at {utc(p.until)}"
    body = "\n".join(
        (
            f":white_check_mark: *Cooldown over* {code(p.deployment_id)} in group {code(p.model_group)}",
            f"*Since:* {utc(p.since)} · lasted {seconds(lasted)}{extra} · last reason {escape(p.reason)}",
            f"*Ended:* {utc(p.until)}",
        )
    )
    return _payload(escape(text), body, suppressed)


def transition_payload(t: HealthTransition, suppressed: int = 0) -> Payload:
    by = f" by {code(t.prober)}" if t.prober else ""
    evidence = f"*Evidence:* probe {code(t.probe_event_id)}{by} at {utc(t.ts)}"
    if t.healthy:
        text = f"Healthy again: {t.deployment_id} ({t.model_group}) at {utc(t.ts)}"
        lines: tuple[str, ...] = (
            f":large_green_circle: *Healthy again* {code(t.deployment_id)} in group {code(t.model_group)}",
            evidence,
        )
    else:
        status = str(t.status_code) if t.status_code is not None else "no status"
        was = "healthy" if t.previous else "unknown"
        text = f"Unhealthy: {t.deployment_id} ({t.model_group}) {status} at {utc(t.ts)}"
        lines = (
            f":red_circle: *Unhealthy* {code(t.deployment_id)} in group {code(t.model_group)} (was {was})",
            f"*Why:* health probe failed · status {status} · "
            f"{code(exception_text(t.exception_type, t.exception_received))}",
            evidence,
        )
    return _payload(escape(text), "\n".join(lines), suppressed)
