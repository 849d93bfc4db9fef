"""Cooldown records and probe verdicts -> the Redis keys unmodified LiteLLM routers read (contract §4).

LiteLLM 1.110.2 reads `[<namespace>:]deployment:<id>:cooldown` with one MGET per routing decision (at most once a
second per key, then from its memory tier), decodes it as JSON (falling back to a Python literal), requires
`status_code` to be a *string* and both numbers to be numbers, and treats the deployment as cooling while
`timestamp + cooldown_time - now > 0`. One value it cannot decode makes it drop the whole batch read and serve
only its memory tier, so every value written here must have exactly that shape.

`key_prefix` is prepended verbatim: a LiteLLM `RedisCache(namespace="ns")` reads `ns:deployment:...`, so pass
`key_prefix="ns:"` to serve it.

Every write is one Lua script, so the "never shorten, never resurrect" rule holds against concurrent
materializers and against LiteLLM routers writing the same keys, and it judges "now" by the Redis server clock
rather than by this host's.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
import time
from collections.abc import Awaitable, Callable
from typing import Final

import orjson
import redis.asyncio as redis_asyncio
from redis.exceptions import BusyLoadingError, ConnectionError, TimeoutError

from coolant.io.health_map import HealthMap
from coolant.processors.state import HealthState
from coolant.schemas import Cooldown, encode
from coolant.schemas.cooldown import whole_as_int
from coolant.schemas.types import DURATION_MAX

HEALTH_KEY: Final = "litellm:health_check:deployment_health_state"
"""LiteLLM's `DeploymentHealthCache.CACHE_KEY`: one JSON object {deployment_id: {is_healthy, timestamp, reason}}."""
NULL_STATUS: Final = "500"
"""A cooldown whose error carried no status: LiteLLM itself writes "500" then (`cast_exception_status_to_int`)."""
TRANSIENT_ERRORS: Final = (ConnectionError, TimeoutError, BusyLoadingError)
"""Redis being away or restarting: retried forever, since the Kafka record must not be acknowledged unwritten."""

_INITIAL_BACKOFF: Final = 0.1

# KEYS: cooldown key, detail key, release marker. ARGV: LiteLLM value, detail value, until in ms (ceiling),
# until in s (repr), the cooldown's start ts (repr), "1" for a pod's prefetch (else "0").
# A cooldown that started at or before the deployment's last admin release (K3) is not written: checked here, in
# the same script, so neither the materializer nor the repair can write one back after a DELETE returned.
# The existing entry may be JSON (ours, or LiteLLM's async writer) or a Python literal (LiteLLM's sync writer
# stores str(dict), whose last two items are always timestamp and cooldown_time); anything else is replaced.
# An entry byte-identical to ours is the same decision: the worker writes it again (a pod's fast path wrote it
# first, with its own reason and window in the detail key, which ends up the worker's); a prefetch leaves it.
_COOLDOWN_LUA: Final = r"""
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local until_s = tonumber(ARGV[4])
if until_s <= now then return 0 end
local released = tonumber(redis.pcall('GET', KEYS[3]))
if released ~= nil and tonumber(ARGV[5]) <= released then return 0 end
local raw = redis.pcall('GET', KEYS[1])
if type(raw) == 'string' then
  local ts, ct
  local ok, v = pcall(cjson.decode, raw)
  if ok and type(v) == 'table' then
    ts, ct = v['timestamp'], v['cooldown_time']
  else
    local a, b = string.match(raw, "'timestamp': ([^,]+), 'cooldown_time': ([^}]+)}%s*$")
    ts, ct = tonumber(a), tonumber(b)
  end
  if raw == ARGV[1] then
    if ARGV[6] == '1' then return 0 end
  elseif type(ts) == 'number' and type(ct) == 'number' and ts + ct >= until_s then return 0 end
end
redis.call('SET', KEYS[1], ARGV[1], 'PXAT', ARGV[3])
redis.call('SET', KEYS[2], ARGV[2], 'PXAT', ARGV[3])
return 1
"""

