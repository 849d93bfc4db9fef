"""The fast path: the cooldowns a pod decides itself (docs/litellm.md §6), and the push of the fleet's cooldowns.

On when a policy is known (the callback's `policy`, else its `config`, else `COOLANT_CONFIG`: the worker's config,
so both decide alike):
- a failure whose cooldown one record decides (`coolant.processors.prefetch`: a 429 in a group of several
  deployments, a non-retryable status, a threshold-0 allowed-fails rule; and PF, V2.2/V2.3 on this process's own
  LiteLLM counters, which it keeps over every record it publishes) is cooled in this pod's routers before the
  failure hook returns, so LiteLLM's retry or next request already routes around it; the async hooks then write it
  to Redis with the materializer's own never-shorten write (`redis_url`, else `COOLANT_REDIS_URL`; `key_prefix`,
  else `COOLANT_REDIS_KEY_PREFIX`, else the config's), which announces it to the other pods. The record is
  published as always and the worker emits the same cooldown.
- under the outlier profile, a group's only deployment with fallbacks that fails `consecutive_single` times in a
  row in this process (its own records, PF8: `coolant.processors.own_streak`) is cooled in this pod's routers
  only, so the failing request's retries already go to the fallback; not written to Redis, since the fleet's
  streak is the worker's to judge (with one publisher the worker emits the same cooldown, pushed back here).
- with `push` and a Redis URL, a `CooldownFeed` subscription applies every cooldown the fleet writes to this pod's
  routers as it is announced; while it is down they rely on LiteLLM's Redis reads.
The routers are the ones attached, else the proxy's own (`proxy_server.llm_router`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

import redis.asyncio as redis_asyncio

from coolant.integrations.litellm.cooldowns import CooldownFeed, LocalCooldowns, local_cooldowns
from coolant.io.materializer import RedisSink
from coolant.processors.own_streak import OwnStreaks, own_streak
from coolant.processors.policy import Policy
from coolant.processors.prefetch import OwnCounters, prefetch
from coolant.schemas import Cooldown, Outcome

log = logging.getLogger(__name__)

ENV_CONFIG: Final = "COOLANT_CONFIG"
"""The worker's config file: with it the callback decides the one-record rules in the pod (the fast path)."""
ENV_REDIS_URL: Final = "COOLANT_REDIS_URL"
"""The Redis the routers share: the fast path writes its cooldowns there, the push feed subscribes there."""
ENV_REDIS_KEY_PREFIX: Final = "COOLANT_REDIS_KEY_PREFIX"

MAX_PENDING_WRITES: Final = 256
"""Fast-path Redis writes in flight at once; beyond, a write is left to the worker (counted `unwritten`)."""
ERROR_LOG_EVERY: Final = 60.0
"""Seconds between two logged failures of the callback itself."""


class Sink(Protocol):
    def publish(self, record: Outcome) -> bool: ...


@dataclass(frozen=True, slots=True)
class FastConfig:
    policy: Policy | None
    """None: no fast path (the push alone)."""
    redis_url: str | None
    key_prefix: str


@dataclass(frozen=True, slots=True)
class LoopRedis:
    loop: asyncio.AbstractEventLoop
    client: redis_asyncio.Redis
    sink: RedisSink
    feed: CooldownFeed


def resolve_fast(policy: Policy | None, config: str | os.PathLike[str] | None, redis_url: str | None,
                 key_prefix: str | None) -> FastConfig | None:
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
    return FastConfig(policy, url, prefix)


