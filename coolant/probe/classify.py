"""A probe's raw result as a `coolant.health/1` record (contract §1.2): pure, so every engine classifies alike.

Failures get LiteLLM's exception names (what its own health check would raise), so a health record from the
prober reads like the outcome records gateways publish. Error text is cut to the contract's 1,024 characters
after the deployment's own API key and anything that looks like a bearer token or an `sk-` key are redacted:
an upstream 401 often echoes part of the key it rejected.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from coolant.probe.ownership import probe_event_id
from coolant.probe.targets import Target
from coolant.schemas import Health

__all__ = ["MAX_MESSAGE", "ProbeResult", "classify", "exception_name", "scrub"]

MAX_MESSAGE = 1024
"""Contract §1.1: publishers truncate error text to 1,024 characters."""
REDACTED = "<redacted>"
_TOKENS = re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{8,}|\b(sk|pk|rk|key)-[A-Za-z0-9_*-]{6,}")

_STATUS_NAMES = {
    400: "BadRequestError",
    401: "AuthenticationError",
    404: "NotFoundError",
    408: "Timeout",
    422: "BadRequestError",
    429: "RateLimitError",
    500: "InternalServerError",
    502: "BadGatewayError",
    503: "ServiceUnavailableError",
    504: "Timeout",
}
"""What LiteLLM 1.110.2's own health check raises for an OpenAI-format deployment answering these statuses
(measured in tests/probe/test_litellm_verdicts.py); any other failing status is its generic `APIError`."""


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """What one probe call saw. `error` is None for an HTTP answer, else "timeout" or "connection"
    (no answer), or an exception class name (the LiteLLM engine)."""

    finished: float
    latency_ms: float
    status_code: int | None = None
    error: str | None = None
    message: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.status_code is not None and 200 <= self.status_code < 300


def exception_name(status_code: int | None, error: str | None) -> str | None:
    """LiteLLM's exception class for a failed probe (None for a success)."""
    if error == "timeout":
        return "Timeout"
    if error == "connection":
        return "APIConnectionError"
    if error is not None:
        return error
    if status_code is None:
        return "APIError"
    if 200 <= status_code < 300:
        return None
    return _STATUS_NAMES.get(status_code, "APIError")


def scrub(text: str | None, secrets: Iterable[str | None] = ()) -> str | None:
    """Redact the given secrets and key-like tokens, then truncate to 1,024 characters."""
    if text is None:
        return None
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, REDACTED)
    text = _TOKENS.sub(lambda m: (m.group(1) or "") + REDACTED, text)
    return text[:MAX_MESSAGE]


def classify(
    target: Target, result: ProbeResult, k: int, interval: float, prober: str, secrets: Iterable[str | None] = ()
) -> Health:
    """The health record of `target`'s probe in round `k` (event id deterministic per deployment and round)."""
    healthy = result.ok
    return Health(
        event_id=probe_event_id(target.deployment_id, interval, k),
        ts=result.finished,
        deployment_id=target.deployment_id,
        model_group=target.model_group,
        healthy=healthy,
        status_code=None if healthy else result.status_code,
        exception_type=None if healthy else exception_name(result.status_code, result.error),
        exception_message=None if healthy else scrub(result.message, secrets),
        latency_ms=round(result.latency_ms, 3),
        prober=prober,
        mode=target.mode,
    )
