"""`CoolantCallback`: a LiteLLM `CustomLogger` that publishes one `coolant.outcome/1` per attempt (contract §1.1).

LiteLLM proxy (`config.yaml`; the proxy imports the dotted path and takes the module attribute):

    litellm_settings:
      callbacks: ["coolant.integrations.litellm.coolant_callback"]

with `COOLANT_KAFKA_BOOTSTRAP` (required; without it the callback does nothing and warns once),
`COOLANT_TOPIC_PREFIX` (default `coolant.`) and `COOLANT_GATEWAY_ID` (default `$HOSTNAME`) in the proxy's
environment. In code: `litellm.callbacks = [CoolantCallback("kafka:9092")]`.

What LiteLLM 1.110.2 calls, per attempt (`coolant.integrations.litellm_attempts` says why three hooks, and
how an attempt two of them report is published once):
- `async_post_call_failure_deployment_hook`: every attempt whose call raised (retries and fallback hops
  included), awaited before LiteLLM re-raises; the only report of a proxy's retries.
- `async_log_failure_event` (async requests) / `log_failure_event` (sync requests, on the request thread):
  the logging object's report, the only one of a stream that fails after its call returned.
- `async_log_success_event` / `log_success_event`: after the response has been returned, from LiteLLM's
  logging worker or thread pool. A proxy logs a stream its caller left as a success marked
  `client_disconnected`: published as a failure with `origin: "caller"`.
All of them only build a record and hand it to a publisher's `publish` (an append to a bounded in-memory buffer,
no I/O): by default a `Publisher` on the running event loop for the async hooks, a `SyncPublisher` thread
for sync callers (see `CoolantCallback`). None of them ever raises into LiteLLM.

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
  retry index restarts at 0, so the attempt is counted per request (`litellm_attempts.request_of`) in this
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

import asyncio
import atexit
import contextlib
import hashlib
import logging
import math
import os
import socket
import sys
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final, Literal, Protocol

import redis.asyncio as redis_asyncio
from litellm.integrations.custom_logger import CustomLogger

from coolant.integrations.litellm_attempts import Seen, attempt_key, from_deployment_hook, metadata, request_of
from coolant.integrations.litellm_cooldowns import CooldownFeed, LocalCooldowns, local_cooldowns
from coolant.integrations.litellm_streams import StreamFailure, on_loop, watch_stream_failures
from coolant.integrations.ratelimit_headers import logged_headers, quota_fields
from coolant.io.materializer import RedisSink
from coolant.processors.policy import Policy
from coolant.processors.prefetch import OwnCounters, prefetch
from coolant.publish import Publisher, SyncPublisher
from coolant.schemas import Cooldown, Outcome, RateLimit

__all__ = [
    "ENV_BOOTSTRAP",
    "ENV_CONFIG",
    "ENV_GATEWAY",
    "ENV_REDIS_KEY_PREFIX",
    "ENV_REDIS_URL",
    "ENV_TOPIC_PREFIX",
    "CallbackStats",
    "CoolantCallback",
    "build_outcome",
    "coolant_callback",
]

log = logging.getLogger(__name__)

ENV_BOOTSTRAP: Final = "COOLANT_KAFKA_BOOTSTRAP"
ENV_TOPIC_PREFIX: Final = "COOLANT_TOPIC_PREFIX"
ENV_GATEWAY: Final = "COOLANT_GATEWAY_ID"
ENV_CONFIG: Final = "COOLANT_CONFIG"
"""The worker's config file: with it the callback decides the one-record rules in the pod (the fast path)."""
ENV_REDIS_URL: Final = "COOLANT_REDIS_URL"
"""The Redis the routers share: the fast path writes its cooldowns there, the push feed subscribes there."""
ENV_REDIS_KEY_PREFIX: Final = "COOLANT_REDIS_KEY_PREFIX"

