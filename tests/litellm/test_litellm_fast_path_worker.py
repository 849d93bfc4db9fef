"""The fast path is a prefetch, end to end: a real `coolant worker` decides the same record the same way.

Pod A (a real LiteLLM 1.110.2 Router with `CoolantCallback`, fast path on) meets a 429 in a group of three and
cools the deployment itself before the failure hook returns. The worker (a subprocess on unique topics, the
shared Kafka and Redis) then emits exactly one cooldown for that record, with the id the fast path computed,
and Redis ends up holding the worker's cooldown byte for byte (LiteLLM's value, absolute expiry, detail key):
what the worker alone would have left.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml
from support_litellm import MESSAGES, deployment

from tests.support.upstream import FakeOpenAI

litellm = pytest.importorskip("litellm")

from coolant.config.loader import load_config  # noqa: E402
from coolant.integrations.litellm import CoolantCallback  # noqa: E402
from coolant.processors.prefetch import prefetch  # noqa: E402
from coolant.schemas import Outcome  # noqa: E402
from tests.support.kafka import group_lag, read_json  # noqa: E402
from tests.support.redis import redis_mismatches  # noqa: E402
from tests.support.worker import Case, Worker  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore:.*ReadOnly.*:UserWarning")]


class Keep:
    """Publishes through the real publisher and keeps a copy of each record it took."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.records: list[Outcome] = []

    def publish(self, record: Outcome) -> bool:
        ok = bool(self.inner.publish(record))
        if ok:
            self.records.append(record)
        return ok


@contextlib.asynccontextmanager
async def pod_and_worker(case: Case, kafka_bootstrap: str, redis_url: str, models: list[dict[str, Any]], name: str,
                         coolant: dict[str, Any] | None = None
                         ) -> AsyncIterator[tuple[Any, CoolantCallback, Keep, Worker]]:
    """A worker on `models` (cooldown_time 60, `coolant` options) and one pod: a Router with `disable_cooldowns`
    and the callback, fast path on (the worker's config), publishing as gateway pod-a through a `Keep`."""
    u = urlparse(redis_url)
    if u.password or u.path not in ("", "/", "/0"):
        pytest.skip("these tests hand LiteLLM a bare host and port")
    config: dict[str, Any] = {"model_list": models, "router_settings": {"cooldown_time": 60}}
    if coolant:
        config["coolant"] = coolant
    case.config.write_text(yaml.safe_dump(config))
    worker = await case.worker(name, kafka_bootstrap, redis_url=redis_url)
    await worker.wait_ready()
    router = litellm.Router(model_list=models, redis_host=u.hostname, redis_port=u.port, num_retries=0,
                            cache_kwargs={"namespace": case.key_prefix.rstrip(":")}, disable_cooldowns=True)
    from coolant.publish import Publisher

    publisher = Publisher(kafka_bootstrap, topic_prefix=case.prefix)
    await publisher.start()
    keep = Keep(publisher)
    cb = CoolantCallback(publisher=keep, config=case.config, redis_url=redis_url, redis_key_prefix=case.key_prefix,
                         routers=[router], gateway="pod-a")
    saved = list(litellm.callbacks)
    litellm.callbacks = [cb]
    try:
        yield router, cb, keep, worker
    finally:
        litellm.callbacks = saved
        litellm.logging_callback_manager.remove_callback_from_all_lists(cb)
        await cb.aclose()
        await publisher.stop(5)