class FastPath:
    """One callback's in-pod decisions and push: its settings (resolved at first use), this process's LiteLLM
    counters (PF1), the routers it cools, and the current event loop's Redis client, sink and feed.

    `count(name)` counts in the callback's stats (`prefetched`, `own_streak`, `unwritten`)."""

    def __init__(
        self, *, policy: Policy | None, config: str | os.PathLike[str] | None, redis_url: str | None,
        key_prefix: str | None, push: bool, count: Callable[[str], None],
    ) -> None:
        self.push = push
        self._args = (policy, config, redis_url, key_prefix)
        self._count = count
        self._lock = threading.Lock()
        self._fast: FastConfig | None = None
        self._fast_resolved = False
        self._own = OwnCounters()  # PF1: this process's LiteLLM counters, as the worker keeps them for it
        self._streaks = OwnStreaks()  # PF8: this process's streaks of a lone primary's failures
        self._own_lock = threading.Lock()
        self._warned_own = False
        self._overlays: list[LocalCooldowns] = []
        self._proxy_router: Any = None
        self._redis: LoopRedis | None = None
        self._writes: set[asyncio.Task[None]] = set()
        self._last_error_log = float("-inf")

    def attach(self, router: Any) -> LocalCooldowns:
        """Cool `router` here (fast path) and apply the fleet's pushed cooldowns to it."""
        overlay = local_cooldowns(router)
        if overlay not in self._overlays:
            self._overlays.append(overlay)
        return overlay

    @property
    def feed(self) -> CooldownFeed | None:
        """The push subscription of the current event loop (None before the first async hook / `start_push`)."""
        return None if self._redis is None else self._redis.feed

    def targets(self) -> list[LocalCooldowns]:
        """The attached routers, and the proxy's router once it exists (it is made after the callbacks load)."""
        proxy = sys.modules.get("litellm.proxy.proxy_server")
        router = getattr(proxy, "llm_router", None) if proxy is not None else None
        if router is not None and router is not self._proxy_router:
            self._proxy_router = router
            with contextlib.suppress(Exception):  # another LiteLLM layout: no fast path, nothing else changes
                self.attach(router)
        return self._overlays

    def config(self) -> FastConfig | None:
        if self._fast_resolved:
            return self._fast
        with self._lock:
            if not self._fast_resolved:
                self._fast = resolve_fast(*self._args)
                self._fast_resolved = True
        return self._fast

    def publish(self, sink: Sink, record: Outcome) -> tuple[bool, Cooldown | None]:
        """Publish, then decide: (accepted, the cooldown the pod decides for the record). The pod's own D7
        counters (PF1) count every accepted record, in the order the publisher took them (one lock)."""
        fast = self.config()
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
            mine = own_streak(policy, self._streaks, record)
        if cd is not None:
            self._cool_here(cd, "prefetched")
        if mine is not None:
            self._cool_here(mine, "own_streak")
        return True, cd

    def _cool_here(self, cd: Cooldown, counter: str) -> None:
        """A cooldown the pod decided, applied to this pod's routers at once."""
        for overlay in self.targets():
            overlay.apply_cooldown(cd)
        self._count(counter)

    def loop_redis(self) -> LoopRedis | None:
        """This loop's Redis client, sink and feed (made on first use; a new loop gets new ones)."""
        lr = self._redis
        loop = asyncio.get_running_loop()
        if lr is not None and lr.loop is loop:
            return lr
        fast = self.config()
        if fast is None or not fast.redis_url:
            return None
        with self._lock:
            if self._redis is not lr:
                return self._redis if self._redis is not None and self._redis.loop is loop else None
            client = redis_asyncio.from_url(fast.redis_url, socket_timeout=5, socket_connect_timeout=5)
            feed = CooldownFeed(client, fast.key_prefix, self.targets)
            lr = self._redis = LoopRedis(loop, client, RedisSink(client, fast.key_prefix), feed)
        if self.push:
            feed.start()
        return lr

    def write_soon(self, lr: LoopRedis, cd: Cooldown) -> None:
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

    async def close(self) -> None:
        """Stop this loop's feed, let the writes in flight finish (briefly), close the Redis client."""
        lr, self._redis = self._redis, None
        if lr is None or lr.loop is not asyncio.get_running_loop():
            return
        await lr.feed.stop()
        if self._writes:
            await asyncio.wait(set(self._writes), timeout=2.0)
        with contextlib.suppress(Exception):
            await lr.client.aclose()