MAX_MESSAGE: Final = 1024
"""Contract §1.1: publishers truncate `exception_message` to 1,024 characters."""
MAX_RETRY_AFTER: Final = 256
"""A longer `Retry-After` is no integer and no HTTP-date: keep the record small, T2 ignores it anyway."""
ERROR_LOG_EVERY: Final = 60.0
"""Seconds between two logged failures of the callback itself."""
CALLER_LEFT: Final = ("ClientDisconnected", "Client disconnected the request")
"""The exception type and message of a caller's disconnect (the proxy's own `error_information` names)."""
MAX_TRACKED_REQUESTS: Final = 4096
"""Requests whose attempts are counted at once (for fallback hops); the oldest is forgotten first."""
MAX_PENDING_WRITES: Final = 256
"""Fast-path Redis writes in flight at once; beyond, a write is left to the worker (counted `unwritten`)."""


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
        return lambda exc, kwargs: bool(fn(exc, _mapping(kwargs.get("litellm_params"))))

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


class _Sink(Protocol):
    def publish(self, record: Outcome) -> bool: ...


@dataclass(frozen=True, slots=True)
class CallbackStats:
    """What the callback did with the attempts LiteLLM reported (all counters only grow).

    - `published`: handed to the publisher and accepted (its own stats say whether Kafka took them).
    - `dropped`: refused by the publisher (buffer full, Kafka unavailable, invalid; see its stats).
    - `not_routed`: calls without a deployment id or model group (not made through a Router).
    - `outside`: failures LiteLLM attributes to something other than the deployment.
    - `disabled`: attempts seen while no Kafka bootstrap was configured.
    - `repeated`: reports of an attempt already published (LiteLLM reported it through a second hook).
    - `errors`: the callback's own failures (a bug or an unexpected `kwargs`), logged and swallowed.
    - `prefetched`: failures the fast path cooled in this pod (the worker emits the same cooldown).
    - `unwritten`: of those, the ones whose Redis write did not happen here (Redis away, too many in flight,
      a sync caller): the worker's write of the same decision follows.
    """

    published: int = 0
    dropped: int = 0
    not_routed: int = 0
    outside: int = 0
    disabled: int = 0
    repeated: int = 0
    errors: int = 0
    prefetched: int = 0
    unwritten: int = 0


class _Skip(Exception):
    """An attempt that is not published, with the counter it goes to."""

    def __init__(self, counter: str) -> None:
        super().__init__(counter)
        self.counter = counter


# -- reading LiteLLM's kwargs ---------------------------------------------------------------------


def _mapping(value: object) -> Mapping[str, Any]:
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
    lp = _mapping(kwargs.get("litellm_params"))
    for candidate in (_mapping(lp.get("model_info")).get("id"), kwargs.get("model_id"),
                      _mapping(kwargs.get("model_info")).get("id"), _mapping(md.get("model_info")).get("id")):
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


