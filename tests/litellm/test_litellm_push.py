"""The in-pod fast path and the cooldown push, on real LiteLLM 1.110.2 Routers and the shared Redis.

Pins what coolant relies on in LiteLLM (coolant/integrations/litellm/cooldowns.py), then: a failure that one
record decides is routed around before the failure hook returns; a sibling pod skips the deployment through
the push alone; with the push down a sibling learns it through LiteLLM's own Redis reads; and racing LiteLLM's
own cooldown write never makes a router see coolant's cooldown shortened.

The records go to an in-memory publisher (`Collected`): what the worker does with them is
`tests/processors/test_prefetch.py`'s and the fleet tests' subject.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import orjson
import pytest
import yaml
from redis.asyncio import Redis
from support_litellm import MESSAGES, Collected, deployment

litellm = pytest.importorskip("litellm")

from coolant.config.loader import parse_config  # noqa: E402
from coolant.integrations.litellm import CoolantCallback  # noqa: E402
from coolant.integrations.litellm.cooldowns import local_cooldowns  # noqa: E402
from coolant.io.materializer import (  # noqa: E402
    RedisSink,
    cooldown_channel,
    cooldown_key,
    litellm_fields,
    litellm_value,
)
from coolant.processors.prefetch import prefetch  # noqa: E402
from coolant.schemas import Outcome  # noqa: E402
from tests.support.redis import scoped_redis  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore:.*ReadOnly.*:UserWarning")]

RATE_LIMIT = "litellm.RateLimitError"


@pytest.fixture
def tag() -> str:
    return uuid.uuid4().hex[:8]


@pytest.fixture
async def redis(redis_url: str, tag: str) -> AsyncIterator[Redis]:
    async with scoped_redis(redis_url, f"push-{tag}:") as client:
        yield client


def group_of(tag: str, bad: str = RATE_LIMIT) -> tuple[str, list[dict[str, Any]]]:
    group = f"push-{tag}"
    return group, [deployment(f"{group}-bad", group, mock=bad), deployment(f"{group}-ok1", group, mock="hi"),
                   deployment(f"{group}-ok2", group, mock="hi")]


def router_for(model_list: list[dict[str, Any]], redis_url: str | None, tag: str, **settings: Any) -> Any:
    kw: dict[str, Any] = {}
    if redis_url is not None:
        u = urlparse(redis_url)
        kw = {"redis_host": u.hostname, "redis_port": u.port, "cache_kwargs": {"namespace": f"push-{tag}"}}
    return litellm.Router(model_list=model_list, **{"num_retries": 0, "disable_cooldowns": True, **kw, **settings})


def policy_for(model_list: list[dict[str, Any]]) -> Any:
    return parse_config({"model_list": model_list, "router_settings": {"cooldown_time": 60}}).policy


async def picks(router: Any, group: str, n: int = 30) -> set[str]:
    return {(await router.select(group, {}, kind="pick"))["model_info"]["id"] for _ in range(n)}


@pytest.fixture
def only_callback() -> Any:
    saved = list(litellm.callbacks)

    def use(cb: CoolantCallback) -> None:
        litellm.callbacks = [cb]

    yield use
    for cb in litellm.callbacks:
        litellm.logging_callback_manager.remove_callback_from_all_lists(cb)
    litellm.callbacks = saved


def skip_unless_plain(redis_url: str) -> None:
    u = urlparse(redis_url)
    if u.password or u.path not in ("", "/", "/0"):
        pytest.skip("these tests hand LiteLLM a bare host and port")


# -- what coolant relies on in LiteLLM 1.110.2 ------------------------------------------------------------------


async def test_litellm_reads_its_cooldown_store_at_each_decision_and_has_no_memory_only_write(
    redis: Redis, redis_url: str, tag: str
) -> None:
    skip_unless_plain(redis_url)
    from litellm.constants import DEFAULT_COOLDOWN_REDIS_READ_INTERVAL_SECONDS

    assert DEFAULT_COOLDOWN_REDIS_READ_INTERVAL_SECONDS == 1.0
    group, model_list = group_of(tag)
    router = router_for(model_list, redis_url, tag)
    store = router.health().cooldowns.cooldown_store
    # put, the store's only write, writes Redis too (a plain SET of a Python literal): not usable by coolant
    bad = f"{group}-bad"
    store.put(bad, {"exception_received": "x", "status_code": "429", "timestamp": time.time(),
                    "cooldown_time": 30.0}, 30.0)
    raw = await redis.get(f"push-{tag}:deployment:{bad}:cooldown")
    assert raw is not None and raw.startswith(b"{'exception_received'")
    # the wrapper is what every routing decision reads: select, acompletion and completion all skip what it holds
    other = f"{group}-ok1"
    local = local_cooldowns(router)
    assert local_cooldowns(router) is local and router.health().cooldowns.cooldown_store is local
    assert local.apply(other, {"exception_received": "y", "status_code": "401", "timestamp": time.time(),
                               "cooldown_time": 30})
    assert await picks(router, group) == {f"{group}-ok2"}
    used = set()
    for _ in range(10):
        used.add((await router.acompletion(model=group, messages=MESSAGES))._hidden_params["model_id"])
        used.add(router.completion(model=group, messages=MESSAGES)._hidden_params["model_id"])
    assert used == {f"{group}-ok2"}
    active = dict(await router.health().cooldowns.async_get_active_cooldowns([bad, other], None))
    assert set(active) == {bad, other} and active[other]["status_code"] == "401"


# -- the fast path ----------------------------------------------------------------------------------------------


async def test_fast_path_cools_before_the_failure_hook_returns(
    redis: Redis, redis_url: str, tag: str, only_callback: Any
) -> None:
    """A 429 on a group of three: LiteLLM's retry, which starts after the hook returned, already goes elsewhere.
    The Redis key is the materializer's, and the decision is exactly the one the engine makes for the record."""
    skip_unless_plain(redis_url)
    group, model_list = group_of(tag)
    router = router_for(model_list, redis_url, tag, num_retries=1)
    collected = Collected()
    policy = policy_for(model_list)
    cb = CoolantCallback(publisher=collected, policy=policy, redis_url=redis_url, redis_key_prefix=f"push-{tag}:",
                         routers=[router], gateway="pod-a")
    only_callback(cb)
    pubsub = redis.pubsub()
    await pubsub.subscribe(cooldown_channel(f"push-{tag}:"))
    try:
        served = [(await router.acompletion(model=group, messages=MESSAGES))._hidden_params["model_id"]
                  for _ in range(20)]
        message = None
        deadline = time.monotonic() + 10
        while message is None and time.monotonic() < deadline:  # the fast path's write, announced after it
            message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1)
    finally:
        await pubsub.aclose()
        await cb.aclose()
    bad = f"{group}-bad"
    failures = [r for r in collected.records if not r.ok]
    # every request succeeded: the one that met the 429 was retried on a healthy deployment, the rest never
    # picked the cooled one
    assert bad not in served and len(failures) == 1 and failures[0].deployment_id == bad
    assert cb.stats.prefetched == 1
    expected = prefetch(policy, failures[0])
    assert expected is not None and expected.reason == "rate_limited"
    assert message is not None and orjson.loads(message["data"])["deployment_id"] == bad
    assert await redis.get(cooldown_key(f"push-{tag}:", bad)) == litellm_value(expected)
    assert await redis.pexpiretime(cooldown_key(f"push-{tag}:", bad)) > 0


