"""Merging each prober's results into LiteLLM's one shared `health_check_results` key, atomically (contract §4).

Every prober HSETs its deployments' latest results into `[<prefix>]coolant:probe:results` (field = deployment
id), then rebuilds the whole document from that hash inside WATCH/MULTI/EXEC: a concurrent HSET by another
prober aborts the EXEC and the rebuild is retried, so the key written last always reflects every deployment's
latest result, whichever prober wrote it. `key_prefix` is prepended verbatim, as for the materializer: a
LiteLLM `RedisCache(namespace="ns")` reads `ns:health_check_results`, so pass `ns:`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final

import redis.asyncio as redis_asyncio
from redis.exceptions import WatchError

from coolant.probe.results import SHARED_TTL_SECONDS, build_document, encode_document

__all__ = ["RESULTS_HASH", "SHARED_KEY", "merge_results", "results_key", "shared_key"]

log = logging.getLogger(__name__)

SHARED_KEY: Final = "health_check_results"
"""LiteLLM's `SharedHealthCheckManager.get_health_check_cache_key()`."""
RESULTS_HASH: Final = "coolant:probe:results"
_MAX_ATTEMPTS: Final = 50


def shared_key(prefix: str) -> str:
    return f"{prefix}{SHARED_KEY}"


def results_key(prefix: str) -> str:
    return f"{prefix}{RESULTS_HASH}"


async def merge_results(
    client: redis_asyncio.Redis,
    prefix: str,
    entries: Mapping[str, bytes],
    now: float,
    checked_by: str,
    max_age: float = SHARED_TTL_SECONDS,
) -> dict[str, Any] | None:
    """Record `entries` and rewrite the shared document from all deployments' results; returns it (None when
    contention never let the rebuild through, which the next round repairs)."""
    hkey, dkey = results_key(prefix), shared_key(prefix)
    if entries:
        mapping: dict[str | bytes, bytes] = {k: v for k, v in entries.items()}  # widens the key type
        await client.hset(hkey, mapping=mapping)  # type: ignore[arg-type]  # redis-py's Mapping is invariant
    async with client.pipeline(transaction=True) as pipe:
        for _ in range(_MAX_ATTEMPTS):
            try:
                await pipe.watch(hkey)
                raw = await pipe.hgetall(hkey)
                fields = {k.decode() if isinstance(k, bytes) else k: v for k, v in raw.items()}
                doc, drop = build_document(fields, now, checked_by, max_age)
                pipe.multi()  # type: ignore[no-untyped-call]
                if drop:
                    pipe.hdel(hkey, *drop)
                if doc["healthy_count"] or doc["unhealthy_count"]:
                    pipe.set(dkey, encode_document(doc), ex=SHARED_TTL_SECONDS)
                pipe.expire(hkey, 2 * SHARED_TTL_SECONDS)
                await pipe.execute()
                return doc
            except WatchError:
                continue
    log.warning("shared health results not rebuilt: %d concurrent updates in a row", _MAX_ATTEMPTS)
    return None
