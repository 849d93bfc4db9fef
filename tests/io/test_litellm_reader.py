"""LiteLLM's own readers (litellm 1.110.2) accept what the materializer writes.

The cooldown reader is LiteLLM's native store (`litellm.redis.stores.router_cooldowns`, Rust `RouterCooldowns`):
one MGET per read, a value decoded as JSON (else a Python literal) into {exception_received: str,
status_code: str, timestamp: number, cooldown_time: number}, active while timestamp + cooldown_time - now > 0.
Every reader below starts with an empty memory tier, so what it reports came from Redis.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import urlparse

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network fetch of the cost map at import
litellm = pytest.importorskip("litellm")

from litellm.caching.dual_cache import DualCache  # noqa: E402
from litellm.caching.redis_cache import RedisCache  # noqa: E402
from litellm.redis.stores.connection import connect  # noqa: E402
from litellm.redis.stores.router_cooldowns import RouterCooldownStore  # noqa: E402
from litellm.router_utils.cooldown_cache import CooldownCache  # noqa: E402
from litellm.router_utils.health_state_cache import DeploymentHealthCache  # noqa: E402
from redis.asyncio import Redis  # noqa: E402

from coolant.io.materializer import RedisSink, cooldown_key  # noqa: E402
from coolant.processors.state import HealthState  # noqa: E402
from coolant.schemas import Cooldown, Window  # noqa: E402

# litellm's own TypedDicts trip a pydantic notice about `ReadOnly`; it says nothing about these tests
pytestmark = [pytest.mark.integration,  # every test reads from Redis (`redis_url`)
              pytest.mark.filterwarnings("ignore:.*ReadOnly.*:UserWarning")]


def make_cd(deployment_id: str, duration: float, status: int | None = 429) -> Cooldown:
    ts = time.time()
    return Cooldown(
        event_id=f"cd-{uuid.uuid4().hex}",
        deployment_id=deployment_id,
        model_group="g",
        ts=ts,
        until=ts + duration,
        cooldown_time=duration,
        reason="rate_limited",
        status_code=status,
        exception_type="RateLimitError",
        exception_received="RateLimitError",
        trigger_event_id="e1",
        window=Window(ts, 0, 1),
    )


@pytest.fixture
def server(redis_url: str) -> tuple[str, int]:
    u = urlparse(redis_url)
    if u.password or (u.path not in ("", "/", "/0")):
        pytest.skip("these tests hand LiteLLM a bare host and port")
    return u.hostname or "127.0.0.1", u.port or 6379


@pytest.fixture
def namespace() -> str:
    return f"ctest-litellm-{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def r(redis_url: str) -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_url)
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture
def redis_cache(server: tuple[str, int], namespace: str) -> Iterator[RedisCache]:
    yield RedisCache(host=server[0], port=server[1], namespace=namespace)


def fresh_reader(redis_cache: RedisCache) -> CooldownCache:
    """LiteLLM's cooldown reader, as a Router builds it (router_rust/core.py), with nothing in memory yet."""
    return CooldownCache(store=RouterCooldownStore(connect(redis_cache).router_cooldowns()), default_cooldown_time=5)


async def _cleanup(r: Redis, pattern: str) -> None:
    keys = [k async for k in r.scan_iter(match=pattern)]
    if keys:
        await r.delete(*keys)


async def _sleep_until(t: float) -> None:
    await asyncio.sleep(max(0.0, t - time.time()))


async def test_cooldown_reader_sees_our_key_until_it_ends(r: Redis, redis_cache: RedisCache, namespace: str) -> None:
    sink = RedisSink(r, f"{namespace}:")  # LiteLLM's namespace "ns" reads "ns:deployment:..."
    dep, other = f"dep-{uuid.uuid4().hex[:8]}", f"dep-{uuid.uuid4().hex[:8]}"
    cd = make_cd(dep, 2)
    try:
        assert await sink.write(cd)
        expected = {
            "exception_received": "RateLimitError",
            "status_code": "429",
            "timestamp": cd.ts,
            "cooldown_time": 2,
        }
        primed = fresh_reader(redis_cache)
        assert await primed.async_get_active_cooldowns([dep, other], None) == [(dep, expected)]
        assert fresh_reader(redis_cache).get_active_cooldowns([other, dep], None) == [(dep, expected)]

        await _sleep_until(cd.until + 0.2)
        assert await fresh_reader(redis_cache).async_get_active_cooldowns([dep, other], None) == []
        assert fresh_reader(redis_cache).get_active_cooldowns([dep], None) == []
        # a reader that had it in memory drops it at its end too
        assert await primed.async_get_active_cooldowns([dep], None) == []
    finally:
        await _cleanup(r, f"{namespace}:*")


