"""LiteLLM's health map kept LiteLLM's size (issue 26): H1 per id, entries expire at 900 s as LiteLLM's writer
expires them, at most UNKNOWN_MAX unregistered ids, concurrent writers lose nothing."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from coolant.io.health_map import TTL_SECONDS, UNKNOWN_MAX, HealthMap, parse, prune
from coolant.io.materializer import HEALTH_KEY, RedisSink
from coolant.processors.state import HealthState

FAILED = "background_health_check_failed"


@pytest.fixture
async def r(redis_url: str) -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_url)
    prefix = f"hmtest-{uuid.uuid4().hex[:10]}:"
    client.test_prefix = prefix  # type: ignore[attr-defined]
    try:
        yield client
    finally:
        await client.delete(f"{prefix}{HEALTH_KEY}")
        await client.aclose()


def _key(r: Redis) -> str:
    return f"{r.test_prefix}{HEALTH_KEY}"  # type: ignore[attr-defined]


async def test_greatest_timestamp_wins_and_the_map_keeps_litellm_format(r: Redis) -> None:
    sink = RedisSink(r, r.test_prefix)  # type: ignore[attr-defined]
    key, now = _key(r), round(time.time(), 3)
    assert await sink.write_health("d1", HealthState(False, now, FAILED))
    assert await r.get(key) == b'{"d1":{"is_healthy":false,"timestamp":%s,"reason":"%s"}}' % (
        repr(now).encode(), FAILED.encode())
    assert TTL_SECONDS - 5 <= await r.ttl(key) <= TTL_SECONDS
    assert await sink.write_health("d1", HealthState(True, now - 50, "")) is False  # older: ignored
    assert json.loads(await r.get(key))["d1"]["is_healthy"] is False
    assert await sink.write_health("d1", HealthState(True, now, "")) is True  # a tie: the later wins
    assert json.loads(await r.get(key))["d1"] == {"is_healthy": True, "timestamp": now, "reason": ""}
    await r.expire(key, 10)
    precise = time.time() - 0.4715946
    assert await sink.write_health("d0/x", HealthState(False, precise, FAILED))
    assert TTL_SECONDS - 5 <= await r.ttl(key) <= TTL_SECONDS  # refreshed on write
    assert json.loads(await r.get(key)) == {
        "d1": {"is_healthy": True, "timestamp": now, "reason": ""},
        "d0/x": {"is_healthy": False, "timestamp": precise, "reason": FAILED},  # no precision lost
    }


async def test_litellm_python_literal_and_foreign_fields_are_kept(r: Redis) -> None:
    """LiteLLM's sync writer stores str(dict); a merge keeps its entries (as JSON from then on), extra fields too."""
    sink, key, now = RedisSink(r, r.test_prefix), _key(r), time.time()  # type: ignore[attr-defined]
    theirs = {"lite-1": {"is_healthy": False, "timestamp": now - 1.25, "reason": FAILED, "extra": [1]}}
    await r.set(key, str(theirs), ex=900)
    assert await sink.write_health("ours", HealthState(True, now, ""))
    assert json.loads(await r.get(key)) == {**theirs, "ours": {"is_healthy": True, "timestamp": now, "reason": ""}}
    await r.set(key, b"not a map")  # and an unparseable value is simply replaced
    assert await sink.write_health("ours", HealthState(True, now, ""))
    assert json.loads(await r.get(key)) == {"ours": {"is_healthy": True, "timestamp": now, "reason": ""}}


async def test_expired_entries_are_dropped_as_litellm_drops_them(r: Redis) -> None:
    sink, key, now = RedisSink(r, r.test_prefix), _key(r), time.time()  # type: ignore[attr-defined]
    old = {f"old-{i}": {"is_healthy": False, "timestamp": now - TTL_SECONDS - 5, "reason": FAILED} for i in range(50)}
    junk = {"no-ts": {"is_healthy": False}, "bad-ts": {"is_healthy": False, "timestamp": "x"}}
    fresh = {"fresh": {"is_healthy": True, "timestamp": now - 10, "reason": ""}}
    await r.set(key, json.dumps({**old, **junk, **fresh}), ex=900)
    assert await sink.write_health("ours", HealthState(True, now, ""))
    assert set(json.loads(await r.get(key))) == {"fresh", "ours"}
    assert await sink.write_health("late", HealthState(False, now - TTL_SECONDS - 1, FAILED)) is False  # stale


async def test_unregistered_ids_are_bounded_oldest_first(r: Redis) -> None:
    sink, key, now = RedisSink(r, r.test_prefix), _key(r), time.time()  # type: ignore[attr-defined]
    sink.health_map.known = lambda dep: dep.startswith("reg-")
    many = {f"unk-{i:05d}": {"is_healthy": False, "timestamp": now - 100 + i / 100, "reason": FAILED}
            for i in range(UNKNOWN_MAX + 200)}
    registered = {f"reg-{i}": {"is_healthy": True, "timestamp": now - 500, "reason": ""} for i in range(300)}
    await r.set(key, json.dumps({**registered, **many}), ex=900)
    assert await sink.write_health("unk-new", HealthState(False, now, FAILED))
    kept = json.loads(await r.get(key))
    unknown = sorted(k for k in kept if not k.startswith("reg-"))
    assert len(unknown) == UNKNOWN_MAX and "unk-new" in unknown and "unk-00000" not in unknown  # oldest went
    assert set(registered) <= set(kept)  # registered ones are never dropped for it


def test_prune_without_a_registry_only_expires() -> None:
    now = 10_000.0
    entries = {f"u{i}": {"timestamp": now - 1} for i in range(UNKNOWN_MAX + 5)} | {"old": {"timestamp": 1.0}}
    prune(entries, now, None)
    assert len(entries) == UNKNOWN_MAX + 5
    assert parse(b"[1, 2]") == {} and parse(b"{'a': {'timestamp': 1}}") == {"a": {"timestamp": 1}}


async def test_concurrent_writers_lose_no_entry(r: Redis, redis_url: str) -> None:
    """Several writers (workers, LiteLLM pods) on one map: each verdict lands (WATCH retries), none is lost."""
    clients = [Redis.from_url(redis_url) for _ in range(4)]
    try:
        maps = [HealthMap(c, _key(r)) for c in clients]
        now = time.time()

        async def writes(i: int, m: HealthMap) -> None:
            for j in range(25):
                assert await m.write(f"w{i}-{j}", HealthState(j % 2 == 0, now, "" if j % 2 == 0 else FAILED))

        await asyncio.gather(*(writes(i, m) for i, m in enumerate(maps)))
        assert len(json.loads(await r.get(_key(r)))) == 100
    finally:
        for c in clients:
            await c.aclose()
