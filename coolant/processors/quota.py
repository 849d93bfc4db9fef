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
    rl = rec.ratelimit
    if rl is None:
        return None
    resets: list[float] = []
    spent = False
    remaining = rl.remaining_requests
    if remaining is not None and remaining <= q.requests_threshold:
        spent = True
        if rl.reset_requests is not None:
            resets.append(rl.reset_requests)
    tokens = rl.remaining_tokens
    if q.tokens_per_request is not None and tokens is not None and tokens < q.tokens_per_request:
        spent = True
        if rl.reset_tokens is not None:
            resets.append(rl.reset_tokens)
    if not spent:
        return None
    return max(resets, default=0.0)


def message(rec: Outcome) -> str:
    """The cooldown's `exception_received` source text (E4 masks it like any other)."""
    parts = []
    rl = rec.ratelimit
    if rl is not None and rl.remaining_requests is not None:
        parts.append(f"remaining_requests={rl.remaining_requests}")
    if rl is not None and rl.remaining_tokens is not None:
        parts.append(f"remaining_tokens={rl.remaining_tokens}")
    return "quota exhausted: " + " ".join(parts)
