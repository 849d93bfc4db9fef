"""`CoolantCallback`: a LiteLLM `CustomLogger` that publishes one `coolant.outcome/1` per attempt (contract §1.1).

LiteLLM proxy (`config.yaml`; the proxy imports the dotted path and takes the module attribute):

    litellm_settings:
      callbacks: ["coolant.integrations.litellm.coolant_callback"]

with `COOLANT_KAFKA_BOOTSTRAP` (required; without it the callback does nothing and warns once),
`COOLANT_TOPIC_PREFIX` (default `coolant.`) and `COOLANT_GATEWAY_ID` (default `$HOSTNAME`) in the proxy's
environment. In code: `litellm.callbacks = [CoolantCallback("kafka:9092")]`.

What LiteLLM 1.110.2 calls, per attempt (`attempts.py` says why three hooks, and
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

How each field is read from LiteLLM's arguments: `records.py`. The fast path and the push: `fast_path.py`.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal

from litellm.integrations.custom_logger import CustomLogger

from coolant.integrations.litellm.attempts import Seen, attempt_key, from_deployment_hook
from coolant.integrations.litellm.cooldowns import CooldownFeed, LocalCooldowns
from coolant.integrations.litellm.fast_path import (
    ERROR_LOG_EVERY,
    FastPath,
    Sink,
)
from coolant.integrations.litellm.records import Attempts, Skip, build_outcome, mapping
from coolant.integrations.litellm.streams import StreamFailure, on_loop, watch_stream_failures
from coolant.processors.policy import Policy
from coolant.publish import Publisher, SyncPublisher
from coolant.schemas import Cooldown

log = logging.getLogger(__name__)

ENV_BOOTSTRAP: Final = "COOLANT_KAFKA_BOOTSTRAP"
ENV_TOPIC_PREFIX: Final = "COOLANT_TOPIC_PREFIX"
ENV_GATEWAY: Final = "COOLANT_GATEWAY_ID"
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
    - `own_streak`: lone primaries this pod cooled in its own routers on its own streak of failures (PF8; not
      written to Redis: the worker decides for the fleet).
    - `unwritten`: of the prefetched, the ones whose Redis write did not happen here (Redis away, too many in flight,
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
    own_streak: int = 0
    unwritten: int = 0


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

    The fast path and the push (`fast_path.py`, docs/litellm.md §6), on when a policy is known (`policy`, else
    the config file `config`, else `COOLANT_CONFIG`: the worker's config, so both decide alike):
    - a failure whose cooldown one record decides (`coolant.processors.prefetch`: a 429 in a group of several
      deployments, a non-retryable status, a threshold-0 allowed-fails rule; and PF, V2.2/V2.3 on this
      process's own LiteLLM counters, which it keeps over every record it publishes) is cooled in this pod's routers
      before the failure hook returns, so LiteLLM's retry or next request already routes around it; the async
      hooks then write it to Redis with the materializer's own never-shorten write (`redis_url`, else
      `COOLANT_REDIS_URL`; `redis_key_prefix`, else `COOLANT_REDIS_KEY_PREFIX`, else the config's), which
      announces it to the other pods. The record is published as always and the worker emits the same cooldown.
    - under the outlier profile, a group's only deployment with fallbacks that fails `consecutive_single` times in
      a row in this process is cooled in this pod's routers only (PF8), so the request's retries go to the
      fallback at once; the fleet's streak stays the worker's to judge.
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
        publisher: Sink | None = None,
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
        self._attempts = Attempts()
        self._seen = Seen()
        self._warned_disabled = False
        self._last_error_log = float("-inf")
        self._atexit = False
        self._closing: set[asyncio.Task[None]] = set()
        self.push = push
        self._fast = FastPath(policy=policy, config=config, redis_url=redis_url, key_prefix=redis_key_prefix,
                              push=push, count=self._count)
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
        retries (`coolant.integrations.litellm.attempts`). LiteLLM awaits it before it re-raises the failure,
        so it comes before the attempt's `async_log_failure_event`, which is then a repeat."""
        try:
            kwargs, start = from_deployment_hook(mapping(request_data), exception)
        except Exception:
            self._failed()
            return
        await self._handle_async(kwargs, start, datetime.now(), False)  # naive local time, as LiteLLM's own

    def on_stream_failure(self, call_kwargs: Mapping[str, Any], error: BaseException) -> None:
        """A stream attempt failed after it opened (`streams.py`): published on the running loop, unless a
        logging hook reported it first."""
        kwargs, start = from_deployment_hook(call_kwargs, error)
        end = datetime.now()
        on_loop(lambda: self._handle_async(kwargs, start, end, False))

    # -- the fast path and the push (fast_path.py) --

    def attach(self, router: Any) -> LocalCooldowns:
        """Let this callback cool `router` itself (fast path) and apply the fleet's pushed cooldowns to it."""
        return self._fast.attach(router)

    @property
    def feed(self) -> CooldownFeed | None:
        """The push subscription of the current event loop (None before the first async hook / `start_push`)."""
        return self._fast.feed

    async def start_push(self) -> CooldownFeed | None:
        """Start the Redis client and the push feed on this loop now rather than at the first attempt."""
        lr = self._fast.loop_redis()
        return None if lr is None else lr.feed

    # -- the rest --

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
        await self._fast.close()
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

    def _sync_sink(self) -> Sink | None:
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

    async def _async_sink(self) -> Sink | None:
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
            lr = self._fast.loop_redis()
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
                self._fast.write_soon(lr, cd)
        except Exception:
            self._failed()

    def _handle(self, kwargs: Any, start_time: Any, end_time: Any, ok: bool,
                sink_for: Callable[[], Sink | None]) -> Cooldown | None:
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
            kwargs = mapping(kwargs)
            record = build_outcome(kwargs, start_time, end_time, ok=ok, gateway=self._gateway,
                                   attempts=self._attempts)
            if not self._seen.first(attempt_key(kwargs, record.deployment_id, record.model_group)):
                self._count("repeated")
                return None
            accepted, cd = self._fast.publish(sink, record)
            if accepted:
                self._count("published")
                return cd
            self._count("dropped")
        except Skip as skip:
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
