"""Scenario S4 end to end: one broken key, one failed request on gateway A, and gateway B routes around it.

Real pieces only: two LiteLLM 1.110.2 Routers ("pods" A and B) with `CoolantCallback`, a `coolant worker`
subprocess (tests/support/worker.py) on unique topics, the shared Kafka and Redis, and a local fake of the
OpenAI API that answers 401 to the broken key.

Both routers run with `disable_cooldowns=True`: LiteLLM then never writes a cooldown of its own (its native
401 cooldown would otherwise reach B through the same Redis key and mask coolant), but it still reads the
`deployment:<id>:cooldown` keys and skips what they cool. So B can only learn of the failure from coolant.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any
from urllib.parse import urlparse

import orjson
import pytest
import yaml
from redis.asyncio import Redis
from support_litellm import MESSAGES, deployment

from tests.support.upstream import BAD_KEY, FakeOpenAI

litellm = pytest.importorskip("litellm")

from coolant.integrations.litellm import CoolantCallback  # noqa: E402
from tests.support.worker import Case  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore:.*ReadOnly.*:UserWarning")]

COOLDOWN = 4  # router_settings.cooldown_time of the coolant config: a 401 has no Retry-After, so T3 gives D
LEARN_WITHIN = 2.5  # pipeline (publish, worker, Redis) plus LiteLLM's Redis read interval (~1 s)
RETURN_WITHIN = 2.0  # after the cooldown's end, until B picks the deployment again


@pytest.fixture
def redis_server(redis_url: str) -> tuple[str, int]:
    u = urlparse(redis_url)
    if u.password or u.path not in ("", "/", "/0"):
        pytest.skip("these tests hand LiteLLM a bare host and port")
    return u.hostname or "127.0.0.1", u.port or 6379


async def picks(router: Any, group: str, n: int) -> set[str]:
    """The deployments `n` routing decisions of `router` choose (no request is sent)."""
    return {(await router.select(group, {}, kind="pick"))["model_info"]["id"] for _ in range(n)}


async def test_one_failure_on_a_cools_the_deployment_for_b(
    fake: FakeOpenAI, case: Case, kafka_bootstrap: str, redis_url: str, redis_server: tuple[str, int]
) -> None:
    tag = uuid.uuid4().hex[:8]
    group, good, broken = f"s4-{tag}", f"s4-{tag}-good", f"s4-{tag}-broken"
    model_list = [deployment(good, group, fake.base("ok")), deployment(broken, group, fake.base("ok"), key=BAD_KEY)]
    case.config.write_text(yaml.safe_dump({"model_list": model_list, "router_settings": {"cooldown_time": COOLDOWN}}))
    worker = await case.worker("s4", kafka_bootstrap, redis_url=redis_url)
    await worker.wait_ready()
    case.log("worker ready")

    namespace = case.key_prefix.rstrip(":")  # LiteLLM's RedisCache(namespace=ns) reads "ns:deployment:..."
    host, port = redis_server

    def router() -> Any:
        return litellm.Router(model_list=model_list, redis_host=host, redis_port=port,
                              cache_kwargs={"namespace": namespace}, disable_cooldowns=True, num_retries=0)

    router_a, router_b = router(), router()
    callback = CoolantCallback(kafka_bootstrap, topic_prefix=case.prefix, gateway="pod-a")
    saved = list(litellm.callbacks)
    litellm.callbacks = [callback]
    r = Redis.from_url(redis_url)
    try:
        assert await picks(router_b, group, 40) == {good, broken}, "B routes to both before the incident"

        # ONE failed request through A (the shuffle decides when A picks the broken deployment)
        failures = 0
        for _ in range(200):
            try:
                await router_a.acompletion(model=group, messages=MESSAGES)
            except litellm.AuthenticationError:
                failures += 1
                break
        t_fail = time.time()
        assert failures == 1
        case.log("A: one 401 from the broken deployment")

        # B, which never sent it anything, stops picking it once coolant's key is in Redis
        while True:
            if await picks(router_b, group, 30) == {good}:
                break
            assert time.time() - t_fail < 10, f"B still routes to {broken} 10 s after the failure"
            await asyncio.sleep(0.05)
        learned = time.time() - t_fail
        case.log(f"B avoids the broken deployment {learned:.2f} s after the failure on A")

        raw = await r.get(f"{case.key_prefix}coolant:cooldown:{broken}")
        assert raw is not None, "the cooldown must be coolant's (LiteLLM's own cooldowns are disabled)"
        cd = orjson.loads(raw)
        assert (cd["reason"], cd["cooldown_time"], cd["status_code"]) == ("non_retryable", COOLDOWN, 401)
        assert await r.exists(f"{case.key_prefix}deployment:{broken}:cooldown")
        assert learned < LEARN_WITHIN, f"B learned after {learned:.2f} s"

        # ... keeps avoiding it for the cooldown time: real requests, every one served by the good deployment
        served: set[str] = set()
        n = 0
        while time.time() < cd["until"] - 0.3:
            resp = await router_b.acompletion(model=group, messages=MESSAGES)
            served.add(resp._hidden_params["model_id"])
            n += 1
            await asyncio.sleep(0.02)
        assert served == {good} and n > 20
        case.log(f"B: {n} requests until the cooldown's end, all on {good}")

        # ... and routes to it again after the cooldown's end
        while broken not in await picks(router_b, group, 20):
            assert time.time() < cd["until"] + 10, "B never routes to the deployment again"
            await asyncio.sleep(0.05)
        back = time.time() - cd["until"]
        case.log(f"B picks the deployment again {back:.2f} s after the cooldown's end")
        assert back < RETURN_WITHIN
        assert callback.stats.published >= 2 and callback.stats.errors == 0
    finally:
        litellm.callbacks = saved
        litellm.logging_callback_manager.remove_callback_from_all_lists(callback)
        await callback.aclose()
        await r.aclose()
