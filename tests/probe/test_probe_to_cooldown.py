"""The optional probe -> cooldown path (spec §3.10 H1-H3), end to end: `coolant probe` against a fake upstream,
a `coolant worker` with `coolant.health.cooldown: true`, real Kafka and Redis.

A deployment whose probe fails with a 401 must be cooled (reason `health_check`, the router's `cooldown_time`
even though its own is 0, H3) on the cooldowns topic and in LiteLLM's Redis key; every probe's verdict must be in
LiteLLM's health-state map (H1) and each first verdict on the transitions topic. The live cooldowns must equal
`coolant replay` of the very health records the prober published (one policy, offline and live).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any

import orjson
import pytest
import yaml
from redis.asyncio import Redis

from coolant.topics import Topics
from tests.support.kafka import read_json, wait_caught_up
from tests.support.records import ROOT, litellm_value
from tests.support.upstream import FakeOpenAI
from tests.support.waiting import wait_for
from tests.support.worker import Case

pytestmark = pytest.mark.integration

ROUTER_COOLDOWN = 30
STATUSES = {"dep-auth": 401}
GROUPS = {"dep-auth": "grp-a", "dep-ok": "grp-a", "dep-solo": "grp-s"}


def write_config(case: Case, up: FakeOpenAI, health_cooldown: bool) -> None:
    """One config for the worker and the prober: the case's file, so `case.worker` and replay read it too."""
    model_list = []
    for dep, group in GROUPS.items():
        info: dict[str, Any] = {"id": dep}
        if dep == "dep-auth":
            info["cooldown_time"] = 0  # disables request-path cooldowns only; a probe still cools (H3)
        model_list.append({"model_name": group, "litellm_params": {
            "model": f"openai/model-{dep}", "api_base": up.base(dep), "api_key": "sk-probe-cooldown-test"},
            "model_info": info})
    raw = {"model_list": model_list, "router_settings": {"cooldown_time": ROUTER_COOLDOWN},
           "coolant": {"health": {"cooldown": health_cooldown}}}
    case.config.write_text(yaml.safe_dump(raw))


def probe_once(case: Case, bootstrap: str, redis_url: str) -> None:
    """`coolant probe --once`: this lone prober owns every partition, so it probes the whole fleet once."""
    cmd = [sys.executable, "-m", "coolant.cli", "probe", "--config", str(case.config), "--bootstrap", bootstrap,
           "--redis-url", redis_url, "--redis-key-prefix", case.key_prefix, "--topic-prefix", case.prefix,
           "--group", f"{case.app_id}-probers", "--session-timeout", "6", "--timeout", "5", "--once",
           "--prober-id", "it-prober"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, f"coolant probe failed (rc={proc.returncode}):\n{proc.stderr[-3000:]}"


async def test_a_failed_probe_cools_the_deployment_in_redis(
    case: Case, kafka_bootstrap: str, redis_url: str, upstream: FakeOpenAI
) -> None:
    write_config(case, upstream, health_cooldown=True)
    topics = Topics(case.prefix)
    w = await case.worker("a", kafka_bootstrap, redis_url=redis_url)
    await w.wait_ready()  # the worker creates the health topic with its partitions before the prober writes

    await asyncio.to_thread(probe_once, case, kafka_bootstrap, redis_url)
    assert dict(upstream.names()) == dict.fromkeys(GROUPS, 1)
    probes = await read_json(kafka_bootstrap, topics.health)
    assert sorted((p["deployment_id"], p["healthy"]) for p in probes) == [
        ("dep-auth", False), ("dep-ok", True), ("dep-solo", True)], probes
    await wait_caught_up(kafka_bootstrap, case.app_id, topics.health, on_timeout=case.logs)

    # the decision: exactly one health_check cooldown, for the 401, with the router's duration (H2, H3)
    cooldowns = await read_json(kafka_bootstrap, case.cooldowns)
    [probe] = [p for p in probes if p["deployment_id"] == "dep-auth"]
    assert [(c["deployment_id"], c["reason"]) for c in cooldowns] == [("dep-auth", "health_check")], cooldowns
    [cd] = cooldowns
    assert (cd["model_group"], cd["status_code"], cd["exception_type"]) == ("grp-a", 401, "AuthenticationError")
    assert (cd["cooldown_time"], cd["ts"], cd["until"]) == (ROUTER_COOLDOWN, probe["ts"], probe["ts"] + ROUTER_COOLDOWN)
    assert cd["trigger_event_id"] == probe["event_id"]
    assert (cd["window"]["successes"], cd["window"]["failures"]) == (0, 1)  # a probe is judged alone (D6)
    # replay of the very records the prober published decides the same, event ids included
    replayed = case.replay([orjson.dumps(p) for p in probes], name="probes")
    assert replayed == cooldowns

    # health flips: each deployment's first verdict, with the probe as evidence
    transitions = await read_json(kafka_bootstrap, topics.health_transitions)
    assert sorted((t["deployment_id"], t["previous"], t["healthy"]) for t in transitions) == [
        ("dep-auth", None, False), ("dep-ok", None, True), ("dep-solo", None, True)], transitions

    client = Redis.from_url(redis_url)
    try:
        # what routers read: LiteLLM's cooldown key, once the materializer has acknowledged the cooldown
        await wait_caught_up(kafka_bootstrap, case.app_id, case.cooldowns, on_timeout=case.logs)
        key = f"{case.key_prefix}deployment:dep-auth:cooldown"
        assert await client.get(key) == litellm_value(cd)
        assert 0 < await client.pttl(key) <= ROUTER_COOLDOWN * 1000
        for dep in ("dep-ok", "dep-solo"):
            assert await client.get(f"{case.key_prefix}deployment:{dep}:cooldown") is None

        # LiteLLM's health-state map (H1), written through its own topic: polled, with a deadline
        state_key = f"{case.key_prefix}litellm:health_check:deployment_health_state"

        async def health_map() -> dict[str, Any] | None:
            raw = await client.get(state_key)
            doc = None if raw is None else orjson.loads(raw)
            return doc if isinstance(doc, dict) and set(GROUPS) <= set(doc) else None

        state = await wait_for(health_map, f"{state_key} holding every deployment", 30, 0.2, case.logs)
        by_dep = {p["deployment_id"]: p for p in probes}
        assert state == {
            dep: {"is_healthy": dep not in STATUSES, "timestamp": by_dep[dep]["ts"],
                  "reason": "background_health_check_failed" if dep in STATUSES else ""}
            for dep in GROUPS
        }
    finally:
        await client.aclose()
    assert await w.metric("coolant_cooldowns_total", reason="health_check") == 1


async def test_without_health_cooldown_a_failed_probe_only_changes_health(
    case: Case, kafka_bootstrap: str, redis_url: str, upstream: FakeOpenAI
) -> None:
    """The control: the same probes with the default `health.cooldown: false` cool nothing (H2), health still flows."""
    write_config(case, upstream, health_cooldown=False)
    topics = Topics(case.prefix)
    w = await case.worker("a", kafka_bootstrap, redis_url=redis_url)
    await w.wait_ready()
    await asyncio.to_thread(probe_once, case, kafka_bootstrap, redis_url)
    probes = await read_json(kafka_bootstrap, topics.health)
    assert len(probes) == len(GROUPS)
    await wait_caught_up(kafka_bootstrap, case.app_id, topics.health, on_timeout=case.logs)
    assert await read_json(kafka_bootstrap, case.cooldowns) == []
    assert len(await read_json(kafka_bootstrap, topics.health_transitions)) == len(GROUPS)
    assert case.replay([orjson.dumps(p) for p in probes], name="probes") == []
