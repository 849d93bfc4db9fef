"""Whether and when to retry a webhook post: a pure decision from the attempt's outcome.

Retried: connection errors and timeouts (`status` None), 5xx and 429. A 429 or 503 with a Retry-After
header waits exactly that long (seconds or an HTTP-date, parsed by the policy's own parser); one asking
for longer than `max_delay` gives up rather than retrying early or blocking the consumer. Other statuses
(a 400 payload error, a 404 webhook that is gone) would fail the same way again, so they give up at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from coolant.processors.duration import retry_after_seconds


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_retries: int = 5
    """Retries after the first attempt; then the alert is given up (and logged)."""
    base_delay: float = 1.0
    """First backoff; doubles per retry."""
    max_delay: float = 60.0
    """Cap of a backoff, and the longest Retry-After honoured."""


@dataclass(frozen=True, slots=True)
class Decision:
    retry: bool
    delay: float
    """Seconds to wait before the next attempt (when `retry`)."""
    why: str
    """What happened, for the log line."""


def delivered(status: int | None) -> bool:
    return status is not None and 200 <= status < 300


def next_attempt(
    policy: RetryPolicy, attempt: int, status: int | None, retry_after: str | None, now: float, error: str = ""
) -> Decision:
    """After failed attempt number `attempt` (0 = the first), retry or give up, and after how long."""
    what = f"HTTP {status}" if status is not None else (error or "connection error")
    if status is not None and not (status == 429 or status >= 500):
        return Decision(False, 0.0, f"{what}: not retryable")
    if attempt >= policy.max_retries:
        return Decision(False, 0.0, f"{what}: gave up after {attempt + 1} attempts")
    asked = retry_after_seconds(retry_after, now) if status in (429, 503) else None
    if asked is not None:
        if asked > policy.max_delay:
            return Decision(False, 0.0, f"{what}: Retry-After {asked:g} s exceeds the {policy.max_delay:g} s limit")
        return Decision(True, asked, f"{what}: retrying after {asked:g} s (Retry-After)")
    delay = min(policy.max_delay, policy.base_delay * 2**attempt)
    return Decision(True, delay, f"{what}: retrying in {delay:g} s")
