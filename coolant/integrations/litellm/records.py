"""One LiteLLM attempt as a `coolant.outcome/1` record (contract §1.1), and the failures not published because
LiteLLM attributes them to something other than the deployment (spec §1 scope).

Field sources (LiteLLM 1.110.2; `lp` = `kwargs["litellm_params"]`, `md` = `lp["metadata"]`):
- `deployment_id`: `lp["model_info"]["id"]`, else `kwargs["model_id"]`; `model_group`: `md["model_group"]`.
  A call without both (a plain `litellm.completion`, not routed) is not a deployment attempt: skipped.
- `ts`, `latency_ms`: the hook's `end_time` and `end_time - start_time` (this attempt's own start).
- `status_code`, `exception_type`, `exception_message`: `kwargs["exception"]`: its `status_code`, class name
  (`RateLimitError`, ...), `str()` cut to 1,024 characters.
- `retry_after`: the raw `Retry-After` header of the provider response the exception carries
  (`exception.response.headers`, else `exception.litellm_response_headers`); never `retry-after-ms`.
- `cooldown_time`: `lp["cooldown_time"]`. LiteLLM merges the request's `cooldown_time` kwarg and the
  deployment's `litellm_params.cooldown_time` into it (the request wins), so a value may come from the
  deployment; that decides the same duration (spec T1 ranks the record's value just above the params value).
- `attempt`: `md["attempted_retries"]` on the requested group (0 = first try). On a fallback hop LiteLLM's
  retry index restarts at 0, so the attempt is counted per request (`attempts.request_of`) in this
  process.
- `final`: true for a success. For a failure, false while the level's retry budget is not spent
  (`md["attempted_retries"] < md["max_retries"]`), else true. LiteLLM decides a retry only after the failure
  hook returned, so this is a forecast: a failure LiteLLM does not retry (no deployment left, a non-retryable
  error) is still published `final: false`, and the last failure before a fallback hop `final: true`.
- `origin`: "upstream" for every failure but a caller's disconnect ("caller"); null on a success.
- `gateway`: the constructor's `gateway`, else `COOLANT_GATEWAY_ID`, else `HOSTNAME`, else the host name.
- `event_id`: `<litellm_call_id>:<16 hex digits>`, a hash of the attempt (deployment, retry, hop, start time):
  unique per attempt (a proxy's call id is shared by all attempts of a request).

Failures LiteLLM attributes to something other than the deployment are not published (spec §1 scope): advisor
orchestration and deployment-selection failures, 404s on a response id, a video id or a background response
poll, and stream stalls (LiteLLM's own `litellm.router_utils.cooldown_handlers` predicates decide).
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Final

from coolant.integrations.litellm.attempts import metadata, request_of
from coolant.integrations.litellm.ratelimit_headers import logged_headers, quota_fields
from coolant.schemas import Outcome, RateLimit

MAX_MESSAGE: Final = 1024
"""Contract §1.1: publishers truncate `exception_message` to 1,024 characters."""
MAX_RETRY_AFTER: Final = 256
"""A longer `Retry-After` is no integer and no HTTP-date: keep the record small, T2 ignores it anyway."""
CALLER_LEFT: Final = ("ClientDisconnected", "Client disconnected the request")
"""The exception type and message of a caller's disconnect (the proxy's own `error_information` names)."""
MAX_TRACKED_REQUESTS: Final = 4096
"""Requests whose attempts are counted at once (for fallback hops); the oldest is forgotten first."""

_Predicate = Callable[[BaseException, Mapping[str, Any]], bool]


def _outside_predicates() -> tuple[_Predicate, ...]:
    """LiteLLM's own tests for failures outside the selected deployment (spec §1: publishers must not report
    them), each as `(exception, kwargs) -> bool`. A LiteLLM without one of them gets no filter for it."""
    try:
        from litellm.router_utils import cooldown_handlers as ch
    except Exception:  # pragma: no cover - another LiteLLM layout
        return ()

    def by_exception(fn: Callable[..., Any]) -> _Predicate:
        return lambda exc, kwargs: bool(fn(exc))

    def by_params(fn: Callable[..., Any]) -> _Predicate:
        return lambda exc, kwargs: bool(fn(exc, mapping(kwargs.get("litellm_params"))))

    def by_kwargs(fn: Callable[..., Any]) -> _Predicate:
        return lambda exc, kwargs: bool(fn(exc, kwargs))

    wanted = (
        ("is_failure_outside_selected_deployment", by_exception),  # advisor orchestration, deployment selection
        ("is_stream_stall", by_exception),
        ("is_background_response_poll_not_found", by_params),
        ("is_video_lookup_not_found", by_kwargs),
        ("is_response_lookup_not_found", by_kwargs),
    )
    return tuple(wrap(fn) for name, wrap in wanted if callable(fn := getattr(ch, name, None)))


_OUTSIDE: Final = _outside_predicates()


class Skip(Exception):
    """An attempt that is not published, with the counter it goes to."""

    def __init__(self, counter: str) -> None:
        super().__init__(counter)
        self.counter = counter


# -- reading LiteLLM's kwargs ---------------------------------------------------------------------


def mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def _epoch(value: object) -> float | None:
    if isinstance(value, datetime):
        return value.timestamp()  # LiteLLM's times are naive local `datetime.now()`: .timestamp() reads them so
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _deployment_id(kwargs: Mapping[str, Any], md: Mapping[str, Any]) -> str | None:
    lp = mapping(kwargs.get("litellm_params"))
    for candidate in (mapping(lp.get("model_info")).get("id"), kwargs.get("model_id"),
                      mapping(kwargs.get("model_info")).get("id"), mapping(md.get("model_info")).get("id")):
        if isinstance(candidate, str) and candidate:
            return candidate
    return None


def _header(headers: object, name: str) -> str | None:
    """`name` from httpx.Headers, a dict (any case) or a list of pairs."""
    if headers is None:
        return None
    try:
        getter = getattr(headers, "get", None)
        if callable(getter):
            value = getter(name)
            if value is None and isinstance(headers, Mapping):
                value = next((v for k, v in headers.items() if isinstance(k, str) and k.lower() == name), None)
        else:
            value = next((v for k, v in headers if isinstance(k, str) and k.lower() == name), None)  # type: ignore[attr-defined]
    except Exception:
        return None
    return value if isinstance(value, str) else None


def _retry_after(exc: BaseException) -> str | None:
    """The raw `Retry-After` of the provider's response, as the exception carries it."""
    response = getattr(exc, "response", None)
    for headers in (getattr(response, "headers", None), getattr(exc, "litellm_response_headers", None),
                    getattr(exc, "headers", None)):
        value = _header(headers, "retry-after")
        if value is not None:
            return value[:MAX_RETRY_AFTER]
    return None


