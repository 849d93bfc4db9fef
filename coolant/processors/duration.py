"""How long a cooldown lasts (spec T1-T4, H3, X4) and Retry-After parsing (T2, D5)."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime

from coolant.processors.policy import DeploymentEntry, Policy

DEFAULT_COOLDOWN = 5.0
RETRY_AFTER_MAX = 7 * 86_400.0
"""B3 (docs/input-bounds.md): the longest Retry-After honoured, 7 days. The longest a provider announces is a
daily quota's reset (a day at most); LiteLLM honours any value, and its recorded episodes include 100,000 s, which
stays exact. Above this bound a header is no provider's answer but a broken or hostile one (400 nines), and a
single record must not cool a deployment for a year. X4 (`max_cooldown_time`) caps lower when it is set."""
_SECONDS = re.compile(r"[ \t]*([0-9]+)[ \t]*")
# RFC 9110 §5.6.7: IMF-fixdate, RFC 850 and asctime forms, always GMT.
_DATE_FORMATS = ("%a, %d %b %Y %H:%M:%S GMT", "%A, %d-%b-%y %H:%M:%S GMT", "%a %b %d %H:%M:%S %Y")


def _http_date(value: str) -> float | None:
    """Epoch seconds of an RFC 9110 HTTP-date, else None."""
    text = " ".join(value.split())  # asctime pads the day with a space
    for fmt in _DATE_FORMATS:
        try:
            when = datetime.strptime(text, fmt)
        except ValueError:
            continue
        return when.replace(tzinfo=UTC).timestamp()
    return None


def retry_after_seconds(value: str | None, ts: float) -> float | None:
    """T2: the Retry-After duration measured from the record's own ts (D5), or None if ignored.

    B3 (docs/input-bounds.md): at most RETRY_AFTER_MAX, in either form, so no header can cool a deployment for
    longer than any provider asks (a 400-digit value would not even convert to a float).
    """
    if value is None:
        return None
    m = _SECONDS.fullmatch(value)
    if m:
        digits = m.group(1).lstrip("0") or "0"
        return min(float(int(digits)), RETRY_AFTER_MAX) if len(digits) <= 9 else RETRY_AFTER_MAX
    when = _http_date(value)
    if when is None:
        return None
    seconds = math.floor(when - ts)
    return float(min(seconds, RETRY_AFTER_MAX)) if seconds > 0 else None


def request_duration(
    policy: Policy, entry: DeploymentEntry, record_cooldown: float | None, retry_after: str | None, ts: float
) -> float:
    """T1-T4 for the request path; 0 means "do not cool" (G5)."""
    if entry.cooldown_time is not None:
        return entry.cooldown_time
    if record_cooldown is not None and record_cooldown >= 0:
        return record_cooldown
    if entry.params_cooldown_time is not None:
        return entry.params_cooldown_time
    from_header = retry_after_seconds(retry_after, ts)
    if from_header is not None:
        return provider_capped(policy, from_header)
    return router_duration(policy)


def provider_capped(policy: Policy, seconds: float) -> float:
    """X4: a duration the provider announced (Retry-After, T2; a quota reset, X6) capped by `max_cooldown_time`."""
    cap = policy.options.max_cooldown_time
    return min(seconds, cap) if cap is not None else seconds


def router_duration(policy: Policy) -> float:
    """T3/T4, and the whole of H3 for probes: the router's value if > 0, else 5 s."""
    rc = policy.router.cooldown_time
    return rc if rc is not None and rc > 0 else DEFAULT_COOLDOWN


def counter_lifetime(policy: Policy, entry: DeploymentEntry) -> float:
    """C1: how long a V1 allowed-fails counter lives, fixed when it is created."""
    window = policy.options.allowed_fails_window
    if window is not None:
        return window
    if entry.cooldown_time is not None:
        return entry.cooldown_time
    if entry.params_cooldown_time is not None:
        return entry.params_cooldown_time
    return router_duration(policy)