# KEYS: cooldown key, detail key, release marker. ARGV: the release's ts (repr), marker TTL (s).
# RC4, a release decided by probes: it ends the cooldown in force only if that cooldown started at or before the
# release (one decided after it, e.g. the half-open re-cool a pod wrote first, stands), and the marker only moves
# forward, so neither this materializer, the repair nor an early write brings back a cooldown the release ended.
# The entry may be ours (JSON) or a router's own (JSON or a Python literal); one that cannot be read is left.
_RELEASE_LUA: Final = r"""
local at = tonumber(ARGV[1])
local marked = tonumber(redis.pcall('GET', KEYS[3]))
if marked == nil or marked < at then redis.call('SET', KEYS[3], ARGV[1], 'EX', ARGV[2]) end
local raw = redis.pcall('GET', KEYS[1])
if type(raw) ~= 'string' then return 0 end
local ts
local ok, v = pcall(cjson.decode, raw)
if ok and type(v) == 'table' then
  ts = v['timestamp']
else
  ts = tonumber(string.match(raw, "'timestamp': ([^,]+), 'cooldown_time': [^}]+}%s*$"))
end
if type(ts) ~= 'number' or ts > at then return 0 end
return redis.call('DEL', KEYS[1], KEYS[2])
"""

_COOLDOWN_HEAD: Final = "deployment:"
_COOLDOWN_TAIL: Final = ":cooldown"
_GLOB_SPECIAL: Final = re.compile(r"([*?\[\]\\])")


def cooldown_key(prefix: str, deployment_id: str) -> str:
    """The key LiteLLM's cooldown store reads (`deployment:{id}:cooldown`, under its namespace)."""
    return f"{prefix}{_COOLDOWN_HEAD}{deployment_id}{_COOLDOWN_TAIL}"


def cooldown_key_glob(prefix: str) -> str:
    """A SCAN pattern for every `cooldown_key` under `prefix` (glob characters in the prefix matched literally)."""
    return _GLOB_SPECIAL.sub(r"\\\1", prefix + _COOLDOWN_HEAD) + "*" + _COOLDOWN_TAIL


def cooldown_key_id(prefix: str, key: str) -> str | None:
    """The deployment id a `cooldown_key` under `prefix` names; None for any other key."""
    head = prefix + _COOLDOWN_HEAD
    if len(key) < len(head) + len(_COOLDOWN_TAIL) or not key.startswith(head) or not key.endswith(_COOLDOWN_TAIL):
        return None
    return key[len(head) : -len(_COOLDOWN_TAIL)]


def detail_key(prefix: str, deployment_id: str) -> str:
    """Coolant's own record of the cooldown in force: LiteLLM's value has no group, reason or trigger."""
    return f"{prefix}coolant:cooldown:{deployment_id}"


def released_key(prefix: str, deployment_id: str) -> str:
    """K3: when the admin API last released the deployment's cooldown (epoch seconds)."""
    return f"{prefix}coolant:released:{deployment_id}"


def health_key(prefix: str) -> str:
    return f"{prefix}{HEALTH_KEY}"


def cooldown_channel(prefix: str) -> str:
    """The pub/sub channel every write that took effect is announced on (`push_message`): gateway pods
    subscribe to it and apply the cooldown to their routers at once instead of at their next Redis read."""
    return f"{prefix}coolant:cooldowns"


def litellm_fields(cd: Cooldown) -> dict[str, str | int | float]:
    """LiteLLM's `CooldownCacheValue` of a cooldown. `status_code` must be a string: an int fails LiteLLM's
    decode, and one such value hides every cooldown read in the same batch."""
    return {
        "exception_received": cd.exception_received,
        "status_code": NULL_STATUS if cd.status_code is None else str(cd.status_code),
        "timestamp": float(cd.ts),
        "cooldown_time": whole_as_int(cd.cooldown_time),
    }


def litellm_value(cd: Cooldown) -> bytes:
    """`litellm_fields` as compact JSON: the value of the cooldown key."""
    return orjson.dumps(litellm_fields(cd))


def push_message(cd: Cooldown) -> bytes:
    """What `cooldown_channel` carries: the deployment, the cooldown's id and LiteLLM's value."""
    return orjson.dumps({"deployment_id": cd.deployment_id, "event_id": cd.event_id, "value": litellm_fields(cd)})


def release_message(deployment_id: str, at: float) -> bytes:
    """An admin release (K3) on `cooldown_channel`: pods drop their copies of cooldowns that started by `at`."""
    return orjson.dumps({"deployment_id": deployment_id, "released": float(at)})


RELEASE_KEEP: Final = int(DURATION_MAX) + 86_400
"""K3, RC4: how long a release marker is kept: longer than any cooldown a record can ask for (B3)."""