def _status(exc: BaseException) -> int | None:
    """The HTTP status the deployment answered. A connection error got none: LiteLLM's `APIConnectionError`
    carries a placeholder 500, while its logging hooks see the SDK's error without a status; either way the
    record has none (a timeout keeps its 408)."""
    if type(exc).__name__ == "APIConnectionError":
        return None
    return _int(getattr(exc, "status_code", None))


def _message(exc: BaseException) -> str | None:
    try:
        text = str(exc)
    except Exception:
        return None
    return text[:MAX_MESSAGE] if text else None


def _cooldown_time(lp: Mapping[str, Any]) -> float | None:
    value = lp.get("cooldown_time")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


class Attempts:
    """Counts the attempts of each request (`attempts.request_of`) seen in this process.

    LiteLLM stamps the retry index of the model group being tried (`attempted_retries`); a fallback hop starts
    again at 0. The hooks of one request fire in attempt order (a failure hook returns before the router goes
    on), so counting them numbers the hops too. Bounded: the least recently seen request is forgotten first.
    """

    def __init__(self, capacity: int = MAX_TRACKED_REQUESTS) -> None:
        self.capacity = capacity
        self._next: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()

    def number(self, trace_id: str | None, retry: int | None, hop: int | None) -> int | None:
        first_level = not hop  # 0 or unknown: the requested group, where LiteLLM's retry index is exact
        if trace_id is None:
            return retry if first_level else None
        attempt: int | None
        with self._lock:
            if first_level and retry is not None:
                attempt = retry
            else:
                seen = self._next.get(trace_id)
                attempt = seen if seen is not None else (retry if first_level else None)
            if attempt is not None:
                self._next[trace_id] = attempt + 1
                self._next.move_to_end(trace_id)
                while len(self._next) > self.capacity:
                    self._next.popitem(last=False)
        return attempt