async def test_rules_that_need_the_fleet_are_left_to_the_worker(
    redis_url: str, tag: str, only_callback: Any
) -> None:
    """A 500 (failure rate over the fleet's window) is published but not cooled in the pod."""
    group, model_list = group_of(tag, bad="litellm.InternalServerError")
    router = router_for(model_list, None, tag)
    collected = Collected()
    cb = CoolantCallback(publisher=collected, policy=policy_for(model_list), routers=[router])
    only_callback(cb)
    while sum(1 for r in collected.records if not r.ok) < 3:
        with contextlib.suppress(Exception):
            await router.acompletion(model=group, messages=MESSAGES)
    await cb.aclose()
    assert cb.stats.prefetched == 0
    assert f"{group}-bad" in await picks(router, group, 60)


# -- the push ---------------------------------------------------------------------------------------------------


async def test_a_lone_primarys_streak_sends_its_retries_to_the_fallback(
    redis: Redis, redis_url: str, tag: str, only_callback: Any
) -> None:
    """PF8: under the outlier profile a group's only deployment with fallbacks is cooled in the pod at its third
    failure in a row (`consecutive_single`), so the request's retries and the next requests go to the fallback
    with no worker in the loop; the pod writes nothing to Redis (the fleet's streak is the worker's to judge)."""
    skip_unless_plain(redis_url)
    primary, fallback = f"push-{tag}-p", f"push-{tag}-f"
    model_list = [deployment(primary, primary, mock="litellm.InternalServerError"),
                  deployment(fallback, fallback, mock="hi")]
    fallbacks = [{primary: [fallback]}]
    router = router_for(model_list, redis_url, tag, num_retries=2, fallbacks=fallbacks)
    collected = Collected()
    policy = parse_config({"model_list": model_list, "router_settings": {"fallbacks": fallbacks},
                           "coolant": {"profile": "outlier"}}).policy
    cb = CoolantCallback(publisher=collected, policy=policy, redis_url=redis_url, redis_key_prefix=f"push-{tag}:",
                         routers=[router], gateway="pod-a")
    only_callback(cb)
    try:
        served = [(await router.acompletion(model=primary, messages=MESSAGES))._hidden_params["model_id"]
                  for _ in range(6)]
    finally:
        await cb.aclose()
    assert served == [fallback] * 6
    assert [r.deployment_id for r in collected.records if not r.ok] == [primary] * 3
    assert (cb.stats.own_streak, cb.stats.prefetched) == (1, 0)
    assert local_cooldowns(router).held(primary) is not None
    assert await redis.get(cooldown_key(f"push-{tag}:", primary)) is None


