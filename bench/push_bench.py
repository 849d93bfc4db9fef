"""How fast a cooldown decided on one pod reaches every pod of a fleet: the fast path plus the push.

    scripts/redis-local start
    .venv/bin/python bench/push_bench.py [--pods 10] [--decisions 200] [--baseline 30]

--pods LiteLLM 1.110.2 Routers ("pods") in this process share one Redis; each has its own `CoolantCallback`
with its own push subscription (one Redis pub/sub connection per pod, as separate proxies would have). Pod 0's
callback also has the policy, so it decides the one-record rules itself (the fast path). Each decision is a
real request on pod 0 that meets a 429 (LiteLLM `mock_response`) in a group of two deployments; a new group
each time, so every decision is a new cooldown.

Measured per decision: from the moment LiteLLM hands pod 0's callback the failure (the deciding record is
published inside that hook) to the moment each pod's router holds the cooldown (its copy of coolant's
cooldowns took it: from then on every routing decision of that pod skips the deployment, which
tests/litellm/test_litellm_push.py checks on real Routers). The fleet figure of a decision is its slowest pod.

--hook-cost N: then N calls of pod 0's success hook (kwargs captured from a real request; the records go to a
null publisher), timed while the pod's push subscription runs: wall and thread CPU time per call.

--kafka N: the two transports, bare, for comparison: N messages produced to a fresh one-partition topic, read
by --pods consumers without a consumer group (each assigned the partition at its end), timed from the send to
the last consumer's delivery; then N messages published on a Redis channel with --pods subscribers.

--baseline N: N more decisions with the push off on the other pods, timed until each pod's own LiteLLM
cooldown read (Redis, at most once a second per key) shows the cooldown: what LiteLLM alone offers.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import litellm  # noqa: E402
import redis.asyncio as redis_asyncio  # noqa: E402
from litellm.integrations.custom_logger import CustomLogger  # noqa: E402

from coolant.config.loader import parse_config  # noqa: E402
from coolant.integrations.litellm import CoolantCallback  # noqa: E402
from coolant.integrations.litellm.cooldowns import LocalCooldowns, local_cooldowns  # noqa: E402

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:16379/0")
MESSAGES = [{"role": "user", "content": "hi"}]

litellm.suppress_debug_info = True


class NullSink:
    """Takes every record (the Kafka side is fleet_compare's subject)."""

    def publish(self, record: object) -> bool:
        return True


def model_list(tag: str, n: int) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        group = f"{tag}-g{i}"
        for dep, mock in ((f"{group}-bad", "litellm.RateLimitError"), (f"{group}-ok", "hi")):
            params = {"model": "openai/gpt-4o-mini", "api_key": "sk-bench", "mock_response": mock}
            out.append({"model_name": group, "model_info": {"id": dep}, "litellm_params": params})
    return out


class Seen:
    """Wraps a pod's `LocalCooldowns.apply` to note when each deployment's cooldown arrived."""

    def __init__(self, local: LocalCooldowns) -> None:
        self.at: dict[str, float] = {}
        self.arrived = asyncio.Event()
        original = local.apply

        def apply(deployment_id: str, value: Any) -> bool:
            took = original(deployment_id, value)
            if took and deployment_id not in self.at:
                self.at[deployment_id] = time.perf_counter()
                self.arrived.set()
            return took

        local.apply = apply  # type: ignore[method-assign]


def pct(values: list[float], p: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[p - 1] if len(values) > 1 else values[0]


async def fail_once(router: Any, group: str) -> None:
    """Requests on `group` until one meets the bad deployment (the ok one answers the others)."""
    while True:
        try:
            await router.acompletion(model=group, messages=MESSAGES)
        except Exception:
            return


async def fan_out(readers: list[Any], send: Any, got: dict[int, list[float]], pods: int, n: int,
                  settle: float) -> list[float]:
    """Run the readers, send message 0..n-1 one at a time, and return each one's ms until every reader had it."""
    tasks = [asyncio.create_task(r) for r in readers]
    await asyncio.sleep(settle)
    lat = []
    try:
        for i in range(n):
            sent = time.perf_counter()
            await send(i)
            while len(got.get(i, ())) < pods:
                await asyncio.sleep(0.001)
            lat.append((max(got[i]) - sent) * 1000.0)
            await asyncio.sleep(0.02)
    finally:
        for t in tasks:
            t.cancel()
    return lat


async def kafka_transport(pods: int, n: int, tag: str) -> str:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    from tests.support.kafka import create_topics, delete_topics

    bootstrap = os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:19092")
    prefix = f"{tag}k."
    await create_topics(bootstrap, prefix, 1)
    topic = f"{prefix}cooldowns"
    part = TopicPartition(topic, 0)
    consumers = [AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=100)
                 for _ in range(pods)]
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
    got: dict[int, list[float]] = {}
    try:
        await producer.start()
        for c in consumers:
            await c.start()
            c.assign([part])
            await c.seek_to_end(part)

        async def read(c: Any) -> None:
            async for msg in c:
                got.setdefault(int(msg.value), []).append(time.perf_counter())

        lat = await fan_out([read(c) for c in consumers], lambda i: producer.send_and_wait(topic, str(i).encode()),
                            got, pods, n, settle=1.0)  # settle: every consumer at the end and fetching
        return (f"kafka, {pods} consumers without a group, fetch_max_wait_ms=100: send -> every consumer has it: "
                f"p50 {pct(lat, 50):.1f} ms, p99 {pct(lat, 99):.1f} ms ({n} messages)")
    finally:
        await producer.stop()
        for c in consumers:
            await c.stop()
        await delete_topics(bootstrap, [prefix])


async def pubsub_transport(pods: int, n: int, tag: str) -> str:
    """The same as `kafka_transport` over Redis pub/sub: one subscriber connection per pod."""
    clients = [redis_asyncio.from_url(REDIS_URL) for _ in range(pods + 1)]
    channel = f"{tag}:transport"
    got: dict[int, list[float]] = {}
    subs = [c.pubsub() for c in clients[1:]]
    try:
        for sub in subs:
            await sub.subscribe(channel)

        async def read(sub: Any) -> None:
            async for msg in sub.listen():
                if msg["type"] == "message":
                    got.setdefault(int(msg["data"]), []).append(time.perf_counter())

        lat = await fan_out([read(sub) for sub in subs], lambda i: clients[0].publish(channel, str(i)), got, pods, n,
                            settle=0.5)
        return (f"redis pub/sub, {pods} subscribers: publish -> every subscriber has it: p50 {pct(lat, 50):.1f} ms, "
                f"p99 {pct(lat, 99):.1f} ms ({n} messages)")
    finally:
        for sub in subs:
            with contextlib.suppress(Exception):
                await sub.aclose()  # type: ignore[no-untyped-call]
        for c in clients:
            await c.aclose()


class Capture(CustomLogger):
    """Keeps the arguments of the last success hook call."""

    args: tuple[Any, ...] = ()

    async def async_log_success_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
        self.args = (kwargs, response_obj, start_time, end_time)


async def hook_cost(router: Any, cb: CoolantCallback, group: str, n: int, label: str) -> str:
    capture = Capture()
    saved = list(litellm.callbacks)
    litellm.callbacks = [capture]
    try:
        while not capture.args:
            await router.acompletion(model=group, messages=MESSAGES, mock_response="hi")
            await asyncio.sleep(0.05)
    finally:
        litellm.logging_callback_manager.remove_callback_from_all_lists(capture)
        litellm.callbacks = saved
    wall: list[float] = []
    cpu: list[float] = []
    for i in range(n):
        t, c = time.perf_counter_ns(), time.thread_time_ns()
        await cb.async_log_success_event(*capture.args)
        cpu.append((time.thread_time_ns() - c) / 1000.0)
        wall.append((time.perf_counter_ns() - t) / 1000.0)
        if i % 100 == 0:
            await asyncio.sleep(0)  # let the feed and LiteLLM's own tasks run between calls, as under traffic
    return (f"success hook, {n} calls, {label}, push subscription running (µs): wall p50 {pct(wall, 50):.1f}, "
            f"p99 {pct(wall, 99):.1f}; thread CPU p50 {pct(cpu, 50):.1f}, p99 {pct(cpu, 99):.1f}")


async def main_async(a: argparse.Namespace) -> None:
    tag = f"pb{uuid.uuid4().hex[:6]}"
    namespace = f"{tag}:"
    total = a.decisions + a.baseline
    models = model_list(tag, max(total, 1))
    policy = parse_config({"model_list": models, "router_settings": {"cooldown_time": 60}}).policy
    u = urlparse(REDIS_URL)
    routers = [litellm.Router(model_list=models, redis_host=u.hostname, redis_port=u.port, num_retries=0,
                              cache_kwargs={"namespace": tag}, disable_cooldowns=True) for _ in range(a.pods)]
    callbacks = [CoolantCallback(publisher=NullSink(), policy=policy if i == 0 else None, redis_url=REDIS_URL,
                                 redis_key_prefix=namespace, routers=[r], gateway=f"pod-{i}")
                 for i, r in enumerate(routers)]
    seen = [Seen(local_cooldowns(r)) for r in routers]
    hook_at: dict[str, float] = {}
    pod0 = callbacks[0]
    original = pod0.async_log_failure_event

    async def timed(kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
        dep = kwargs.get("litellm_params", {}).get("model_info", {}).get("id")
        hook_at[dep] = time.perf_counter()
        await original(kwargs, response_obj, start_time, end_time)

    pod0.async_log_failure_event = timed  # type: ignore[method-assign]
    litellm.callbacks = [pod0]
    client = redis_asyncio.from_url(REDIS_URL)
    try:
        feeds = [await cb.start_push() for cb in callbacks]
        await asyncio.gather(*(asyncio.wait_for(f.subscribed.wait(), 10) for f in feeds if f is not None))
        await routers[0].acompletion(model=f"{tag}-g0", messages=MESSAGES, mock_response="hi")  # warm up
        fleet: list[float] = []
        per_pod: list[float] = []
        for i in range(a.decisions):
            group = f"{tag}-g{i}"
            bad = f"{group}-bad"
            await fail_once(routers[0], group)
            while any(bad not in s.at for s in seen):
                for s in seen:
                    s.arrived.clear()
                if all(bad in s.at for s in seen):
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.gather(*(s.arrived.wait() for s in seen if bad not in s.at)), 5)
            lat = [(s.at[bad] - hook_at[bad]) * 1000.0 for s in seen]
            fleet.append(max(lat))
            per_pod.extend(lat[1:])
            await asyncio.sleep(a.gap)
        if a.decisions:
            print(f"push: {a.decisions} decisions (429 on a group of 2, decided on pod 0 by the fast path), "
                  f"{a.pods} pods, one Redis pub/sub subscription each")
            print(f"  failure hook on pod 0 -> every pod's router holds it: p50 {pct(fleet, 50):.2f} ms, "
                  f"p99 {pct(fleet, 99):.2f} ms, max {max(fleet):.2f} ms")
            print(f"  -> one sibling pod: p50 {pct(per_pod, 50):.2f} ms, p99 {pct(per_pod, 99):.2f} ms")
            own = [(seen[0].at[f"{tag}-g{i}-bad"] - hook_at[f"{tag}-g{i}-bad"]) * 1000 for i in range(a.decisions)]
            print(f"  pod 0 itself (before its failure hook returned): p50 {pct(own, 50):.3f} ms, "
                  f"p99 {pct(own, 99):.3f} ms")
        if a.baseline:
            for cb in callbacks[1:]:
                await cb.aclose()
            base: list[float] = []
            for i in range(a.decisions, total):
                group = f"{tag}-g{i}"
                bad = f"{group}-bad"
                for r in routers[1:]:  # as in a fleet under traffic, each pod has just read the key
                    await r.health().cooldowns.async_get_active_cooldowns([bad], None)
                await fail_once(routers[0], group)
                t0 = hook_at[bad]
                pending = set(range(1, a.pods))
                worst = 0.0
                while pending:
                    for k in list(pending):
                        if await routers[k].health().cooldowns.async_get_active_cooldowns([bad], None):
                            worst = max(worst, time.perf_counter() - t0)
                            pending.discard(k)
                    await asyncio.sleep(0.005)
                base.append(worst * 1000.0)
            print(f"without the push ({a.baseline} decisions): every other pod's LiteLLM Redis read shows it after "
                  f"p50 {pct(base, 50):.0f} ms, p99 {pct(base, 99):.0f} ms, max {max(base):.0f} ms")
        if a.kafka:
            print(await kafka_transport(a.pods, a.kafka, tag))
            print(await pubsub_transport(a.pods, a.kafka, tag))
        if a.hook_cost:
            print(await hook_cost(routers[0], pod0, f"{tag}-g0", a.hook_cost, "null publisher"))
            if a.hook_kafka:
                from coolant.publish import Publisher
                from tests.support.kafka import create_topics, delete_topics

                await create_topics(os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:19092"), f"{tag}h.", 1)

                kafka_pod = CoolantCallback(publisher=Publisher(os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:19092"),
                                                                topic_prefix=f"{tag}h."),
                                            policy=policy, redis_url=REDIS_URL, redis_key_prefix=namespace,
                                            routers=[routers[0]], gateway="pod-0k")
                feed = await kafka_pod.start_push()
                assert feed is not None
                await asyncio.wait_for(feed.subscribed.wait(), 10)
                pub = kafka_pod.publisher
                await pub.start()
                try:
                    print(await hook_cost(routers[0], kafka_pod, f"{tag}-g0", a.hook_cost, "Kafka publisher"))
                    print(f"  publisher {pub.stats}")
                finally:
                    await pub.stop(5.0)
                    await kafka_pod.aclose()
                    await delete_topics(os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:19092"), [f"{tag}h."])
        stats = [f.stats for f in feeds if f is not None]
        print(f"feeds: received {sum(s.received for s in stats)}, applied {sum(s.applied for s in stats)}, "
              f"invalid {sum(s.invalid for s in stats)}, down {sum(s.down for s in stats)}; pod 0 {pod0.stats}")
    finally:
        litellm.callbacks = []
        litellm.logging_callback_manager.remove_callback_from_all_lists(pod0)
        for cb in callbacks:
            await cb.aclose()
        keys = [k async for k in client.scan_iter(match=f"{tag}*")]
        if keys:
            await client.delete(*keys)
        await client.aclose()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pods", type=int, default=10)
    p.add_argument("--decisions", type=int, default=200, help="decisions timed with the push")
    p.add_argument("--baseline", type=int, default=30, help="decisions timed without it (0: skip)")
    p.add_argument("--kafka", type=int, default=0, help="messages timed over Kafka without a group (0: skip)")
    p.add_argument("--hook-kafka", action="store_true", help="also time the hook with a real Kafka publisher")
    p.add_argument("--hook-cost", type=int, default=5000, help="success hook calls timed (0: skip)")
    p.add_argument("--gap", type=float, default=0.02, help="seconds between two decisions")
    asyncio.run(main_async(p.parse_args()))


if __name__ == "__main__":
    main()
