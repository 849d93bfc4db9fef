"""K1-K3 (docs/input-bounds.md): the cooldowns in force are reasserted in Redis after Redis lost them.

Redis is a cache of the worker's decisions, not their record: restarted without persistence, evicted under
`maxmemory`, or flushed, it forgets the keys routers read, and routers then send traffic to deployments coolant
considers cooled. The worker still knows them (its cooldown history, fed by the same topic the materializer
writes from), so once a second it asks Redis for its `run_id`, one cheap call, and writes every cooldown still in
force again when Redis restarted, after Redis was unreachable, and every `full_every` seconds regardless.

A reassertion is the materializer's own Lua write, judged by the Redis clock: it never shortens an entry and
never writes a cooldown that has ended. A cooldown released through the admin API is skipped: the release leaves
a marker with its time (`release`), and cooldowns that started before it stay released.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from typing import Final

import orjson
import redis.asyncio as redis_asyncio

from coolant.io.materializer import (
    RELEASE_KEEP,
    TRANSIENT_ERRORS,
    RedisSink,
    cooldown_channel,
    cooldown_key,
    detail_key,
    release_message,
    released_key,
)
from coolant.schemas import Cooldown, InvalidRecord, from_dict
from coolant.schemas.types import DURATION_MAX, TS_MAX

log = logging.getLogger(__name__)

CHECK_INTERVAL: Final = 1.0
"""K2: seconds between two `INFO server` calls (the rate limit of the check)."""
FULL_EVERY: Final = 60.0
"""K2: a check for missing keys (lost without a restart: eviction, a flush) at least this often."""
_BATCH: Final = 200
_UNTIL_MAX: Final = TS_MAX + DURATION_MAX


async def release(client: redis_asyncio.Redis, prefix: str, deployment_id: str, now: float) -> int:
    """Delete a deployment's cooldown keys and mark it released at `now` (one transaction, announced to the
    pods' push feeds, which hold copies of the cooldowns); the keys deleted."""
    keys = [cooldown_key(prefix, deployment_id), detail_key(prefix, deployment_id)]
    async with client.pipeline(transaction=True) as pipe:
        pipe.delete(*keys)
        pipe.set(released_key(prefix, deployment_id), repr(float(now)), ex=RELEASE_KEEP)
        pipe.publish(cooldown_channel(prefix), release_message(deployment_id, now))
        deleted, _, _ = await pipe.execute()
    return int(deleted)


def in_force(histories: Iterable[bytes], now: float) -> list[Cooldown]:
    """K1: per deployment, the latest-ending cooldown of its history if it ends after `now` (pure)."""
    out: list[Cooldown] = []
    for raw in histories:
        try:
            items = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        best = None
        for item in items if isinstance(items, list) else ():
            until = item.get("until") if isinstance(item, dict) else None
            if not isinstance(until, int | float) or not now < until < _UNTIL_MAX:
                continue  # over, or beyond what any bounded record yields (junk written to the topic by hand)
            if best is None or until > best["until"]:
                best = item
        if best is None:
            continue
        try:
            cd = from_dict(best)
        except InvalidRecord:
            continue
        if isinstance(cd, Cooldown):
            out.append(cd)
    return out


def _released(cd: Cooldown, mark: bytes | str | None) -> bool:
    """Started before the deployment's last release (an unreadable marker counts as a release: never resurrect)."""
    if mark is None:
        return False
    try:
        return cd.ts <= float(mark)
    except ValueError:
        return True


class Repairer:
    """The periodic check (an app timer calls `tick`); `histories` gives the history values this worker holds."""

    def __init__(
        self,
        sink: RedisSink,
        histories: Callable[[], Iterable[bytes]],
        *,
        full_every: float = FULL_EVERY,
        on_reassert: Callable[[str, int, int], None] | None = None,
    ) -> None:
        self.sink = sink
        self.histories = histories
        self.full_every = full_every
        self.on_reassert = on_reassert
        """Called with (why, written, skipped) after each reassertion."""
        self._run_id: str | None = None
        self._unreachable = False
        self._next_full = 0.0

    async def tick(self) -> None:
        """One check; never raises (a timer that raised would stop checking), errors are logged."""
        try:
            await self._tick()
        except Exception:
            log.exception("redis repair check failed")

    async def _tick(self) -> None:
        client = self.sink.client
        try:
            info = await client.info("server")
        except TRANSIENT_ERRORS:
            self._unreachable = True
            return
        run_id = str(info.get("run_id"))
        if run_id != self._run_id:
            why = "start" if self._run_id is None else "redis restarted"
        elif self._unreachable:
            why = "redis reachable again"
        elif time.monotonic() >= self._next_full:
            why = "periodic"
        else:
            return
        try:
            written, skipped = await self.reassert(missing_only=why == "periodic")
        except TRANSIENT_ERRORS:
            self._unreachable = True
            return
        self._run_id, self._unreachable = run_id, False
        self._next_full = time.monotonic() + self.full_every
        if written and why != "start":
            log.warning("redis repair (%s): %d cooldowns in force written again, %d skipped (in place, longer, or "
                        "released)", why, written, skipped)
        if self.on_reassert is not None:
            self.on_reassert(why, written, skipped)

    async def reassert(self, *, missing_only: bool = False) -> tuple[int, int]:
        """Write every cooldown in force again (K3), or only those whose key is missing; (written, skipped).

        An identical entry is written again too (the materializer's script then refreshes the detail key and
        announces it), which is why the periodic pass writes only what is missing."""
        cooldowns = in_force(list(self.histories()), time.time())
        written = skipped = 0
        client, prefix = self.sink.client, self.sink.key_prefix
        for i in range(0, len(cooldowns), _BATCH):
            chunk = cooldowns[i : i + _BATCH]
            marks = await client.mget([released_key(prefix, cd.deployment_id) for cd in chunk])
            todo = [cd for cd, mark in zip(chunk, marks, strict=True) if not _released(cd, mark)]
            if missing_only and todo:
                present = await client.mget([cooldown_key(prefix, cd.deployment_id) for cd in todo])
                todo = [cd for cd, value in zip(todo, present, strict=True) if value is None]
            results = await asyncio.gather(*(self.sink.write(cd) for cd in todo), return_exceptions=True)
            for cd, result in zip(todo, results, strict=True):
                if isinstance(result, TRANSIENT_ERRORS):
                    raise result
                if isinstance(result, Exception):  # B8: one value Redis refuses must not stop the others
                    log.warning("redis repair: %s not written: %s: %s", cd.deployment_id, type(result).__name__,
                                result)
            n = sum(1 for r in results if r is True)
            written += n
            skipped += len(chunk) - n
        return written, skipped