def should_write(existing_end: float | None, until: float, now: float) -> bool:
    """The materialization rule (contract §4), the one `_COOLDOWN_LUA` applies inside Redis.

    A cooldown already over is never written (it would only resurrect a key routers had let go), and an entry
    that ends at or after `until` is never replaced (routers must never see a cooldown shortened).
    """
    if until <= now:
        return False
    return existing_end is None or existing_end < until


class RedisSink:
    """Writes cooldowns and health verdicts where LiteLLM routers look for them."""

    def __init__(
        self,
        client: redis_asyncio.Redis,
        key_prefix: str = "",
        on_write: Callable[[str, float], None] | None = None,
        *,
        publish: bool = True,
    ) -> None:
        self.client = client
        self.key_prefix = key_prefix
        self.on_write = on_write
        """Called with ("cooldown" | "health", seconds) after each script call that returned: the write latency."""
        self.channel = cooldown_channel(key_prefix) if publish else None
        """Where each cooldown write that took effect is announced (None: not announced)."""
        self._cooldown = client.register_script(_COOLDOWN_LUA)
        self.health_map = HealthMap(client, health_key(key_prefix))
        """LiteLLM's health map (`coolant/io/health_map.py`); set its `known` to bound the unknown ids in it."""
        self._release = client.register_script(_RELEASE_LUA)

    async def write(self, cd: Cooldown, *, prefetch: bool = False) -> bool:
        """True if written; False if the rule skipped it (already over, or a later-ending entry is in force).
        `prefetch`: a pod's fast-path write, which leaves an identical entry (the worker's) alone."""
        dep = cd.deployment_id
        prefix = self.key_prefix
        keys = [cooldown_key(prefix, dep), detail_key(prefix, dep), released_key(prefix, dep)]
        # the ceiling, so the key never expires before `until` (PXAT in the past would delete it at once)
        args: list[bytes | str] = [
            litellm_value(cd),
            encode(cd),
            str(math.ceil(cd.until * 1000)),
            repr(float(cd.until)),
            repr(float(cd.ts)),
            "1" if prefetch else "0",
        ]
        started = time.perf_counter()
        written = bool(await self._cooldown(keys=keys, args=args))
        if self.on_write is not None:
            self.on_write("cooldown", time.perf_counter() - started)
        if written and self.channel is not None:
            await self._announce(cd)
        return written

    async def _announce(self, cd: Cooldown) -> None:
        """Publish-after-write: the key is in place first, so a pod that misses the message still reads it.
        A failed publish is not retried (the write stands; the pods' Redis reads are the fallback)."""
        assert self.channel is not None
        with contextlib.suppress(*TRANSIENT_ERRORS):
            await self.client.publish(self.channel, push_message(cd))

    async def release(self, deployment_id: str, at: float) -> bool:
        """RC4: end the deployment's cooldown that started at or before `at`, in Redis and (announced on the
        push channel, whatever Redis held) in every pod's copy. True if Redis held such a cooldown."""
        prefix = self.key_prefix
        keys = [cooldown_key(prefix, deployment_id), detail_key(prefix, deployment_id),
                released_key(prefix, deployment_id)]
        deleted = bool(await self._release(keys=keys, args=[repr(float(at)), str(RELEASE_KEEP)]))
        if self.channel is not None:
            with contextlib.suppress(*TRANSIENT_ERRORS):
                await self.client.publish(self.channel, release_message(deployment_id, at))
        return deleted

    async def write_health(self, deployment_id: str, state: HealthState) -> bool:
        """Merges one verdict into LiteLLM's health map: per id the greatest timestamp wins, a tie goes to the
        later write (H1). Entries from other writers, LiteLLM's own Python-literal form included, are kept until
        they expire, as LiteLLM's own writer keeps them (`HealthMap`)."""
        started = time.perf_counter()
        written = await self.health_map.write(deployment_id, state)
        if self.on_write is not None:
            self.on_write("health", time.perf_counter() - started)
        return written

    async def write_with_retry(
        self,
        cd: Cooldown,
        *,
        on_error: Callable[[Exception, float], None] | None = None,
        max_backoff: float = 5.0,
    ) -> bool:
        """`write`, retried until Redis answers; the caller acknowledges the record only after this returns.

        A retry after a lost reply finds its own entry in place and writes the same values again: the script
        is idempotent, so retrying is always safe.
        """
        return await _retrying(lambda: self.write(cd), on_error, max_backoff)

    async def release_with_retry(
        self,
        deployment_id: str,
        at: float,
        *,
        on_error: Callable[[Exception, float], None] | None = None,
        max_backoff: float = 5.0,
    ) -> bool:
        """`release`, retried until Redis answers (the script is idempotent: a repeated release is the same)."""
        return await _retrying(lambda: self.release(deployment_id, at), on_error, max_backoff)

    async def write_health_with_retry(
        self,
        deployment_id: str,
        state: HealthState,
        *,
        on_error: Callable[[Exception, float], None] | None = None,
        max_backoff: float = 5.0,
    ) -> bool:
        """`write_health`, retried until Redis answers."""
        return await _retrying(lambda: self.write_health(deployment_id, state), on_error, max_backoff)


