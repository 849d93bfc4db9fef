"""A pod's own copy of coolant's cooldowns inside its LiteLLM Routers, and the push feed that fills it.

What LiteLLM 1.110.2 offers (read from the installed package; pinned by `tests/litellm/test_litellm_push.py`):

- Each Router keeps its cooldowns in `router.health().cooldowns` (a `CooldownCache`), whose `cooldown_store`
  (a `RouterCooldownStore` over the native `NativeRouterCooldowns`) is a memory tier plus a Redis tier. Every
  routing decision reads it through that attribute (`active` / `active_sync`, looked up at call time by
  `router_rust/routing_stores.py`, `router_utils/routing_read_batch.py` and the cooldown handlers).
- The store's only write, `put` / `async_put`, always writes Redis too, with a plain `SET` of a Python literal
  and a TTL from now (a blocking round trip for `put`, ~1 ms locally): it would shorten a longer cooldown in
  Redis and write every decision once per pod. There is no memory-only write.
- The Redis tier is read at most once per `DEFAULT_COOLDOWN_REDIS_READ_INTERVAL_SECONDS` (1.0 s, read from the
  environment when `litellm.constants` is imported) per key; `evict_local` drops the memory entry but does not
  make the next read go to Redis.

So coolant wraps the router's `cooldown_store` in a `LocalCooldowns`: every call goes to LiteLLM's store, and
the reads (`active`, `active_sync`, `minimum`, `snapshot`) also return coolant's own in-memory cooldowns that
are still in force, the later-ending value winning for a deployment in both. Nothing of LiteLLM's changes; if
coolant's entries are gone (expired, or never pushed) the router reads exactly what it read before.

`CooldownFeed` subscribes to the Redis channel the materializer (and the pods' fast path) publish each
cooldown write on (`materializer.cooldown_channel`) and applies each message to its `LocalCooldowns` at once;
an admin release (`DELETE /cooldowns/{id}`, K3) is announced there too and drops the copies it releases.
While the subscription is down, the routers keep LiteLLM's own Redis reads, which see every cooldown within
the read interval: nothing is lost, decisions just arrive up to ~1 s later. The loss and the recovery are
logged, and counted in `FeedStats`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Awaitable, Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson
import redis.asyncio as redis_asyncio
from redis.exceptions import RedisError

from coolant.io.materializer import cooldown_channel, cooldown_key, litellm_fields
from coolant.schemas import Cooldown

__all__ = ["MAX_ENTRIES", "CooldownFeed", "FeedStats", "LocalCooldowns", "local_cooldowns"]

log = logging.getLogger(__name__)

MAX_ENTRIES: Final = 10_000
"""Cooldowns one router's copy holds at most (expired ones go first, then the soonest to end)."""
_IDLE_PING: Final = 30.0
"""Seconds without a message after which the feed pings Redis, so a silently dead connection is noticed."""
_BACKOFF: Final = (0.1, 5.0)
"""Reconnect delays of the feed: from 0.1 s, doubling, at most 5 s."""

Value = Mapping[str, Any]
"""LiteLLM's `CooldownCacheValue`: exception_received, status_code (a string), timestamp, cooldown_time."""


def _end(value: Value) -> float:
    ts, ct = value.get("timestamp"), value.get("cooldown_time")
    if isinstance(ts, int | float) and isinstance(ct, int | float):
        return float(ts) + float(ct)
    return -math.inf


def _valid(value: object) -> bool:
    return (isinstance(value, Mapping) and isinstance(value.get("status_code"), str)
            and isinstance(value.get("exception_received"), str) and math.isfinite(_end(value)))