async def test_a_sibling_skips_the_deployment_through_the_push(
    redis_url: str, tag: str, only_callback: Any
) -> None:
    """Pod B's Router has no Redis at all: the push is the only way it can learn of A's decision."""
    skip_unless_plain(redis_url)
    group, model_list = group_of(tag)
    router_a, router_b = router_for(model_list, redis_url, tag), router_for(model_list, None, tag)
    prefix = f"push-{tag}:"
    a = CoolantCallback(publisher=Collected(), policy=policy_for(model_list), redis_url=redis_url,
                        redis_key_prefix=prefix, routers=[router_a], gateway="pod-a")
    b = CoolantCallback(publisher=Collected(), redis_url=redis_url, redis_key_prefix=prefix, routers=[router_b],
                        gateway="pod-b")  # no policy: push only
    only_callback(a)  # B's callback only runs its feed here: LiteLLM would also hand it A's failures
    feed = await b.start_push()
    assert feed is not None
    await asyncio.wait_for(feed.subscribed.wait(), 10)
    bad = f"{group}-bad"
    try:
        assert bad in await picks(router_b, group, 60)
        while True:  # until A meets the bad deployment
            try:
                await router_a.acompletion(model=group, messages=MESSAGES)
            except Exception:
                break
        await applied(feed, 1)
        assert bad not in await picks(router_b, group, 60)
        assert feed.stats.connected and feed.stats.received >= 1 and feed.stats.down == 0
        assert local_cooldowns(router_b).held(bad) is not None
    finally:
        await a.aclose()
        await b.aclose()


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


async def test_with_the_push_down_a_sibling_falls_back_to_litellms_redis_reads(
    redis: Redis, redis_url: str, tag: str, caplog: pytest.LogCaptureFixture
) -> None:
    skip_unless_plain(redis_url)
    group, model_list = group_of(tag)
    router_b = router_for(model_list, redis_url, tag)
    prefix = f"push-{tag}:"
    b = CoolantCallback(publisher=Collected(), redis_url=f"redis://127.0.0.1:{_dead_port()}/0",
                        redis_key_prefix=prefix, routers=[router_b])
    caplog.set_level(logging.WARNING, logger="coolant.integrations.litellm.cooldowns")
    feed = await b.start_push()
    assert feed is not None
    try:
        while feed.stats.down == 0:
            await asyncio.sleep(0.01)
        assert not feed.stats.connected
        assert any("LiteLLM's Redis reads" in r.getMessage() for r in caplog.records)
        # a decision written to the shared Redis by another pod or the worker: B reads it itself
        bad = f"{group}-bad"
        await written_429(RedisSink(redis, prefix), model_list, tag, bad)
        deadline = time.monotonic() + 10
        while bad in await picks(router_b, group, 20):
            assert time.monotonic() < deadline, "LiteLLM's own Redis read did not pick the cooldown up"
            await asyncio.sleep(0.05)
        assert local_cooldowns(router_b).held(bad) is None  # it came through LiteLLM, not the push
    finally:
        await b.aclose()