@pytest.mark.parametrize("coalesce", [None, 1])
async def test_the_worker_emits_the_fast_paths_cooldown_once_and_redis_ends_up_the_workers(
    case: Case, kafka_bootstrap: str, redis_url: str, coalesce: int | None
) -> None:
    """With X8 (`coalesce`), PF7: the pod still cools the 429 itself, S shorter (59 s of 60); the worker's record
    for it has the same id and the full end, and Redis ends up holding the worker's cooldown."""
    group = f"fw-{uuid.uuid4().hex[:8]}"
    bad = f"{group}-bad"
    models = [deployment(bad, group, mock="litellm.RateLimitError"), deployment(f"{group}-ok1", group, mock="hi"),
              deployment(f"{group}-ok2", group, mock="hi")]
    options = None if coalesce is None else {"recool_coalesce": coalesce}
    async with pod_and_worker(case, kafka_bootstrap, redis_url, models, "fw", options) as (router, cb, keep, worker):
        while True:  # until a request meets the 429
            try:
                await router.acompletion(model=group, messages=MESSAGES)
            except litellm.RateLimitError:
                break
        picked = {(await router.select(group, {}, kind="pick"))["model_info"]["id"] for _ in range(30)}
        assert bad not in picked  # cooled in the pod, long before the worker could have decided
        failure = next(r for r in keep.records if not r.ok)
        pod = prefetch(load_config(case.config).policy, failure)
        assert pod is not None and cb.stats.prefetched == 1
        assert pod.until == failure.ts + 60 - (coalesce or 0)
        await keep.inner.flush(10)
        deadline = time.monotonic() + 30
        while not (emitted := [c for c in await read_json(kafka_bootstrap, case.cooldowns)
                               if c["deployment_id"] == bad]):
            assert time.monotonic() < deadline, "the worker emitted no cooldown\n" + worker.log_tail()
            await asyncio.sleep(0.2)
        assert [c["event_id"] for c in emitted] == [pod.event_id]
        assert emitted[0]["until"] == failure.ts + 60 and emitted[0]["cooldown_time"] == 60
        assert emitted[0]["trigger_event_id"] == failure.event_id
        deadline = time.monotonic() + 30
        while problems := await redis_mismatches(redis_url, case.key_prefix, {bad: emitted[0]}):
            assert time.monotonic() < deadline, problems
            await asyncio.sleep(0.1)
        deadline = time.monotonic() + 30
        while await group_lag(kafka_bootstrap, case.app_id, case.outcomes) != 0:  # the worker has seen everything
            assert time.monotonic() < deadline, "the worker did not catch up\n" + worker.log_tail()
            await asyncio.sleep(0.2)
        again = [c for c in await read_json(kafka_bootstrap, case.cooldowns) if c["deployment_id"] == bad]
        assert [c["event_id"] for c in again] == [pod.event_id]


async def test_a_pods_own_counters_cool_a_failing_deployment_before_the_worker_and_as_the_worker_does(
    case: Case, kafka_bootstrap: str, redis_url: str, fake: FakeOpenAI
) -> None:
    """PF (docs/windows.md §6): 500s are no one-record decision, but the pod counts every record it publishes;
    at the failure that makes its own counters cross, it cools the deployment itself, and the worker's cooldown
    for that record has the same id and end."""
    group = f"pf-{uuid.uuid4().hex[:8]}"
    bad = f"{group}-bad"
    models = [deployment(bad, group, fake.base("err")), deployment(f"{group}-ok1", group, fake.base("ok")),
              deployment(f"{group}-ok2", group, fake.base("ok"))]
    async with pod_and_worker(case, kafka_bootstrap, redis_url, models, "pf") as (router, cb, keep, worker):
        for _ in range(300):  # until the pod's own counters cross (the 5th failure: 5 of 5)
            with contextlib.suppress(litellm.InternalServerError):
                await router.acompletion(model=group, messages=MESSAGES)
            if cb.stats.prefetched:
                break
        assert cb.stats.prefetched == 1, cb.stats
        failures = [r for r in keep.records if not r.ok and r.deployment_id == bad]
        assert len(failures) == 5
        picked = {(await router.select(group, {}, kind="pick"))["model_info"]["id"] for _ in range(30)}
        assert bad not in picked  # cooled in the pod
        await keep.inner.flush(10)
        deadline = time.monotonic() + 30
        while not (emitted := [c for c in await read_json(kafka_bootstrap, case.cooldowns)
                               if c["deployment_id"] == bad]):
            assert time.monotonic() < deadline, "the worker emitted no cooldown\n" + worker.log_tail()
            await asyncio.sleep(0.2)
        assert emitted[0]["trigger_event_id"] == failures[-1].event_id
        assert emitted[0]["until"] == failures[-1].ts + 60