class LocalCooldowns:
    """A router's `cooldown_store`, with coolant's cooldowns of this pod merged into every read."""

    def __init__(self, inner: Any, clock: Callable[[], float] = time.time, max_entries: int = MAX_ENTRIES) -> None:
        self._inner: Final = inner
        self._clock = clock
        self.max_entries = max_entries
        self._local: dict[str, tuple[float, Value]] = {}  # deployment id -> (end, LiteLLM value)

    def __getattr__(self, name: str) -> Any:  # every other call is LiteLLM's own
        return getattr(self._inner, name)

    @property
    def inner(self) -> Any:
        return self._inner

    @property
    def has_redis(self) -> bool:
        return bool(self._inner.has_redis)

    # -- coolant's side --

    def apply(self, deployment_id: str, value: Value) -> bool:
        """Hold `value` for the deployment unless a later-ending one is held (never shorten). True if held."""
        end = _end(value)
        if end <= self._clock():
            return False
        held = self._local.get(deployment_id)
        if held is not None and held[0] >= end:
            return False
        if held is None and len(self._local) >= self.max_entries:
            self._make_room()
        self._local[deployment_id] = (end, value)
        return True

    def release(self, deployment_id: str, at: float) -> bool:
        """A release (K3 by the admin API, RC4 by probes): drop the copy of a cooldown that started at or before
        `at`, coolant's and LiteLLM's own memory copy of what it read from Redis (which it would otherwise keep
        until that cooldown's end: the key is gone from Redis, but LiteLLM reads Redis only for keys it does not
        hold). True if coolant's copy was dropped."""
        theirs = self._litellm_copy(deployment_id)
        started = None if theirs is None else theirs.get("timestamp")
        if isinstance(started, int | float) and started <= at and hasattr(self._inner, "evict_local"):
            self._inner.evict_local(deployment_id)
        held = self._local.get(deployment_id)
        ts = None if held is None else held[1].get("timestamp")
        if isinstance(ts, int | float) and ts <= at:
            del self._local[deployment_id]
            return True
        return False

    def _litellm_copy(self, deployment_id: str) -> Value | None:
        """LiteLLM's own memory entry for the deployment (its store's `snapshot`, keyed as its cache keys), if any."""
        snapshot = getattr(self._inner, "snapshot", None)
        if snapshot is None:
            return None
        value = snapshot().get(cooldown_key("", deployment_id))
        return value if isinstance(value, Mapping) else None

    def apply_cooldown(self, cd: Cooldown) -> bool:
        return self.apply(cd.deployment_id, litellm_fields(cd))

    def held(self, deployment_id: str) -> Value | None:
        """The cooldown coolant holds for the deployment, while in force."""
        entry = self._local.get(deployment_id)
        return entry[1] if entry is not None and entry[0] > self._clock() else None

    def __len__(self) -> int:
        return len(self._local)

    def _make_room(self) -> None:
        now = self._clock()
        for key in [k for k, (end, _) in list(self._local.items()) if end <= now]:  # sync hooks write from threads
            self._local.pop(key, None)
        while len(self._local) >= self.max_entries:
            del self._local[min(self._local, key=lambda k: self._local[k][0])]

    def _merge(self, model_ids: Sequence[str], found: Iterable[tuple[str, Value]]) -> Any:
        local = self._local
        if not local:
            return found
        now = self._clock()
        out: list[tuple[str, Value]] = []
        seen: set[str] = set()
        for model_id, value in found:
            mine = local.get(model_id)
            out.append((model_id, mine[1] if mine is not None and mine[0] > now and mine[0] > _end(value) else value))
            seen.add(model_id)
        for model_id in model_ids:
            if model_id in seen:
                continue
            mine = local.get(model_id)
            if mine is None:
                continue
            if mine[0] > now:
                out.append((model_id, mine[1]))
            else:
                local.pop(model_id, None)
        return tuple(out)

    # -- LiteLLM's reads, merged --

    def active(self, model_ids: Sequence[str], *, batch: Any) -> Awaitable[Any]:
        return _Merged(self, model_ids, self._inner.active(model_ids, batch=batch))

    def active_sync(self, model_ids: Sequence[str]) -> Any:
        return self._merge(model_ids, self._inner.active_sync(model_ids))

    def minimum(self, model_ids: Sequence[str], default: float) -> float:
        found = self._inner.minimum(model_ids, default)
        now = self._clock()
        mine = [float(v["cooldown_time"]) for i in model_ids if (e := self._local.get(i)) is not None
                and e[0] > now and isinstance((v := e[1]).get("cooldown_time"), int | float)]
        return min([float(found), *mine]) if mine else found

    def snapshot(self) -> Mapping[str, Value]:
        merged = dict(self._inner.snapshot())
        now = self._clock()
        for model_id, (end, value) in list(self._local.items()):
            key = cooldown_key("", model_id)  # LiteLLM's own key, no namespace in its memory
            if end > now and end > _end(merged.get(key, {})):
                merged[key] = value
        return merged


class _Merged:
    """LiteLLM's pending read, merged with coolant's copy when it resolves (awaited once, like the original)."""

    __slots__ = ("_ids", "_pending", "_store")

    def __init__(self, store: LocalCooldowns, ids: Sequence[str], pending: Awaitable[Any]) -> None:
        self._store, self._ids, self._pending = store, ids, pending

    def __await__(self) -> Generator[Any, None, Any]:
        found = yield from self._pending.__await__()
        return self._store._merge(self._ids, found)


def local_cooldowns(router: Any) -> LocalCooldowns:
    """The router's `LocalCooldowns`, installed around its cooldown store on first use."""
    cache = router.health().cooldowns
    store = cache.cooldown_store
    if isinstance(store, LocalCooldowns):
        return store
    wrapped = LocalCooldowns(store)
    object.__setattr__(cache, "cooldown_store", wrapped)  # `Final` in LiteLLM's annotations only
    return wrapped


