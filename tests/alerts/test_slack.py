"""Slack payloads: who, why, evidence, until; escaping; the suppressed count."""

from __future__ import annotations

import msgspec

from coolant.alerts.recovery import Pending
from coolant.alerts.slack import cooldown_payload, exception_text, recovery_payload, transition_payload
from tests.alerts.support import cooldown, transition

T = 1_800_000_000.0  # 2027-01-15 08:00:00 UTC


def section(payload: dict[str, object]) -> str:
    blocks = payload["blocks"]
    assert isinstance(blocks, list) and blocks[0]["type"] == "section"
    assert blocks[0]["text"]["type"] == "mrkdwn"
    return str(blocks[0]["text"]["text"])


def test_cooldown_payload_says_who_why_evidence_and_until() -> None:
    p = cooldown_payload(cooldown(1, ts=T, seconds=60))
    assert set(p) == {"text", "blocks"} and len(p["blocks"]) == 1
    body = section(p)
    assert "`dep-a` in group `grp-1`" in body
    assert "rate_limited · status 429 · `litellm.RateLimitError: you exceeded your current quota, please check…`" in (
        body
    )
    assert "window from 2027-01-15 07:59:30 UTC: 3 successes, 12 failures · trigger `ev-dep-a-1`" in body
    assert "*Until:* 2027-01-15 08:01:00 UTC (60 s from 2027-01-15 08:00:00 UTC)" in body
    assert p["text"] == "Cooldown: dep-a (grp-1) rate_limited, 429, until 2027-01-15 08:01:00 UTC (60 s)"


def test_no_status_and_short_durations() -> None:
    body = section(cooldown_payload(cooldown(1, ts=T, seconds=2.5, status=None, reason="total_outage")))
    assert "total_outage · status no status" in body and "(2.5 s from" in body


def test_record_text_is_escaped() -> None:
    cd = msgspec.structs.replace(cooldown(1), deployment_id="<!channel>", exception_received="a & b `x` <@U1>")
    p = cooldown_payload(cd)
    body = section(p)
    assert "<!channel>" not in body and "&lt;!channel&gt;" in body
    assert "<@U1>" not in body and "a &amp; b 'x' &lt;@U1&gt;" in body
    assert "<!channel>" not in str(p["text"])


def test_the_suppressed_count_is_said_in_text_and_a_context_block() -> None:
    p = cooldown_payload(cooldown(1), suppressed=3)
    assert str(p["text"]).endswith("(3 similar alerts suppressed)")
    note = {"type": "mrkdwn", "text": "3 similar alerts suppressed"}
    assert p["blocks"][1] == {"type": "context", "elements": [note]}
    assert "1 similar alert suppressed" in str(cooldown_payload(cooldown(1), suppressed=1)["text"])


def test_recovery_payload() -> None:
    p = recovery_payload(Pending("dep-a", "grp-1", T, T + 150, "failure_rate", 3), suppressed=0)
    body = section(p)
    assert "*Cooldown over* `dep-a` in group `grp-1`" in body
    assert "lasted 150 s, 3 cooldowns · last reason failure_rate" in body
    assert "*Ended:* 2027-01-15 08:02:30 UTC" in body
    assert str(p["text"]).startswith("Recovered: dep-a (grp-1)")


def test_transition_payloads() -> None:
    down = transition_payload(transition(1, healthy=False, previous=True, ts=T))
    body = section(down)
    assert "*Unhealthy* `dep-h` in group `grp-h` (was healthy)" in body
    assert "status 503 · `ServiceUnavailableError: litellm.ServiceUnavailableError: overloaded`" not in body
    assert "`litellm.ServiceUnavailableError: overloaded`" in body
    assert "probe `probe-dep-h-1` by `prober-1` at 2027-01-15 08:00:00 UTC" in body
    up = transition_payload(transition(2, healthy=True, previous=False, ts=T))
    assert "*Healthy again* `dep-h`" in section(up)
    assert str(up["text"]).startswith("Healthy again: dep-h (grp-h)")


def test_exception_text_keeps_the_readable_head() -> None:
    assert exception_text("RateLimitError", "slow down") == "RateLimitError: slow down"
    assert exception_text("RateLimitError", "RateLimitError: slow***") == "RateLimitError: slow…"
    assert exception_text(None, "") == "-"
    assert len(exception_text(None, "x" * 500)) == 120


def test_section_text_stays_within_slacks_limit() -> None:
    cd = msgspec.structs.replace(cooldown(1), deployment_id="d" * 5000)
    assert len(section(cooldown_payload(cd))) <= 3000
