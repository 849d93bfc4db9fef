"""X6 quota-aware cooldowns: a success that announces a spent budget cools the deployment until the reset.

Providers announce the budget left on every successful response (OpenAI/Azure `x-ratelimit-*`,
Anthropic `anthropic-ratelimit-*`); publishers copy it into the outcome's `ratelimit_*` fields.
The fleet sees every pod's responses, so it can stop routing to a key before any pod gets the 429.
"""

from __future__ import annotations

from coolant.processors.policy import Quota
from coolant.schemas import Outcome


def spent_reset(q: Quota, rec: Outcome) -> float | None:
    """X6.2: None when no announced budget is spent; else the longest reset announced for a spent one (0.0: none)."""
    resets: list[float] = []
    spent = False
    remaining = rec.ratelimit_remaining_requests
    if remaining is not None and remaining <= q.requests_threshold:
        spent = True
        if rec.ratelimit_reset_requests is not None:
            resets.append(rec.ratelimit_reset_requests)
    tokens = rec.ratelimit_remaining_tokens
    if q.tokens_per_request is not None and tokens is not None and tokens < q.tokens_per_request:
        spent = True
        if rec.ratelimit_reset_tokens is not None:
            resets.append(rec.ratelimit_reset_tokens)
    if not spent:
        return None
    return max(resets, default=0.0)


def message(rec: Outcome) -> str:
    """The cooldown's `exception_received` source text (E4 masks it like any other)."""
    parts = []
    if rec.ratelimit_remaining_requests is not None:
        parts.append(f"remaining_requests={rec.ratelimit_remaining_requests}")
    if rec.ratelimit_remaining_tokens is not None:
        parts.append(f"remaining_tokens={rec.ratelimit_remaining_tokens}")
    return "quota exhausted: " + " ".join(parts)