@dataclass(frozen=True, slots=True)
class FeedStats:
    """What the push feed did (counters only grow). `connected`: subscribed right now. `down`: times the
    subscription was lost or could not be made (the routers then rely on LiteLLM's Redis reads)."""

    connected: bool = False
    received: int = 0
    applied: int = 0
    invalid: int = 0
    down: int = 0


class CooldownFeed:
    """One Redis pub/sub subscription per pod, applying every announced cooldown to the pod's routers.

    Costs a pod one Redis connection and, per message (one per cooldown write that took effect, fleet-wide), a
    JSON decode and a dict update per router: nothing per request. Memory is bounded by the routers' copies
    (`MAX_ENTRIES` each); a subscriber that falls far behind is disconnected by Redis
    (`client-output-buffer-limit pubsub`), which the feed handles like any loss: it reconnects, and LiteLLM's
    Redis reads cover the gap.
    """

    def __init__(self, client: redis_asyncio.Redis, key_prefix: str = "",
                 targets: Callable[[], Iterable[LocalCooldowns]] = tuple) -> None:
        self.client = client
        self.channel = cooldown_channel(key_prefix)
        self._targets = targets
        self._counts = dict.fromkeys(("received", "applied", "invalid", "down"), 0)
        self._connected = False
        self._task: asyncio.Task[None] | None = None
        self.subscribed = asyncio.Event()
        """Set while subscribed (tests and benchmarks wait on it)."""

    @property
    def stats(self) -> FeedStats:
        return FeedStats(self._connected, **self._counts)

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Start on the running loop (idempotent)."""
        if not self.running:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="coolant-cooldown-feed")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._connected = False  # stopped on purpose: not a loss
        self.subscribed.clear()

    def handle(self, data: bytes | str) -> int:
        """Apply one message; returns to how many routers (0 when each holds a later-ending one)."""
        self._counts["received"] += 1
        try:
            msg = orjson.loads(data)
            deployment_id = msg["deployment_id"]
            released = msg.get("released")
            value = None if released is not None else msg["value"]
            if not isinstance(deployment_id, str) or not (
                _valid(value) if released is None else isinstance(released, int | float)
            ):
                raise ValueError(msg)
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
            self._counts["invalid"] += 1
            return 0
        if released is not None:  # an admin release: the routers read Redis, where the keys are gone, again
            n = sum(1 for target in self._targets() if target.release(deployment_id, float(released)))
        else:
            assert value is not None
            n = sum(1 for target in self._targets() if target.apply(deployment_id, value))
        if n:
            self._counts["applied"] += 1
        return n

    def _set_connected(self, up: bool, error: BaseException | None) -> None:
        if up and not self._connected:
            log.info("coolant: cooldown push subscribed on %s: routers apply decisions as they are made",
                     self.channel)
            self.subscribed.set()
        elif not up and self._connected:
            self._counts["down"] += 1
            log.warning("coolant: cooldown push lost (%s); routers fall back to LiteLLM's Redis reads "
                        "(every %s s per key) until it is back", error or "stopped", _read_interval())
        elif not up and error is not None and self._counts["down"] == 0:
            self._counts["down"] += 1
            log.warning("coolant: cooldown push unavailable (%s); routers use LiteLLM's Redis reads", error)
        if not up:
            self.subscribed.clear()
        self._connected = up

    async def _run(self) -> None:
        delay = _BACKOFF[0]
        while True:
            pubsub = self.client.pubsub()
            try:
                await pubsub.subscribe(self.channel)
                while True:
                    message = await pubsub.get_message(timeout=_IDLE_PING)
                    if message is None:  # quiet: make sure the connection is still there (a dead peer raises)
                        await pubsub.ping()
                        continue
                    kind = message.get("type")
                    if kind == "message":
                        self.handle(message["data"])
                    elif kind == "subscribe":  # the server's confirmation: from here on nothing is missed
                        self._set_connected(True, None)
                        delay = _BACKOFF[0]
            except (RedisError, OSError) as exc:
                self._set_connected(False, exc)
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()  # type: ignore[no-untyped-call, unused-ignore]  # untyped in older redis-py releases
            await asyncio.sleep(delay)
            delay = min(delay * 2, _BACKOFF[1])


def _read_interval() -> float:
    try:
        from litellm.constants import DEFAULT_COOLDOWN_REDIS_READ_INTERVAL_SECONDS
    except Exception:  # pragma: no cover - another LiteLLM layout
        return 1.0
    return float(DEFAULT_COOLDOWN_REDIS_READ_INTERVAL_SECONDS)
