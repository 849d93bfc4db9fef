"""The fast path in a real `litellm --config` proxy process, driven by the `openai` SDK.

The proxy loads `coolant.integrations.litellm.coolant_callback` from its config, as a deployment would, with
`COOLANT_CONFIG` (the worker's config), `COOLANT_REDIS_URL` and `COOLANT_KAFKA_BOOTSTRAP` in its environment.
Its router runs with `disable_cooldowns: true`, so LiteLLM never cools anything itself: a deployment answering
429 (the fake upstream's `rl` mode) is met once, then every later request goes to the healthy ones, and the
cooldown key is in the shared Redis with the materializer's value.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from urllib.parse import urlparse

import orjson
import pytest
import yaml
from redis import Redis
from support_litellm import Proxy, deployment

from tests.support.upstream import FakeOpenAI

openai = pytest.importorskip("openai")

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]  # a proxy takes minutes to start on a loaded machine



def test_a_proxy_routes_around_a_429_after_meeting_it_once(
    fake: FakeOpenAI, tmp_path: Path, kafka_bootstrap: str, redis_url: str
) -> None:
    u = urlparse(redis_url)
    if u.password or u.path not in ("", "/", "/0"):
        pytest.skip("the proxy is handed a bare host and port")
    tag = uuid.uuid4().hex[:8]
    group = f"px-{tag}"
    models = [deployment(f"{group}-rl", group, fake.base("rl")), deployment(f"{group}-ok1", group, fake.base("ok")),
              deployment(f"{group}-ok2", group, fake.base("ok"))]
    worker_config = tmp_path / "worker.yaml"
    worker_config.write_text(yaml.safe_dump({"model_list": models, "router_settings": {"cooldown_time": 60}}))
    proxy_config = tmp_path / "proxy.yaml"
    proxy_config.write_text(yaml.safe_dump({
        "model_list": models,
        "router_settings": {"redis_host": u.hostname, "redis_port": u.port, "disable_cooldowns": True,
                            "num_retries": 0, "cooldown_time": 60},
        "litellm_settings": {"callbacks": ["coolant.integrations.litellm.coolant_callback"]},
    }))
    env = {"COOLANT_KAFKA_BOOTSTRAP": kafka_bootstrap, "COOLANT_TOPIC_PREFIX": f"{group}.",
           "COOLANT_CONFIG": str(worker_config), "COOLANT_REDIS_URL": redis_url, "COOLANT_GATEWAY_ID": "proxy-1"}
    proxy = Proxy("fast-path", proxy_config, env, tmp_path)
    redis = Redis.from_url(redis_url)
    try:
        proxy.ready()
        client = openai.OpenAI(base_url=proxy.base_url, api_key=proxy.key, max_retries=0)
        failed = served = 0
        while fake.count("rl", 429) == 0:  # until a request meets the 429
            try:
                client.chat.completions.create(model=group, messages=[{"role": "user", "content": "hi"}])
            except openai.RateLimitError:
                failed += 1
        for _ in range(30):
            client.chat.completions.create(model=group, messages=[{"role": "user", "content": "hi"}])
            served += 1
        assert (failed, served) == (1, 30)
        assert fake.count("rl", 429) == 1, fake.calls  # never picked again: the pod cooled it itself
        raw = redis.get(f"deployment:{group}-rl:cooldown")
        assert raw is not None and orjson.loads(raw)["status_code"] == "429"
        assert orjson.loads(raw)["cooldown_time"] == 17  # the upstream's Retry-After (spec T2)
    finally:
        proxy.terminate()
        redis.delete(f"deployment:{group}-rl:cooldown", f"coolant:cooldown:{group}-rl")
        redis.close()
