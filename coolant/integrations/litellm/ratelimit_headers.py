"""The quota a provider announces in its response headers, as the outcome's `ratelimit` object (X6).

Formats seen in the wild:
- OpenAI and Azure OpenAI: `x-ratelimit-remaining-requests: 59`, `x-ratelimit-remaining-tokens: 149984`,
  `x-ratelimit-reset-requests: 1s` / `6m0s` / `20ms` / `1h2m3.5s` (a Go-style duration until the refill).
- Anthropic: `anthropic-ratelimit-requests-remaining: 49`, `anthropic-ratelimit-tokens-remaining`, and
  `anthropic-ratelimit-requests-reset: 2026-12-01T12:00:30Z` (an RFC 3339 time of the refill).
- LiteLLM 1.110.2 keeps a response's headers in `response._hidden_params["additional_headers"]`: the
  OpenAI-compatible ones under their own names, and every raw provider header again as `llm_provider-<name>`;
  its logging hooks get them in `kwargs["standard_logging_object"]["hidden_params"]["additional_headers"]`,
  the OpenAI ones renamed with underscores (`x_ratelimit_remaining_requests`, as ints).

Anything that does not parse is left out (None): a bad header must never cool a deployment.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

PROVIDER_PREFIX = "llm_provider-"
_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m(?!s))?(?:(\d+(?:\.\d+)?)s)?(?:(\d+(?:\.\d+)?)ms)?")
_COUNT = re.compile(r"\s*(\d{1,15})\s*")
_NAMES = {
    "requests": (
        ("x-ratelimit-remaining-requests", "x-ratelimit-reset-requests"),
        ("anthropic-ratelimit-requests-remaining", "anthropic-ratelimit-requests-reset"),
    ),
    "tokens": (
        ("x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"),
        ("anthropic-ratelimit-tokens-remaining", "anthropic-ratelimit-tokens-reset"),
    ),
}


def _lower(headers: Mapping[str, Any]) -> dict[str, str]:
    """Header names folded to lower case, LiteLLM's `llm_provider-` prefix removed (the bare name wins)."""
    out: dict[str, str] = {}
    prefixed: dict[str, str] = {}
    for name, value in headers.items():
        if not isinstance(name, str) or not isinstance(value, str | int | float) or isinstance(value, bool):
            continue
        key = name.lower()
        if key.startswith(PROVIDER_PREFIX):
            prefixed[key[len(PROVIDER_PREFIX) :].replace("_", "-")] = str(value)
        else:
            out[key.replace("_", "-")] = str(value)  # the logging payload spells x_ratelimit_remaining_requests
    return {**prefixed, **out}


def parse_count(value: str | None) -> int | None:
    """A non-negative integer count, else None."""
    if value is None:
        return None
    m = _COUNT.fullmatch(value)
    return int(m.group(1)) if m else None


def parse_duration(value: str) -> float | None:
    """`6m0s`, `1s`, `20ms`, `1h2m3.5s` or bare seconds `12`/`0.5` -> seconds; None if it does not parse."""
    text = value.strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        m = _DURATION.fullmatch(text)
        if m is None or not any(m.groups()):
            return None
        h, mi, s, ms = (float(g) if g else 0.0 for g in m.groups())
        seconds = h * 3600 + mi * 60 + s + ms / 1000
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def parse_reset(value: str | None, now: float) -> float | None:
    """Seconds from `now` until the refill: a duration (OpenAI) or an RFC 3339 time (Anthropic)."""
    if value is None:
        return None
    seconds = parse_duration(value)
    if seconds is not None:
        return seconds
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    if when.tzinfo is None:  # RFC 3339 requires an offset; a bare time is ambiguous
        return None
    return max(0.0, round(when.timestamp() - now, 3))


def quota_fields(headers: Mapping[str, Any] | None, now: float) -> dict[str, Any]:
    """The outcome's `ratelimit` object these response headers announce (only the keys present; {}: none)."""
    if not headers:
        return {}
    h = _lower(headers)
    out: dict[str, Any] = {}
    for what, spellings in _NAMES.items():
        for remaining_name, reset_name in spellings:
            remaining = parse_count(h.get(remaining_name))
            if remaining is None:
                continue
            out[f"remaining_{what}"] = remaining
            reset = parse_reset(h.get(reset_name), now)
            if reset is not None:
                out[f"reset_{what}"] = reset
            break
    return out


def logged_headers(kwargs: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """LiteLLM 1.110.2's logging hooks: `kwargs["standard_logging_object"]["hidden_params"]["additional_headers"]`.

    The same headers as the response's, the OpenAI ones renamed `x_ratelimit_remaining_requests` (as ints).
    """
    slo = kwargs.get("standard_logging_object")
    hidden = slo.get("hidden_params") if isinstance(slo, Mapping) else None
    headers = hidden.get("additional_headers") if isinstance(hidden, Mapping) else None
    return headers if isinstance(headers, Mapping) else None


def response_headers(response: object) -> Mapping[str, Any] | None:
    """LiteLLM 1.110.2: a response's headers are `response._hidden_params["additional_headers"]`."""
    hidden = getattr(response, "_hidden_params", None)
    if not isinstance(hidden, Mapping):
        return None
    headers = hidden.get("additional_headers")
    return headers if isinstance(headers, Mapping) else None
