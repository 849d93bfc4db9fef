"""Recovery that probes (RC1-RC5), end to end: a `coolant worker` with `coolant.recovery`, a `coolant probe` with
its cooled cadence against a fake upstream, real Kafka and Redis.

A deployment cooled by a real failure is probed every --cooled-interval seconds while routers see it cooled;
failing probes hold the cooldown past its own end (reason `health_check` records), and once the upstream answers
again two healthy probes release it: LiteLLM's key is gone while the hold would still be in force, the release
marker is set and every pod hears the release on the push channel. The engine fed the very records the worker
decided (the outcome and the prober's health records) makes the same cooldowns and the same release.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any

import orjson
import pytest
import yaml
from redis.asyncio import Redis

from coolant.config.loader import load_config
from coolant.io.materializer import cooldown_channel
from coolant.processors import Engine
from coolant.schemas import Health, Outcome, encode, from_dict, to_dict
from coolant.topics import Topics
from tests.support.kafka import produce, read_json, wait_caught_up
from tests.support.records import ROOT
from tests.support.upstream import FakeOpenAI
from tests.support.waiting import wait_for
from tests.support.worker import Case

pytestmark = pytest.mark.integration

ROUTER_COOLDOWN = 5
EXTEND = 20
"""Longer than the real cooldown, so the failing probes hold it, and long enough that the release is early."""
STATUSES = {"dep-a": 503}


def write_config(case: Case, up: FakeOpenAI) -> None:
    model_list = [{"model_name": "grp", "litellm_params": {"model": f"openai/m-{dep}", "api_base": up.base(dep),
                                                           "api_key": "sk-probe-recovery-test"},
                   "model_info": {"id": dep}} for dep in ("dep-a", "dep-b")]
    raw = {"model_list": model_list, "router_settings": {"cooldown_time": ROUTER_COOLDOWN},
           "coolant": {"recovery": {"release_after": 2, "extend": EXTEND, "max_hold": 60}}}
    case.config.write_text(yaml.safe_dump(raw))


def start_prober(case: Case, bootstrap: str, redis_url: str, log: Any) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "coolant.cli", "probe", "--config", str(case.config), "--bootstrap", bootstrap,
           "--redis-url", redis_url, "--redis-key-prefix", case.key_prefix, "--topic-prefix", case.prefix,
           "--group", f"{case.app_id}-probers", "--session-timeout", "6", "--timeout", "2", "--interval", "3600",
           "--cooled-interval", "0.5", "--prober-id", "it-prober"]
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)


async def test_probes_hold_then_release_a_cooled_deployment(
    case: Case, kafka_bootstrap: str, redis_url: str, upstream: FakeOpenAI
) -> None:
    write_config(case, upstream)
    topics = Topics(case.prefix)
    w = await case.worker("a", kafka_bootstrap, redis_url=redis_url)
    await w.wait_ready()
    client = Redis.from_url(redis_url)
    pubsub = client.pubsub()
    await pubsub.subscribe(cooldown_channel(case.key_prefix))
    key = f"{case.key_prefix}deployment:dep-a:cooldown"
    log_path = case.config.parent / "prober.log"
    log = log_path.open("wb")
    prober = start_prober(case, kafka_bootstrap, redis_url, log)

    def logs() -> str:
        return f"{case.logs()}\n--- prober ---\n{log_path.read_text()[-3000:]}\nupstream calls: {upstream.names()}"
    try:
        async def assigned() -> bool:
            return "assigned partitions" in log_path.read_text()

        await wait_for(assigned, "the prober owning every deployment", 90, 0.2, logs)
        failed = Outcome(event_id="real-1", ts=time.time(), deployment_id="dep-a", model_group="grp", ok=False,
                         status_code=401, exception_type="AuthenticationError")
        await produce(kafka_bootstrap, case.prefix + "outcomes", [(b"dep-a", encode(failed))])

        async def held() -> list[dict[str, Any]] | None:
            cds = await read_json(kafka_bootstrap, case.cooldowns)
            return cds if any(c["reason"] == "health_check" for c in cds) else None

        holds = await wait_for(held, "a failing probe holding dep-a", 60, 0.2, logs)
        upstream.failing.pop("dep-a")  # the deployment heals

        async def released() -> bytes | None:
            return await client.get(f"{case.key_prefix}coolant:released:dep-a")

        mark = await wait_for(released, "dep-a released by its probes", 60, 0.2, logs)
        assert await client.get(key) is None
        assert float(mark) < max(c["until"] for c in holds)  # early: the hold in force had time to run
        messages = []  # everything announced so far (cooldown writes and the release), without waiting for more
        while (m := await pubsub.get_message(ignore_subscribe_messages=True, timeout=0.5)) is not None or (
            not messages
        ):
            if m is not None:
                messages.append(orjson.loads(m["data"]))
        assert {"deployment_id": "dep-a", "released": float(mark)} in messages, messages
    finally:
        prober.terminate()
        prober.wait(30)
        log.close()
        await pubsub.aclose()
        await client.aclose()

    # the engine over the very records the worker decided: same cooldowns, same release
    await wait_caught_up(kafka_bootstrap, case.app_id, topics.health, on_timeout=case.logs)
    probes = [from_dict(p) for p in await read_json(kafka_bootstrap, topics.health)]
    # the one round at start-up probed both; the cooled cadence only the cooled deployment
    assert all(isinstance(p, Health) for p in probes)
    assert sum(p.deployment_id == "dep-b" for p in probes) == 1 and len(probes) > 4
    engine = Engine(load_config(case.config).policy)
    steps = [engine.feed(r) for r in sorted([failed, *probes], key=lambda r: r.ts)]
    live = await read_json(kafka_bootstrap, case.cooldowns)
    assert [to_dict(s.cooldown) for s in steps if s.cooldown is not None] == live
    releases = [s.release for s in steps if s.release is not None]
    assert [r.ts for r in releases] == [float(mark)]