async def _retrying(
    op: Callable[[], Awaitable[bool]],
    on_error: Callable[[Exception, float], None] | None,
    max_backoff: float,
) -> bool:
    """Exponential backoff from 0.1 s, doubling, capped at `max_backoff`, without end: losing a write would let
    routers keep sending traffic to a failing deployment, so only the caller's cancellation stops it."""
    delay = min(_INITIAL_BACKOFF, max_backoff)
    while True:
        try:
            return await op()
        except TRANSIENT_ERRORS as exc:
            if on_error is not None:
                on_error(exc, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, max_backoff)


EARLY_IN_FLIGHT: Final = 256
"""Early writes (`EarlyWrites`) waiting on Redis at once; beyond it a cooldown is left to the materializer alone."""
EARLY_REMEMBERED: Final = 10_000
"""Event ids of early writes kept for the materializer to skip; the oldest are forgotten first (it then writes
the cooldown again, which the script makes harmless)."""


class EarlyWrites:
    """Cooldowns written to Redis by the worker that decided them, as soon as decided (alongside their record's send
    to the cooldowns topic: the decider's `_early` says why not once it is durable).

    The materializer writes a cooldown only after consuming it back from the cooldowns topic: a second Kafka hop
    (p50 7 ms, p99 43 ms in issue 11's profile) on the way to the routers. An early write skips it. It is one
    attempt, never awaited by the decider (a slow or absent Redis must not hold up deciding) and never retried:
    the materializer stays the writer that retries until Redis answers. It skips the cooldowns written early
    (`written_early`); any it writes again (a forgotten id, another worker after a rebalance, a race) are
    harmless, since the script never shortens an entry and an identical value is the same decision.
    """

    def __init__(
        self,
        sink: RedisSink,
        on_result: Callable[[Cooldown, str], None] | None = None,
        *,
        max_in_flight: int = EARLY_IN_FLIGHT,
        remembered: int = EARLY_REMEMBERED,
        on_latency: Callable[[float], None] | None = None,
    ) -> None:
        self.sink = sink
        self.on_result = on_result
        """Called with each cooldown and "written", "skipped" (the rule), "failed" (Redis) or "dropped" (busy)."""
        self.on_latency = on_latency
        """Called with the seconds from `submit` to Redis's answer, for each write Redis answered."""
        self.max_in_flight = max_in_flight
        self.remembered = remembered
        self._tasks: set[asyncio.Task[None]] = set()
        self._done: dict[str, None] = {}
        """Event ids written (or skipped by the rule) early, oldest first."""

    def submit(self, cd: Cooldown) -> None:
        """Start the write of a decided cooldown; returns at once."""
        if len(self._tasks) >= self.max_in_flight:
            self._report(cd, "dropped")
            return
        task = asyncio.get_running_loop().create_task(self._write(cd, time.perf_counter()))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _write(self, cd: Cooldown, submitted: float) -> None:
        try:
            written = await self.sink.write(cd)
        except Exception:  # Redis away or refusing: the materializer retries and reports it
            self._report(cd, "failed")
            return
        if self.on_latency is not None:
            self.on_latency(time.perf_counter() - submitted)
        done = self._done
        done[cd.event_id] = None
        if len(done) > self.remembered:
            del done[next(iter(done))]
        self._report(cd, "written" if written else "skipped")

    def _report(self, cd: Cooldown, result: str) -> None:
        if self.on_result is not None:
            self.on_result(cd, result)

    def written_early(self, event_id: str) -> bool:
        """True once for a cooldown this worker wrote (or found superseded) early: the materializer skips it."""
        if event_id not in self._done:
            return False
        del self._done[event_id]
        return True

    async def drain(self) -> None:
        """Let the writes in flight finish (stopping)."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