class _Attempts:
    """Counts the attempts of each request (`litellm_attempts.request_of`) seen in this process.

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
    attempts: _Attempts | None = None,
) -> Outcome:
    """The outcome record of one attempt, from what LiteLLM hands its logging hooks.

    A success LiteLLM logs for a stream its caller left (the proxy marks `client_disconnected`) is a failure
    with `origin: "caller"`; every other failure has `origin: "upstream"`.
    Raises `_Skip` for an attempt that is not published (not routed, or a failure outside the deployment).
    """
    md = metadata(kwargs)
    lp = _mapping(kwargs.get("litellm_params"))
    deployment_id = _deployment_id(kwargs, md)
    model_group = md.get("model_group")
    if deployment_id is None or not isinstance(model_group, str) or not model_group:
        raise _Skip("not_routed")
    exc = kwargs.get("exception")
    if not ok and isinstance(exc, BaseException):
        for outside in _OUTSIDE:
            try:
                if outside(exc, kwargs):
                    raise _Skip("outside")
            except _Skip:
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


# -- the callback ---------------------------------------------------------------------------------


class CoolantCallback(CustomLogger):
    """Publishes an outcome record for every attempt LiteLLM reports to its logging hooks.

    `bootstrap_servers`, `topic_prefix`, `gateway`: as given, else from `COOLANT_KAFKA_BOOTSTRAP`,
    `COOLANT_TOPIC_PREFIX`, `COOLANT_GATEWAY_ID` (then `HOSTNAME`), read at the first attempt so the
    module-level `coolant_callback` can be configured after import. Without a bootstrap the callback does
    nothing (and warns once).

    Publishers, started at the first attempt (`mode`):
    - `"auto"` (default): the async hooks publish through a `coolant.publish.Publisher` on the running event
      loop (the proxy's): `publish` is then an append to a buffer, with no thread and no lock contention, and
      the Kafka sends are tasks on that loop. A new loop (the old one closed) gets a new publisher. The sync
      hooks use that publisher too while its loop runs (its `publish` is thread-safe), else a `SyncPublisher`.
    - `"thread"`: always a `SyncPublisher` (a daemon thread with its own loop). The request thread then
      shares the GIL with the Kafka client: the hooks' tail latency is higher (see bench/fleet_compare.py).
    `publisher`: any object with `publish(record) -> bool` to use instead; the callback never starts or stops
    one it was given. `max_buffer`, `linger_ms`, `client_args` (e.g. SASL/SSL `AIOKafkaProducer` arguments),
    `validate`, `reconnect_backoff`: the publishers'.

    The fast path and the push (docs/litellm.md §6), on when a policy is known (`policy`, else the config file
    `config`, else `COOLANT_CONFIG`: the worker's config, so both decide alike):
    - a failure whose cooldown one record decides (`coolant.processors.prefetch`: a 429 in a group of several
      deployments, a non-retryable status, a threshold-0 allowed-fails rule; and PF, V2.2/V2.3 on this
      process's own LiteLLM counters, which it keeps over every record it publishes) is cooled in this pod's routers
      before the failure hook returns, so LiteLLM's retry or next request already routes around it; the async
      hooks then write it to Redis with the materializer's own never-shorten write (`redis_url`, else
      `COOLANT_REDIS_URL`; `redis_key_prefix`, else `COOLANT_REDIS_KEY_PREFIX`, else the config's), which
      announces it to the other pods. The record is published as always and the worker emits the same cooldown.
    - with `push` (default) and a Redis URL, a `CooldownFeed` subscription applies every cooldown the fleet
      writes to this pod's routers as it is announced; while it is down they rely on LiteLLM's Redis reads.
    The routers are the ones given (`routers`, `attach`), else the proxy's own (`proxy_server.llm_router`).
    """

    def __init__(
        self,
        bootstrap_servers: str | None = None,
        *,
        topic_prefix: str | None = None,
        gateway: str | None = None,
        publisher: _Sink | None = None,
        mode: Literal["auto", "thread"] = "auto",
        max_buffer: int = 10_000,
        linger_ms: int = 20,
        client_args: Mapping[str, Any] | None = None,
        validate: bool = True,
        reconnect_backoff: tuple[float, float] | None = None,
        policy: Policy | None = None,
        config: str | os.PathLike[str] | None = None,
        redis_url: str | None = None,
        redis_key_prefix: str | None = None,
        routers: Iterable[Any] = (),
        push: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if mode not in ("auto", "thread"):
            raise ValueError(f"mode must be 'auto' or 'thread', not {mode!r}")
        # Public str attributes: LiteLLM keeps one logger per class and public str/int/bool attributes
        # (`LoggingCallbackManager._get_custom_logger_key`), so differently configured instances both register.
        self.bootstrap_servers = bootstrap_servers or ""
        self.topic_prefix = topic_prefix or ""
        self.mode = mode
        self._bootstrap = bootstrap_servers
        self._topic_prefix_arg = topic_prefix
        self._gateway_arg = gateway
        self._publisher_args: dict[str, Any] = {
            "max_buffer": max_buffer, "linger_ms": linger_ms, "client_args": client_args, "validate": validate,
        }
        if reconnect_backoff is not None:
            self._publisher_args["reconnect_backoff"] = reconnect_backoff
        self._given = publisher
        self._config: tuple[str, dict[str, Any]] | None = None  # (bootstrap, publisher kwargs) once resolved
        self._resolved = False
        self._gateway: str | None = gateway
        self._thread_pub: SyncPublisher | None = None
        self._loop_pub: Publisher | None = None
        self._pub_loop: asyncio.AbstractEventLoop | None = None  # the loop `_loop_pub` runs on
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(CallbackStats.__dataclass_fields__, 0)
        self._count_lock = threading.Lock()
        self._attempts = _Attempts()
        self._seen = Seen()
        self._warned_disabled = False
        self._last_error_log = float("-inf")
        self._atexit = False
        self._closing: set[asyncio.Task[None]] = set()
        self.push = push
        self._policy_arg, self._config_arg = policy, config
        self._redis_url_arg, self._redis_prefix_arg = redis_url, redis_key_prefix
        self._fast: _FastConfig | None = None
        self._fast_resolved = False
        self._own = OwnCounters()  # PF1: this process's LiteLLM counters, as the worker keeps them for it
        self._own_lock = threading.Lock()
        self._warned_own = False
        self._overlays: list[LocalCooldowns] = []
        self._proxy_router: Any = None
        self._redis: _LoopRedis | None = None
        self._writes: set[asyncio.Task[None]] = set()
        for router in routers:
            self.attach(router)
        watch_stream_failures(_stream_listeners)

    # -- LiteLLM's hooks: sync requests (Router.completion) --

    def log_success_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
        if self._handle(kwargs, start_time, end_time, True, self._sync_sink) is not None:
            self._count("unwritten")  # a cooldown, but no event loop of ours here: the worker writes Redis

    def log_failure_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
        if self._handle(kwargs, start_time, end_time, False, self._sync_sink) is not None:
            self._count("unwritten")  # a cooldown, but no event loop of ours here: the worker writes Redis

    # -- async requests (Router.acompletion, the proxy) --

    async def async_log_success_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
        await self._handle_async(kwargs, start_time, end_time, True)

    async def async_log_failure_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
        await self._handle_async(kwargs, start_time, end_time, False)

    async def async_post_call_failure_deployment_hook(self, request_data: Any, exception: Exception, call_type: Any,
                                                      fallback_depth: int | None = None) -> None:
        """Every attempt whose call raised, retries and fallback hops included: the one report of a proxy's
        retries (`coolant.integrations.litellm_attempts`). LiteLLM awaits it before it re-raises the failure,
        so it comes before the attempt's `async_log_failure_event`, which is then a repeat."""
        try:
            kwargs, start = from_deployment_hook(_mapping(request_data), exception)
        except Exception:
            self._failed()
            return
        await self._handle_async(kwargs, start, datetime.now(), False)  # naive local time, as LiteLLM's own

    def on_stream_failure(self, call_kwargs: Mapping[str, Any], error: BaseException) -> None:
        """A stream attempt failed after it opened (`coolant.integrations.litellm_streams`): published on the
        running loop, unless a logging hook reported it first."""
        kwargs, start = from_deployment_hook(call_kwargs, error)
        end = datetime.now()
        on_loop(lambda: self._handle_async(kwargs, start, end, False))

    # -- the rest --

    # -- the fast path and the push --

    def attach(self, router: Any) -> LocalCooldowns:
        """Let this callback cool `router` itself (fast path) and apply the fleet's pushed cooldowns to it."""
        overlay = local_cooldowns(router)
        if overlay not in self._overlays:
            self._overlays.append(overlay)
        return overlay

    @property
    def feed(self) -> CooldownFeed | None:
        """The push subscription of the current event loop (None before the first async hook / `start_push`)."""
        return None if self._redis is None else self._redis.feed

    async def start_push(self) -> CooldownFeed | None:
        """Start the Redis client and the push feed on this loop now rather than at the first attempt."""
        lr = self._loop_redis()
        return None if lr is None else lr.feed

    def _targets(self) -> list[LocalCooldowns]:
        """The attached routers, and the proxy's router once it exists (it is made after the callbacks load)."""
        proxy = sys.modules.get("litellm.proxy.proxy_server")
        router = getattr(proxy, "llm_router", None) if proxy is not None else None
        if router is not None and router is not self._proxy_router:
            self._proxy_router = router
            with contextlib.suppress(Exception):  # another LiteLLM layout: no fast path, nothing else changes
                self.attach(router)
        return self._overlays

    def _fast_config(self) -> _FastConfig | None:
        if self._fast_resolved:
            return self._fast
        with self._lock:
            if not self._fast_resolved:
                self._fast = _resolve_fast(self._policy_arg, self._config_arg, self._redis_url_arg,
                                           self._redis_prefix_arg)
                self._fast_resolved = True
        return self._fast

    def _publish(self, sink: _Sink, record: Outcome) -> tuple[bool, Cooldown | None]:
        """Publish, then the fast path: (accepted, the cooldown the pod decides for the record). The pod's own
        D7 counters (PF1) count every accepted record, in the order the publisher took them (one lock)."""
        fast = self._fast_config()
        policy = None if fast is None else fast.policy
        if policy is None:
            return sink.publish(record), None
        own = self._own
        with self._own_lock:
            if not sink.publish(record):
                return False, None
            if own.off is None or not (record.ok and record.ratelimit is None):
                cd = prefetch(policy, record, own)
                if own.off is not None and not self._warned_own:
                    self._warned_own = True
                    log.warning("coolant: fast path on the pod's own counters off (%s); the worker decides "
                                "V2.2/V2.3 alone", own.off)
            else:
                cd = None
        if cd is not None:
            self._cool_here(cd)
        return True, cd

    def _cool_here(self, cd: Cooldown) -> None:
        """The fast path's cooldown, applied to this pod's routers at once."""
        for overlay in self._targets():
            overlay.apply_cooldown(cd)
        self._count("prefetched")

    def _loop_redis(self) -> _LoopRedis | None:
        """This loop's Redis client, sink and feed (made on first use; a new loop gets new ones)."""
        lr = self._redis
        loop = asyncio.get_running_loop()
        if lr is not None and lr.loop is loop:
            return lr
        fast = self._fast_config()
        if fast is None or not fast.redis_url:
            return None
        with self._lock:
            if self._redis is not lr:
                return self._redis if self._redis is not None and self._redis.loop is loop else None
            client = redis_asyncio.from_url(fast.redis_url, socket_timeout=5, socket_connect_timeout=5)
            feed = CooldownFeed(client, fast.key_prefix, self._targets)
            lr = self._redis = _LoopRedis(loop, client, RedisSink(client, fast.key_prefix), feed)
        if self.push:
            feed.start()
        return lr

    def _write_soon(self, lr: _LoopRedis, cd: Cooldown) -> None:
        if len(self._writes) >= MAX_PENDING_WRITES:
            self._count("unwritten")
            return
        task = lr.loop.create_task(self._write(lr.sink, cd))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _write(self, sink: RedisSink, cd: Cooldown) -> None:
        try:
            await sink.write(cd, prefetch=True)
        except Exception:
            self._count("unwritten")
            now = time.monotonic()
            if now - self._last_error_log >= ERROR_LOG_EVERY:
                self._last_error_log = now
                log.warning("coolant: could not write a fast-path cooldown to Redis (the worker will)",
                            exc_info=True)

    async def _close_redis(self) -> None:
        lr, self._redis = self._redis, None
        if lr is None or lr.loop is not asyncio.get_running_loop():
            return
        await lr.feed.stop()
        if self._writes:
            await asyncio.wait(set(self._writes), timeout=2.0)
        with contextlib.suppress(Exception):
            await lr.client.aclose()

    @property
    def stats(self) -> CallbackStats:
        with self._count_lock:
            return CallbackStats(**self._counts)

    @property
    def publisher(self) -> Any:
        """The publisher last used: the one given, the event-loop one, else the thread one (None before any)."""
        return self._given or self._loop_pub or self._thread_pub

    @property
    def gateway(self) -> str | None:
        return self._gateway

    def flush(self, timeout: float = 5.0) -> None:
        """Block (at most `timeout` s) until what was published is acknowledged: for tests and shutdown. The
        event-loop publisher can only be waited for from another thread (on its loop, use `aflush`)."""
        if self._thread_pub is not None:
            self._thread_pub.flush(timeout)
        pub, loop = self._loop_pub, self._pub_loop
        if pub is not None and loop is not None and loop.is_running() and not _on_loop(loop):
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(pub.flush(timeout), loop).result(timeout + 1.0)

    async def aflush(self, timeout: float = 5.0) -> None:
        """`flush` from a coroutine on the event-loop publisher's loop."""
        pub = self._loop_pub
        if pub is not None and self._pub_loop is asyncio.get_running_loop():
            await pub.flush(timeout)
        elif self._thread_pub is not None or pub is not None:
            await asyncio.to_thread(self.flush, timeout)

    def close(self, timeout: float = 5.0) -> None:
        """Flush for up to `timeout` s and stop the callback's own publishers (a later attempt starts new ones).
        The event-loop publisher is stopped on its loop: waited for from another thread, scheduled from its
        own (use `aclose` there to wait)."""
        with self._lock:
            thread_pub, self._thread_pub = self._thread_pub, None
            loop_pub, self._loop_pub = self._loop_pub, None
            loop, self._pub_loop = self._pub_loop, None
        if thread_pub is not None:
            thread_pub.close(timeout)
        if loop_pub is not None and loop is not None and not loop.is_closed():
            with contextlib.suppress(Exception):
                if _on_loop(loop):
                    task = loop.create_task(loop_pub.stop(timeout))
                    self._closing.add(task)
                    task.add_done_callback(self._closing.discard)
                elif loop.is_running():
                    asyncio.run_coroutine_threadsafe(loop_pub.stop(timeout), loop).result(timeout + 1.0)
                elif not _in_running_loop():  # its loop is idle (between runs): stop it there
                    loop.run_until_complete(loop_pub.stop(timeout))

    async def aclose(self, timeout: float = 5.0) -> None:
        """`close` from a coroutine on the event-loop publisher's loop."""
        with self._lock:
            loop_pub = self._loop_pub
            if loop_pub is not None and self._pub_loop is asyncio.get_running_loop():
                self._loop_pub = self._pub_loop = None
            else:
                loop_pub = None
        if loop_pub is not None:
            await loop_pub.stop(timeout)
        await self._close_redis()
        await asyncio.to_thread(self.close, timeout)

    def _at_exit(self) -> None:
        with contextlib.suppress(Exception):  # never fail the interpreter's exit
            self.close(2.0)

    def _count(self, name: str) -> None:
        with self._count_lock:
            self._counts[name] += 1

    def _resolve(self) -> tuple[str, dict[str, Any]] | None:
        """The configuration, read once (constructor arguments, else the environment)."""
        if self._resolved:
            return self._config
        with self._lock:
            if not self._resolved:
                self._gateway = self._gateway_arg or _default_gateway()
                bootstrap = self._bootstrap or os.environ.get(ENV_BOOTSTRAP, "").strip()
                if bootstrap:
                    prefix = self._topic_prefix_arg
                    if prefix is None:
                        prefix = os.environ.get(ENV_TOPIC_PREFIX) or None
                    args = dict(self._publisher_args)
                    if prefix is not None:
                        args["topic_prefix"] = prefix
                    self._config = (bootstrap, args)
                    log.info("coolant: publishing LiteLLM outcomes to %s (topic prefix %r, gateway %s)",
                             bootstrap, args.get("topic_prefix", "coolant."), self._gateway)
                self._resolved = True
        return self._config

    def _sync_sink(self) -> _Sink | None:
        """For hooks on a thread (no running loop of theirs): the live event-loop publisher, else the thread."""
        if self._given is not None:
            return self._given
        pub, loop = self._loop_pub, self._pub_loop
        if pub is not None and loop is not None and loop.is_running():
            return pub
        pub_thread = self._thread_pub
        if pub_thread is not None:
            return pub_thread
        config = self._resolve()
        if config is None:
            return None
        with self._lock:
            if self._thread_pub is None:
                started = SyncPublisher(config[0], **config[1])
                started.start()
                self._thread_pub = started
                self._register_atexit()
            return self._thread_pub

    async def _async_sink(self) -> _Sink | None:
        """For hooks on a running event loop: a publisher on that loop (in `"auto"` mode)."""
        if self._given is not None or self.mode == "thread":
            return self._sync_sink()
        loop = asyncio.get_running_loop()
        pub, pub_loop = self._loop_pub, self._pub_loop
        if pub is not None and pub_loop is not None and (pub_loop is loop or pub_loop.is_running()):
            return pub  # this loop's, or another thread's live loop (its publish is thread-safe)
        config = self._resolve()
        if config is None:
            return None
        with self._lock:
            if self._loop_pub is not pub:
                return self._loop_pub  # another hook made one meanwhile
            # none yet, or its loop is gone (an `asyncio.run` that ended): what it still held is lost
            pub = Publisher(config[0], **config[1])
            self._loop_pub, self._pub_loop = pub, loop
            self._register_atexit()
        await pub.start()  # returns at once: the sender connects in the background
        return pub

    def _register_atexit(self) -> None:
        if not self._atexit:
            self._atexit = True
            atexit.register(self._at_exit)

    async def _handle_async(self, kwargs: Any, start_time: Any, end_time: Any, ok: bool) -> None:
        try:
            sink = await self._async_sink()
            lr = self._loop_redis()
        except Exception:
            self._failed()
            return
        cd = self._handle(kwargs, start_time, end_time, ok, lambda: sink)
        if cd is None:
            return
        try:
            if lr is None:
                self._count("unwritten")
            else:
                self._write_soon(lr, cd)
        except Exception:
            self._failed()

    def _handle(self, kwargs: Any, start_time: Any, end_time: Any, ok: bool,
                sink_for: Callable[[], _Sink | None]) -> Cooldown | None:
        """Build, publish, and the fast path; never raises, never waits (publish only appends to a bounded buffer).
        Returns the cooldown the fast path applied, if any: it acts only on records the publisher took (the
        worker will see them)."""
        try:
            sink = sink_for()
            if sink is None:
                self._count("disabled")
                if not self._warned_disabled:
                    self._warned_disabled = True
                    log.warning("coolant: %s is not set: LiteLLM outcomes are not published", ENV_BOOTSTRAP)
                return None
            kwargs = _mapping(kwargs)
            record = build_outcome(kwargs, start_time, end_time, ok=ok, gateway=self._gateway,
                                   attempts=self._attempts)
            if not self._seen.first(attempt_key(kwargs, record.deployment_id, record.model_group)):
                self._count("repeated")
                return None
            accepted, cd = self._publish(sink, record)
            if accepted:
                self._count("published")
                return cd
            self._count("dropped")
        except _Skip as skip:
            self._count(skip.counter)
        except Exception:
            self._failed()
        return None

    def _failed(self) -> None:
        self._count("errors")
        now = time.monotonic()
        if now - self._last_error_log >= ERROR_LOG_EVERY:  # a bug must not flood the gateway's log
            self._last_error_log = now
            log.exception("coolant: could not publish a LiteLLM outcome (%d errors so far)", self.stats.errors)


@dataclass(frozen=True, slots=True)
class _FastConfig:
    policy: Policy | None
    """None: no fast path (the push alone)."""
    redis_url: str | None
    key_prefix: str


@dataclass(frozen=True, slots=True)
class _LoopRedis:
    loop: asyncio.AbstractEventLoop
    client: redis_asyncio.Redis
    sink: RedisSink
    feed: CooldownFeed


def _resolve_fast(policy: Policy | None, config: str | os.PathLike[str] | None, redis_url: str | None,
                  key_prefix: str | None) -> _FastConfig | None:
    """The fast path's and the push's settings; None (both off) without a policy and without a Redis URL. A
    config that does not load turns the fast path off with one error line: the pod keeps publishing, and the
    worker decides alone."""
    config_prefix = None
    if policy is None:
        path = config if config is not None else (os.environ.get(ENV_CONFIG, "").strip() or None)
        if path is not None:
            from coolant.config.loader import load_config  # only pods that use the fast path read a config

            try:
                loaded = load_config(Path(path))
            except Exception as exc:
                log.error("coolant: fast path off, %s does not load: %s", path, exc)
            else:
                policy, config_prefix = loaded.policy, loaded.runtime.redis.key_prefix
    url = redis_url or os.environ.get(ENV_REDIS_URL, "").strip() or None
    if policy is None and url is None:
        return None
    prefix = key_prefix if key_prefix is not None else os.environ.get(ENV_REDIS_KEY_PREFIX)
    prefix = prefix if prefix is not None else (config_prefix or "")
    log.info("coolant: fast path %s; cooldown push %s", "off (no policy)" if policy is None else
             f"on ({len(policy.registry.entries)} deployments)",
             f"from Redis, key prefix {prefix!r}" if url else "off (no Redis URL)")
    return _FastConfig(policy, url, prefix)


def _stream_listeners() -> list[StreamFailure]:
    """The `CoolantCallback`s LiteLLM runs, as it finds its own loggers (each once, over all its lists)."""
    import litellm

    loggers = litellm.logging_callback_manager.get_custom_loggers_for_type(CoolantCallback)
    return [cb.on_stream_failure for cb in loggers if isinstance(cb, CoolantCallback)]


def _in_running_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def _default_gateway() -> str:
    for name in (ENV_GATEWAY, "HOSTNAME"):
        value = os.environ.get(name, "").strip()
        if value:
            return value
    try:
        return socket.gethostname() or "litellm"
    except OSError:  # pragma: no cover
        return "litellm"


coolant_callback: Final = CoolantCallback()
"""The instance a LiteLLM proxy config names: `callbacks: ["coolant.integrations.litellm.coolant_callback"]`."""