# -- never shorter --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("coolant_longer", [True, False])
async def test_racing_litellms_own_write_never_shortens_what_routers_see(
    redis: Redis, redis_url: str, tag: str, coolant_longer: bool
) -> None:
    """LiteLLM's own cooldown write (`put`: a plain SET) and coolant's (the materializer's script, announced),
    started together in both orders, 20 times. coolant never replaces a longer LiteLLM entry; when LiteLLM's
    plain SET replaces a longer coolant entry in Redis (LiteLLM's own behaviour), the pods holding coolant's
    copy still route around the deployment until coolant's end."""
    skip_unless_plain(redis_url)
    group, model_list = group_of(tag)
    policy = policy_for(model_list)
    prefix = f"push-{tag}:"
    pod = router_for(model_list, redis_url, tag)
    local = local_cooldowns(pod)
    store = local.inner
    sink = RedisSink(redis, prefix)
    bad = f"{group}-bad"
    key = cooldown_key(prefix, bad)
    coolant_s, litellm_s = (60, 5) if coolant_longer else (5, 60)
    for i in range(20):
        await redis.delete(key)
        now = time.time()
        rec = Outcome(event_id=f"{tag}-{i}", ts=now, deployment_id=bad, model_group=group, ok=False,
                      status_code=429, exception_type="RateLimitError", retry_after=str(coolant_s))
        cd = prefetch(policy, rec)
        assert cd is not None and cd.cooldown_time == coolant_s
        theirs = {"exception_received": "theirs", "status_code": "429", "timestamp": now,
                  "cooldown_time": float(litellm_s)}

        async def coolant_write(cd: Any = cd) -> None:
            local.apply_cooldown(cd)
            await sink.write(cd)

        async def litellm_write(theirs: Any = theirs) -> None:
            await store.async_put(bad, theirs, float(litellm_s))

        order = (coolant_write(), litellm_write()) if i % 2 else (litellm_write(), coolant_write())
        await asyncio.gather(*order)
        raw = await redis.get(key)
        assert raw is not None
        in_redis = orjson.loads(raw) if raw.startswith(b"{\"") else yaml.safe_load(raw.decode())
        redis_end = in_redis["timestamp"] + in_redis["cooldown_time"]
        if not coolant_longer:
            assert redis_end == pytest.approx(now + litellm_s)  # coolant's shorter write never replaced it
        seen = dict(local.active_sync([bad]))[bad]
        assert seen["timestamp"] + seen["cooldown_time"] >= cd.until  # the pod never sees coolant's shortened
        assert max(redis_end, cd.until) == pytest.approx(max(now + litellm_s, cd.until))


@dataclass
class Held:
    """A pod on the push whose router holds coolant's cooldown of `bad`, written to Redis by `sink`."""

    router: Any
    group: str
    bad: str
    feed: Any
    cd: Any
    sink: RedisSink


@contextlib.asynccontextmanager
async def held_through_the_push(redis: Redis, redis_url: str, tag: str, *, router_redis: bool) -> AsyncIterator[Held]:
    """A pod's callback on the push (its router on the fleet's Redis when `router_redis`), a 429 on the group's bad
    deployment decided and written as the worker would, and the pod's copy of it applied."""
    group, model_list = group_of(tag)
    router = router_for(model_list, redis_url if router_redis else None, tag)
    prefix = f"push-{tag}:"
    pod = CoolantCallback(publisher=Collected(), redis_url=redis_url, redis_key_prefix=prefix, routers=[router])
    feed = await pod.start_push()
    assert feed is not None
    await asyncio.wait_for(feed.subscribed.wait(), 10)
    bad = f"{group}-bad"
    sink = RedisSink(redis, prefix)
    try:
        cd = await written_429(sink, model_list, tag, bad)
        await applied(feed, 1)
        yield Held(router, group, bad, feed, cd, sink)
    finally:
        await pod.aclose()


async def written_429(sink: RedisSink, model_list: list[dict[str, Any]], tag: str, bad: str) -> Any:
    """A 429 on `bad` decided by the pure core and written to Redis, as the worker (or another pod) writes it."""
    group = model_list[0]["model_name"]
    rec = Outcome(event_id=f"{tag}-1", ts=time.time(), deployment_id=bad, model_group=group, ok=False,
                  status_code=429, exception_type="RateLimitError")
    cd = prefetch(policy_for(model_list), rec)
    assert cd is not None and await sink.write(cd)
    return cd


