"""LiteLLM's shared health map (`litellm:health_check:deployment_health_state`), kept LiteLLM's size.

LiteLLM 1.110.2 stores every deployment's health verdict in one Redis string: a JSON object {id: {is_healthy,
timestamp, reason}} (or its sync writer's Python literal), read whole with one GET by every router, with a TTL
of 900 s. Its own writer (`DeploymentHealthCache.set_deployment_health_states`) reads the map, merges its
verdicts, drops the entries older than 900 s and writes it back. coolant writes the same way, with two bounds
LiteLLM's writer has no need for (it only writes the deployments of its own config):
- **expiry**: entries whose timestamp is 900 s old or more are dropped, as LiteLLM drops them, by the Redis
  clock. A verdict that old would be stale to every router anyway (600 s);
- **unknown ids**: at most `UNKNOWN_MAX` entries for ids the registry does not know (H1 materializes a probe of
  an unknown deployment too), the oldest dropped first; an id is at most 256 characters at the decoder (B10).
  So the map holds the registered deployments plus at most 1,000 others: about 110 bytes an entry.

The merge runs here, not in a Lua script: a script that decodes and encodes the whole map blocks Redis for
all of it (78-104 ms at 2,000 unknown 1 KB ids), while a GET and a SET of the same bytes cost Redis a copy. The
write is optimistic (WATCH, then MULTI/SET/EXEC, again if another writer got in between): concurrent writers
(other workers, LiteLLM pods) never lose each other's entries. The map last written is kept, with its bytes, so
a write that finds its own bytes in Redis does not decode them again.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any, Final

import orjson
import redis.asyncio as redis_asyncio
from redis.exceptions import WatchError

from coolant.processors.state import HealthState

TTL_SECONDS: Final = 900
"""What LiteLLM's own writer uses (`int(staleness_threshold * 1.5)`, staleness 600 s by default): the key's TTL
and the age at which an entry is dropped."""
UNKNOWN_MAX: Final = 1_000
"""Entries for ids the registry does not know, at most."""
PRUNE_EVERY: Final = 10.0
"""Seconds between two sweeps for expired entries (a new unknown id sweeps at once): a sweep walks every entry,
and entries expire after 900 s, so sweeping each write would only cost time."""

Entries = dict[str, Any]


def parse(raw: bytes | None) -> Entries:
    """The map as LiteLLM reads it: JSON, else its sync writer's Python literal; anything else is no map."""
    if raw is None:
        return {}
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        try:
            doc = ast.literal_eval(raw.decode("utf-8", "replace"))
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return {}
    if not isinstance(doc, dict):
        return {}
    return {k: v for k, v in doc.items() if isinstance(k, str) and isinstance(v, dict)}


def timestamp_of(entry: dict[str, Any]) -> float:
    """As LiteLLM's `_timestamp_of`: a timestamp that is no number reads as 0 (stale)."""
    ts = entry.get("timestamp", 0)
    return float(ts) if isinstance(ts, int | float) and not isinstance(ts, bool) else 0.0


def newer(entries: Entries, deployment_id: str, state: HealthState) -> bool:
    """H1: `state` replaces the entry in force unless that one has a greater timestamp (a tie: the later wins)."""
    current = entries.get(deployment_id)
    return current is None or timestamp_of(current) <= state.timestamp


def prune(entries: Entries, now: float, known: Callable[[str], bool] | None) -> None:
    """Drop the entries 900 s old or more, then the oldest unknown ones beyond `UNKNOWN_MAX` (in place)."""
    horizon = now - TTL_SECONDS
    for k in [k for k, v in entries.items() if timestamp_of(v) <= horizon]:
        del entries[k]
    if known is None:
        return
    unknown = [k for k in entries if not known(k)]
    if len(unknown) > UNKNOWN_MAX:
        unknown.sort(key=lambda k: timestamp_of(entries[k]))
        for k in unknown[: len(unknown) - UNKNOWN_MAX]:
            del entries[k]


class HealthMap:
    """Merges verdicts into the map in Redis; `known` says whether the registry knows an id (None: all known)."""

    def __init__(self, client: redis_asyncio.Redis, key: str, known: Callable[[str], bool] | None = None) -> None:
        self.client = client
        self.key = key
        self.known = known
        self._raw: bytes | None = None
        """The map's bytes as this writer last wrote or read them, and `_entries` parsed from them."""
        self._entries: Entries = {}
        self._pruned = float("-inf")

    def _current(self, raw: bytes | None) -> Entries:
        if raw is not None and raw == self._raw:
            return self._entries
        entries = parse(raw)
        self._raw, self._entries, self._pruned = raw, entries, float("-inf")
        return entries

    async def write(self, deployment_id: str, state: HealthState) -> bool:
        """Merge one verdict; False when the entry in force is newer, or the verdict is already expired."""
        async with self.client.pipeline(transaction=True) as pipe:
            while True:
                try:
                    await pipe.watch(self.key)
                    got = await pipe.get(self.key)
                    raw = got.encode() if isinstance(got, str) else got  # bytes unless decode_responses
                    seconds, micros = await pipe.time()
                    now = seconds + micros / 1e6
                    entries = self._current(raw)
                    if not newer(entries, deployment_id, state) or state.timestamp <= now - TTL_SECONDS:
                        await pipe.unwatch()  # type: ignore[no-untyped-call]
                        return False
                    fresh = deployment_id not in entries
                    entries[deployment_id] = state.to_dict()
                    if now - self._pruned >= PRUNE_EVERY or (
                        fresh and self.known is not None and not self.known(deployment_id)
                    ):
                        prune(entries, now, self.known)
                        self._pruned = now
                    value = orjson.dumps(entries)
                    pipe.multi()  # type: ignore[no-untyped-call]
                    pipe.set(self.key, value, ex=TTL_SECONDS)
                    await pipe.execute()
                    self._raw = value
                    return True
                except WatchError:
                    self._raw = None  # another writer got in between: read and merge again
                    continue
                except BaseException:
                    self._raw = None  # the entries may hold a change Redis never got
                    raise