def _event_id(kwargs: Mapping[str, Any], deployment_id: str, retry: int | None, hop: int | None,
              start: float | None) -> str:
    call_id = kwargs.get("litellm_call_id")
    prefix = call_id[:100] if isinstance(call_id, str) and call_id else "litellm"
    if start is None:
        return f"{prefix}:{uuid.uuid4().hex[:16]}"
    digest = hashlib.blake2b(f"{deployment_id}\n{hop}\n{retry}\n{start!r}".encode(), digest_size=8).hexdigest()
    return f"{prefix}:{digest}"


def build_outcome(
    kwargs: Mapping[str, Any],
    start_time: object,
    end_time: object,
    *,
    ok: bool,
    gateway: str | None = None,
    attempts: Attempts | None = None,
) -> Outcome:
    """The outcome record of one attempt, from what LiteLLM hands its logging hooks.

    A success LiteLLM logs for a stream its caller left (the proxy marks `client_disconnected`) is a failure
    with `origin: "caller"`; every other failure has `origin: "upstream"`.
    Raises `Skip` for an attempt that is not published (not routed, or a failure outside the deployment).
    """
    md = metadata(kwargs)
    lp = mapping(kwargs.get("litellm_params"))
    deployment_id = _deployment_id(kwargs, md)
    model_group = md.get("model_group")
    if deployment_id is None or not isinstance(model_group, str) or not model_group:
        raise Skip("not_routed")
    exc = kwargs.get("exception")
    if not ok and isinstance(exc, BaseException):
        for outside in _OUTSIDE:
            try:
                if outside(exc, kwargs):
                    raise Skip("outside")
            except Skip:
                raise
            except Exception:  # a predicate that cannot read this call: publish rather than guess
                continue
    start, end = _epoch(start_time), _epoch(end_time)
    ts = end if end is not None else time.time()
    retry, budget = _int(md.get("attempted_retries")), _int(md.get("max_retries"))
    hop = _int(md.get("attempted_fallbacks"))
    fallback = retry if not hop else None
    attempt = fallback if attempts is None else attempts.number(request_of(kwargs), retry, hop)
    if ok:
        final: bool | None = True
    elif retry is not None and budget is not None:
        final = retry >= budget
    else:
        final = None
    left = ok and md.get("client_disconnected") is True
    if left:
        ok, final = False, True
    failure = exc if not ok and isinstance(exc, BaseException) else None
    quota = quota_fields(logged_headers(kwargs), ts) if ok else {}
    return Outcome(
        event_id=_event_id(kwargs, deployment_id, retry, hop, start),
        ts=ts,
        deployment_id=deployment_id,
        model_group=model_group,
        ok=ok,
        status_code=None if failure is None else _status(failure),
        exception_type=CALLER_LEFT[0] if left else None if failure is None else type(failure).__name__,
        exception_message=CALLER_LEFT[1] if left else None if failure is None else _message(failure),
        retry_after=None if failure is None else _retry_after(failure),
        cooldown_time=_cooldown_time(lp),
        attempt=attempt if attempt is not None and attempt >= 0 else None,
        final=final,
        gateway=gateway,
        latency_ms=round(max(0.0, end - start) * 1000.0, 3) if start is not None and end is not None else None,
        ratelimit=RateLimit(**quota) if quota else None,
        origin=None if ok else "caller" if left else "upstream",
    )