async def applied(feed: Any, n: int) -> None:
    """Until the pod's feed has applied `n` announcements."""
    while feed.stats.applied < n:
        await asyncio.sleep(0.005)


async def test_an_admin_release_reaches_the_pods_copies(redis: Redis, redis_url: str, tag: str) -> None:
    """`DELETE /cooldowns/{id}` (repair.release) is announced: a pod that holds the cooldown through the push
    drops it and routes to the deployment again; a cooldown that starts after the release is kept."""
    from coolant.streams import repair

    async with held_through_the_push(redis, redis_url, tag, router_redis=False) as h:
        assert h.bad not in await picks(h.router, h.group, 60)
        assert await repair.release(redis, f"push-{tag}:", h.bad, time.time()) == 2
        await applied(h.feed, 2)
        assert h.bad in await picks(h.router, h.group, 60)
        local = local_cooldowns(h.router)
        later = {"exception_received": "x", "status_code": "429", "timestamp": time.time() + 1, "cooldown_time": 30}
        assert local.apply(h.bad, later) and not local.release(h.bad, time.time() - 5)


async def test_a_probe_release_reaches_litellms_own_memory_copy(redis: Redis, redis_url: str, tag: str) -> None:
    """RC4: a router on the fleet's Redis has read the cooldown into its own memory tier, which it keeps until the
    cooldown's end (it reads Redis only for keys it does not hold). The release, announced on the push, drops
    that copy too, so the next pick routes to the deployment again."""
    async with held_through_the_push(redis, redis_url, tag, router_redis=True) as h:
        local = local_cooldowns(h.router)
        local.inner.put(h.bad, litellm_fields(h.cd), h.cd.until - time.time())  # what LiteLLM's Redis read leaves
        assert local.inner.snapshot().get(cooldown_key("", h.bad)) is not None
        assert h.bad not in await picks(h.router, h.group, 60)
        assert await h.sink.release(h.bad, time.time())
        await applied(h.feed, 2)
        assert local.inner.snapshot().get(cooldown_key("", h.bad)) is None
        assert h.bad in await picks(h.router, h.group, 60)


def test_sync_requests_cool_the_pod_too(tag: str) -> None:
    """`Router.completion` calls the sync failure hook on the request thread: the pod's routers hold the
    cooldown when it returns; the Redis write is left to the worker (counted `unwritten`)."""
    group, model_list = group_of(tag)
    router = router_for(model_list, None, tag, num_retries=1)
    collected = Collected()
    cb = CoolantCallback(publisher=collected, policy=policy_for(model_list), routers=[router])
    saved = list(litellm.callbacks)
    litellm.callbacks = [cb]
    try:
        served = [router.completion(model=group, messages=MESSAGES)._hidden_params["model_id"] for _ in range(20)]
    finally:
        litellm.callbacks = saved
        litellm.logging_callback_manager.remove_callback_from_all_lists(cb)
        cb.close()
    bad = f"{group}-bad"
    assert bad not in served and [r.deployment_id for r in collected.records if not r.ok] == [bad]
    assert (cb.stats.prefetched, cb.stats.unwritten) == (1, 1)


def test_the_pods_copy_never_shortens_and_stays_bounded(tag: str) -> None:
    group, model_list = group_of(tag)
    local = local_cooldowns(router_for(model_list, None, tag))
    now = time.time()

    def value(ts: float, ct: float) -> dict[str, Any]:
        return {"exception_received": "x", "status_code": "429", "timestamp": ts, "cooldown_time": ct}

    bad = f"{group}-bad"
    assert local.apply(bad, value(now, 60))
    assert not local.apply(bad, value(now + 1, 5))  # ends earlier: kept the later end
    assert not local.apply(bad, value(now - 100, 50))  # already over: never resurrected
    assert local.apply(bad, value(now + 1, 120))
    held = local.held(bad)
    assert held is not None and held["cooldown_time"] == 120
    local.max_entries = 3
    for i in range(10):
        local.apply(f"other-{i}", value(now, 10 + i))
    assert len(local) == 3  # the soonest to end went first
    assert [d for d in (bad, "other-9", "other-8", "other-7", "other-0") if local.held(d) is not None] == [
        bad, "other-9", "other-8"]
