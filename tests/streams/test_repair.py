"""K1-K3: which cooldowns are in force, and a reassertion never shortens, resurrects or undoes a release."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator

import orjson
import pytest
from redis.asyncio import Redis

from coolant.io.materializer import RedisSink, cooldown_key, litellm_value
from coolant.schemas import Cooldown, Window, encode, to_dict
from coolant.streams.repair import Repairer, in_force, release
from tests.support.redis import scoped_redis


def _cd(dep: str, ts: float, duration: float, eid: str = "e") -> Cooldown:
    return Cooldown(event_id=f"cd-{dep}-{eid}", deployment_id=dep, model_group="g", ts=ts, until=ts + duration,
                    cooldown_time=duration, reason="rate_limited", status_code=429, exception_type="RateLimitError",
                    exception_received="slow down", trigger_event_id=eid, window=Window(ts, 0, 1))


def _history(*cds: Cooldown) -> bytes:
    return orjson.dumps([to_dict(cd) for cd in cds])


def test_in_force_takes_each_deployments_latest_end_still_ahead() -> None:
    now = 1000.0
    a_old, a_new = _cd("a", 900, 50, "1"), _cd("a", 950, 100, "2")  # ended; ends at 1050
    b_late_start_short = _cd("b", 990, 20, "3")  # ends 1010
    b_long = _cd("b", 960, 200, "4")  # ends 1160: the later end wins, whatever the order
    c_over = _cd("c", 100, 10, "5")
    got = in_force([_history(a_old, a_new), _history(b_long, b_late_start_short), _history(c_over), b"junk"], now)
    assert sorted((cd.deployment_id, cd.until) for cd in got) == [("a", 1050.0), ("b", 1160.0)]


@pytest.fixture
async def r(redis_url: str) -> AsyncIterator[tuple[Redis, str]]:
    prefix = f"rtest-{uuid.uuid4().hex[:10]}:"
    async with scoped_redis(redis_url, prefix) as client:
        yield client, prefix


async def test_reassert_restores_lost_keys_but_never_shortens_or_undoes_a_release(r: tuple[Redis, str]) -> None:
    client, prefix = r
    now = time.time()
    lost, longer_in_redis, released = _cd("lost", now, 600), _cd("kept", now, 60), _cd("rel", now - 1, 600)
    histories = [_history(lost), _history(longer_in_redis), _history(released)]
    sink = RedisSink(client, prefix)
    for cd in (longer_in_redis, released):
        assert await sink.write(cd)
    longer = _cd("kept", now, 900, "other")
    assert await sink.write(longer)  # Redis holds a later end than the worker's history
    assert await release(client, prefix, "rel", now) == 2
    seen: list[tuple[str, int, int]] = []
    repairer = Repairer(sink, lambda: histories, on_reassert=lambda *a: seen.append(a))
    await repairer.tick()
    assert seen == [("start", 1, 2)]  # "lost" written; "kept" refused by the Lua rule; "rel" released: skipped
    assert await client.get(cooldown_key(prefix, "lost")) == litellm_value(lost)
    assert await client.get(cooldown_key(prefix, "kept")) == litellm_value(longer)
    assert await client.get(cooldown_key(prefix, "rel")) is None
    await repairer.tick()  # same run_id, not due: nothing
    assert len(seen) == 1
    fresh = _cd("rel", now + 1, 600, "after")  # a cooldown that starts after the release is reasserted
    histories[2] = _history(released, fresh)
    await client.delete(cooldown_key(prefix, "rel"))
    assert await repairer.reassert(missing_only=True) == (1, 2)  # the periodic pass: only the missing key
    assert await client.get(cooldown_key(prefix, "rel")) == litellm_value(fresh)
    assert encode(fresh) == await client.get(f"{prefix}coolant:cooldown:rel")
    await client.delete(cooldown_key(prefix, "lost"))
    repairer._next_full = 0.0  # due: the periodic pass finds the missing key
    await repairer.tick()
    assert seen[-1] == ("periodic", 1, 2)
    assert await client.get(cooldown_key(prefix, "lost")) == litellm_value(lost)


async def test_one_value_redis_refuses_does_not_stop_the_others(r: tuple[Redis, str]) -> None:
    client, prefix = r
    now = time.time()
    good, absurd = _cd("good", now, 600), _cd("absurd", now, 1e308)  # PXAT of 1e311 ms: Redis or Python refuses
    assert in_force([_history(absurd)], now) == []  # beyond any bounded record: never tried
    sink = RedisSink(client, prefix)
    refused = _cd("refused", now, 600)

    async def write(cd: Cooldown) -> bool:
        if cd.deployment_id == "refused":
            raise ValueError("refused")
        return await RedisSink.write(sink, cd)

    sink.write = write  # type: ignore[method-assign]
    repairer = Repairer(sink, lambda: [_history(refused), _history(good)])
    written, skipped = await repairer.reassert()
    assert (written, skipped) == (1, 1)
    assert await client.get(cooldown_key(prefix, "good")) == litellm_value(good)
