"""The real pinned LiteLLM takes coolant's probe results and makes no probe call of its own.

LiteLLM's proxy background health loop (`proxy_server._run_background_health_check`), with
`use_shared_health_check`, calls `SharedHealthCheckManager.perform_shared_health_check` for every round: it
returns the cached `health_check_results` when fresh and only otherwise takes `health_check_lock` and probes
(`perform_health_check`). The full proxy cannot start here (the venv lacks `websockets`), so this test calls
that exact method, with a `RedisCache` on the test Redis, under a namespace as a proxy's cache may have.

Positive control: with the key deleted, the same call enters LiteLLM's own probe round (`perform_health_check`,
wrapped here to count its rounds) and writes its own document. That round reaches the upstream only where
LiteLLM's probe can import its proxy module (fastapi, not in coolant's test extra); there the test also
checks that LiteLLM's own verdicts equal coolant's.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import orjson
import pytest
import redis.asyncio as redis_asyncio
import yaml

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network fetch of the cost map at import
pytest.importorskip("litellm", reason="litellm (the [test] extra) is not installed: nothing to check against")

from litellm.caching.redis_cache import RedisCache
from litellm.proxy.health_check_utils import shared_health_check_manager as shared_module
from litellm.proxy.health_check_utils.shared_health_check_manager import SharedHealthCheckManager

from coolant.config import RedisSettings
from coolant.probe.service import Prober, ProbeSettings
from coolant.probe.targets import load_targets
from tests.probe.upstream import FakeUpstream

pytestmark = pytest.mark.integration

DEPS = ["d0", "d1", "d2", "d3"]
STATUSES = {"d2": 401, "d3": 500}


@pytest.fixture
async def upstream() -> AsyncIterator[FakeUpstream]:
    up = FakeUpstream(statuses=dict(STATUSES))
    await up.start()
    yield up
    await up.stop()


def model_list(up: FakeUpstream) -> list[dict[str, Any]]:
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


async def test_proxy_shared_health_check_uses_coolant_results_and_probes_nothing(
    tmp_path: Path, kafka_bootstrap: str, redis_url: str, upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    tag = f"probe-ll-{uuid.uuid4().hex[:10]}"
    config = tmp_path / "config.yaml"
    models = model_list(upstream)
    config.write_text(yaml.safe_dump({"model_list": models}))
    _, targets, _ = load_targets(config)
    settings = ProbeSettings(
        prober_id="ll-test", interval=60.0, timeout=5.0, group=f"{tag}-probers", topic_prefix=f"{tag}.",
        redis=RedisSettings(url=redis_url, key_prefix=f"{tag}:"), session_timeout=6.0, once=True,
    )
    await asyncio.wait_for(Prober(targets, settings, {"bootstrap_servers": kafka_bootstrap}).run(asyncio.Event()), 60)
    assert upstream.total() == len(DEPS)  # coolant probed each deployment once

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
        assert upstream.total() == len(DEPS)
        assert await client.exists(f"{tag}:health_check_lock") == 0
        assert list(healthy) == stored["healthy_endpoints"] and list(unhealthy) == stored["unhealthy_endpoints"]
        assert ids(healthy) == ["d0", "d1"] and ids(unhealthy) == ["d2", "d3"]
        assert {e["model_id"]: e["exception_status"] for e in unhealthy} == STATUSES

        assert probe_rounds == []  # LiteLLM never entered its own probe path

        # positive control: without coolant's key the same call takes the lock and runs LiteLLM's own round
        await client.delete(f"{tag}:health_check_results")
        own_healthy, own_unhealthy, _ = await manager.perform_shared_health_check(model_list=models, details=True)
        assert probe_rounds == [len(DEPS)]
        theirs = orjson.loads(orjson.loads(await client.get(f"{tag}:health_check_results")))
        assert theirs["checked_by"] == manager.pod_id  # LiteLLM's writer stores it as coolant does: JSON in a string
        assert set(stored) == set(theirs)
        if importlib.util.find_spec("fastapi") is not None:
            # LiteLLM's probe imports its proxy (fastapi); where it can run, it reaches the upstream and agrees
            assert upstream.total() > len(DEPS)
            assert ids(own_healthy) == ids(healthy) and ids(own_unhealthy) == ids(unhealthy)
            assert {e["model_id"]: e["exception_status"] for e in own_unhealthy} == STATUSES
    finally:
        await client.delete(f"{tag}:health_check_results", f"{tag}:coolant:probe:results", f"{tag}:health_check_lock")
        await client.aclose()