async def test_null_status_and_fractional_duration_are_read(r: Redis, redis_cache: RedisCache, namespace: str) -> None:
    sink = RedisSink(r, f"{namespace}:")
    dep = f"dep-{uuid.uuid4().hex[:8]}"
    try:
        cd = make_cd(dep, 30.5, status=None)
        assert await sink.write(cd)
        [(got_id, value)] = await fresh_reader(redis_cache).async_get_active_cooldowns([dep], None)
        assert got_id == dep
        assert value["status_code"] == "500"
        assert value["cooldown_time"] == 30.5
    finally:
        await _cleanup(r, f"{namespace}:*")


async def test_an_int_status_code_blinds_the_reader(r: Redis, redis_cache: RedisCache, namespace: str) -> None:
    """Why status_code is written as a string: LiteLLM fails to decode an int, and then drops the whole batch."""
    sink = RedisSink(r, f"{namespace}:")
    ours, bad = f"dep-{uuid.uuid4().hex[:8]}", f"dep-{uuid.uuid4().hex[:8]}"
    try:
        cd = make_cd(ours, 30)
        assert await sink.write(cd)
        now = time.time()
        bad_value = {"exception_received": "x", "status_code": 429, "timestamp": now, "cooldown_time": 30}
        await r.set(f"{namespace}:{cooldown_key('', bad)}", json.dumps(bad_value), ex=30)
        assert await fresh_reader(redis_cache).async_get_active_cooldowns([ours, bad], None) == []
        assert [i for i, _ in await fresh_reader(redis_cache).async_get_active_cooldowns([ours], None)] == [ours]
    finally:
        await _cleanup(r, f"{namespace}:*")


async def test_router_skips_a_cooled_deployment(r: Redis, server: tuple[str, int]) -> None:
    """A real Router (no namespace, mock responses, no network) routes around our cooldown, then back."""
    a, b = f"coolant-test-{uuid.uuid4().hex[:8]}", f"coolant-test-{uuid.uuid4().hex[:8]}"
    group = f"group-{uuid.uuid4().hex[:8]}"

    def deployment(dep_id: str) -> dict[str, Any]:
        params = {"model": "openai/gpt-4o-mini", "api_key": "sk-test", "mock_response": f"hi from {dep_id}"}
        return {"model_name": group, "litellm_params": params, "model_info": {"id": dep_id}}

    sink = RedisSink(r)
    cd = make_cd(a, 2.5)
    try:
        assert await sink.write(cd)
        router = litellm.Router(model_list=[deployment(a), deployment(b)], redis_host=server[0], redis_port=server[1])
        cooling = await router.health().cooldowns.async_get_active_cooldowns([a, b], None)
        assert [dep for dep, _ in cooling] == [a]
        picks = set()
        for _ in range(20):
            picked = await router.select(group, {}, kind="pick")
            picks.add(picked["model_info"]["id"])
        assert picks == {b}
        resp = await router.acompletion(model=group, messages=[{"role": "user", "content": "hi"}])
        assert resp._hidden_params["model_id"] == b
        assert resp.choices[0].message.content == f"hi from {b}"

        await _sleep_until(cd.until + 0.2)
        assert await router.health().cooldowns.async_get_active_cooldowns([a, b], None) == []
        picks = set()
        for _ in range(60):
            picked = await router.select(group, {}, kind="pick")
            picks.add(picked["model_info"]["id"])
            if picks == {a, b}:
                break
        assert picks == {a, b}
    finally:
        await r.delete(cooldown_key("", a), cooldown_key("", b), f"coolant:cooldown:{a}")


async def test_health_map_is_read_and_merged_by_litellm(r: Redis, redis_cache: RedisCache, namespace: str) -> None:
    """LiteLLM's DeploymentHealthCache reads our JSON, and its own writer's merge and ours keep each other's entries."""
    sink = RedisSink(r, f"{namespace}:")
    ours, theirs, healthy = (f"dep-{uuid.uuid4().hex[:8]}" for _ in range(3))
    try:
        now = time.time()
        assert await sink.write_health(ours, HealthState(False, now, "background_health_check_failed"))
        assert await sink.write_health(healthy, HealthState(True, now, ""))
        health = DeploymentHealthCache(DualCache(redis_cache=redis_cache), staleness_threshold=600)
        assert await health.async_get_unhealthy_deployment_ids() == {ours}

        # a proxy's background health check merges its result (as str(dict)) into the same key
        DeploymentHealthCache(DualCache(redis_cache=redis_cache), 600).set_deployment_health_states(
            {theirs: {"is_healthy": False, "timestamp": now, "reason": "background_health_check_failed"}}
        )
        assert await sink.write_health(healthy, HealthState(True, now + 1, ""))
        fresh = DeploymentHealthCache(DualCache(redis_cache=redis_cache), staleness_threshold=600)
        assert await fresh.async_get_unhealthy_deployment_ids() == {ours, theirs}
    finally:
        await _cleanup(r, f"{namespace}:*")
