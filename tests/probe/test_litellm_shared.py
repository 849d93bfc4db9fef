"""The real pinned LiteLLM takes coolant's probe results and makes no probe call of its own.

LiteLLM's proxy background health loop (`proxy_server._run_background_health_check`), with
`use_shared_health_check`, calls `SharedHealthCheckManager.perform_shared_health_check` every iteration: it
returns the cached `health_check_results` when fresh and only otherwise takes `health_check_lock` and probes
(`perform_health_check`).

- `test_proxy_background_health_loop_...` runs that loop itself, in a LiteLLM proxy process configured by the
  proxy's own config loader (tests/probe/litellm_proxy.py), for two iterations against the test Redis holding
  coolant's fresh key: no upstream call, no lock, and the proxy's health state (`health_check_results`, what
  its `GET /health` serves) is coolant's document. Positive control: without coolant's key the same loop
  probes the upstream in its first iteration and reaches the same verdicts.
- `test_proxy_shared_health_check_...` calls the manager's method in-process, with a `RedisCache` under a
  namespace as a proxy's cache may have, and checks LiteLLM's own document format against coolant's.

Both need LiteLLM's proxy dependencies (coolant's [test] extra): missing, they fail under REQUIRE_INTEGRATION=1.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import orjson
import pytest
import redis.asyncio as redis_asyncio
import yaml

from coolant.config.runtime import RedisSettings
from coolant.probe.service import Prober, ProbeSettings
from coolant.probe.targets import load_targets
from tests.probe import litellm_proxy
from tests.support.upstream import FakeOpenAI

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network fetch of the cost map at import
litellm_proxy.require("litellm", "fastapi")  # else: fail under REQUIRE_INTEGRATION=1, skip otherwise

from litellm.caching.redis_cache import RedisCache  # noqa: E402
from litellm.proxy.health_check_utils import shared_health_check_manager as shared_module  # noqa: E402
from litellm.proxy.health_check_utils.shared_health_check_manager import SharedHealthCheckManager  # noqa: E402

pytestmark = pytest.mark.integration

DEPS = ["d0", "d1", "d2", "d3"]
STATUSES = {"d2": 401, "d3": 500}


def model_list(up: FakeOpenAI) -> list[dict[str, Any]]:
    return [
        {
            "model_name": f"group-{d}",
            "litellm_params": {"model": f"openai/model-{d}", "api_base": up.base(d), "api_key": "sk-shared-test-01"},
            "model_info": {"id": d},
        }
        for d in DEPS
    ]


def ids(endpoints: Any) -> list[str]:
    return sorted(e["model_id"] for e in endpoints)


async def coolant_round(tmp_path: Path, kafka_bootstrap: str, redis_url: str, upstream: FakeOpenAI, tag: str) -> None:
    """One `coolant probe --once` round: health records to Kafka, `<tag>:health_check_results` in Redis."""
    config = tmp_path / "coolant.yaml"
    config.write_text(yaml.safe_dump({"model_list": model_list(upstream)}))
    _, targets, _ = load_targets(config)
    settings = ProbeSettings(
        prober_id="ll-test", interval=60.0, timeout=5.0, group=f"{tag}-probers", topic_prefix=f"{tag}.",
        redis=RedisSettings(url=redis_url, key_prefix=f"{tag}:"), session_timeout=6.0, once=True,
    )
    await asyncio.wait_for(Prober(targets, settings, {"bootstrap_servers": kafka_bootstrap}).run(asyncio.Event()), 60)


async def test_proxy_shared_health_check_uses_coolant_results_and_probes_nothing(
    tmp_path: Path, kafka_bootstrap: str, redis_url: str, upstream: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    tag = f"probe-ll-{uuid.uuid4().hex[:10]}"
    models = model_list(upstream)
    await coolant_round(tmp_path, kafka_bootstrap, redis_url, upstream, tag)
    assert upstream.count() == len(DEPS)  # coolant probed each deployment once

    probe_rounds: list[int] = []
    real_probe = shared_module.perform_health_check

    async def counting_probe(*args: Any, **kwargs: Any) -> Any:
        probe_rounds.append(len(kwargs["model_list"]))
        return await real_probe(*args, **kwargs)

    monkeypatch.setattr(shared_module, "perform_health_check", counting_probe)
    url = urlparse(redis_url)
    cache = RedisCache(host=url.hostname, port=url.port, namespace=tag)
    manager = SharedHealthCheckManager(redis_cache=cache)
    client = redis_asyncio.from_url(redis_url)
    try:
        stored = orjson.loads(orjson.loads(await client.get(f"{tag}:health_check_results")))
        healthy, unhealthy, _ = await manager.perform_shared_health_check(model_list=models, details=True)
        # LiteLLM used coolant's results: no upstream call, no lock taken, the very same lists
        assert upstream.count() == len(DEPS)
        assert await client.exists(f"{tag}:health_check_lock") == 0
        assert list(healthy) == stored["healthy_endpoints"] and list(unhealthy) == stored["unhealthy_endpoints"]
        assert ids(healthy) == ["d0", "d1"] and ids(unhealthy) == ["d2", "d3"]
        assert {e["model_id"]: e["exception_status"] for e in unhealthy} == STATUSES

        assert probe_rounds == []  # LiteLLM never entered its own probe path

        # positive control: without coolant's key the same call takes the lock and runs LiteLLM's own round
        await client.delete(f"{tag}:health_check_results")
        before = {d: upstream.count(d) for d in DEPS}
        own_healthy, own_unhealthy, _ = await manager.perform_shared_health_check(model_list=models, details=True)
        assert probe_rounds == [len(DEPS)]
        theirs = orjson.loads(orjson.loads(await client.get(f"{tag}:health_check_results")))
        assert theirs["checked_by"] == manager.pod_id  # LiteLLM's writer stores it as coolant does: JSON in a string
        assert set(stored) == set(theirs)
        # LiteLLM's own round reached the upstream and agrees with coolant
        assert all(upstream.count(d) > before[d] for d in DEPS)
        assert ids(own_healthy) == ids(healthy) and ids(own_unhealthy) == ids(unhealthy)
        assert {e["model_id"]: e["exception_status"] for e in own_unhealthy} == STATUSES
    finally:
        await client.delete(f"{tag}:health_check_results", f"{tag}:coolant:probe:results", f"{tag}:health_check_lock")
        await client.aclose()


async def run_proxy_loop(tmp_path: Path, config: Path, cycles: int) -> dict[str, Any]:
    """tests/probe/litellm_proxy.py in its own process; the upstream keeps answering in this event loop."""
    out = tmp_path / f"proxy-loop-{uuid.uuid4().hex[:6]}.json"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, litellm_proxy.__file__, str(config), str(cycles), str(out),
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    try:
        _, err = await asyncio.wait_for(proc.communicate(), 180)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    if proc.returncode == litellm_proxy.IMPORT_FAILED:
        litellm_proxy.unavailable(err.decode(errors="replace").strip()[-1500:])
    assert proc.returncode == 0, err.decode(errors="replace")[-3000:]
    result: dict[str, Any] = json.loads(out.read_text())
    return result


async def test_proxy_background_health_loop_takes_coolant_results_and_probes_nothing(
    tmp_path: Path, kafka_bootstrap: str, redis_url: str, upstream: FakeOpenAI
) -> None:
    tag = f"probe-loop-{uuid.uuid4().hex[:10]}"
    url = urlparse(redis_url)
    assert url.hostname is not None and url.port is not None
    proxy_config = tmp_path / "proxy.yaml"
    proxy_config.write_text(yaml.safe_dump({
        "model_list": model_list(upstream),
        "general_settings": {
            "background_health_checks": True,
            "use_shared_health_check": True,
            "health_check_interval": 1,  # seconds between the loop's iterations
            "coordination_redis": {"host": url.hostname, "port": url.port, "namespace": tag},
        },
    }))
    await coolant_round(tmp_path, kafka_bootstrap, redis_url, upstream, tag)
    assert upstream.count() == len(DEPS)
    client = redis_asyncio.from_url(redis_url)
    try:
        stored = orjson.loads(orjson.loads(await client.get(f"{tag}:health_check_results")))

        run = await run_proxy_loop(tmp_path, proxy_config, cycles=2)
        assert run["settings"] == {"use_background_health_checks": True, "use_shared_health_check": True,
                                   "health_check_interval": 1, "redis_namespace": tag}
        assert len(run["states"]) == 2
        # two iterations of LiteLLM's loop: no upstream call, no lock, none of its own probe rounds
        assert upstream.count() == len(DEPS)
        assert await client.exists(f"{tag}:health_check_lock") == 0
        assert run["shared_rounds"] == [] and run["direct_rounds"] == []
        for state in run["states"]:  # the proxy's health state is coolant's document
            assert state == {
                "healthy_endpoints": stored["healthy_endpoints"],
                "unhealthy_endpoints": stored["unhealthy_endpoints"],
                "healthy_count": stored["healthy_count"],
                "unhealthy_count": stored["unhealthy_count"],
            }
        assert ids(run["states"][-1]["healthy_endpoints"]) == ["d0", "d1"]
        assert {e["model_id"]: e["exception_status"] for e in run["states"][-1]["unhealthy_endpoints"]} == STATUSES

        # positive control: without coolant's key the same loop probes the upstream itself in its first iteration
        await client.delete(f"{tag}:health_check_results")
        before = {d: upstream.count(d) for d in DEPS}
        own = await run_proxy_loop(tmp_path, proxy_config, cycles=2)
        assert own["shared_rounds"] == [len(DEPS)]  # one round (the second iteration reads the key it wrote)
        assert all(upstream.count(d) > before[d] for d in DEPS)
        first = own["states"][0]
        assert ids(first["healthy_endpoints"]) == ids(stored["healthy_endpoints"])
        assert {e["model_id"]: e["exception_status"] for e in first["unhealthy_endpoints"]} == STATUSES
    finally:
        await client.delete(f"{tag}:health_check_results", f"{tag}:coolant:probe:results", f"{tag}:health_check_lock")
        await client.aclose()
