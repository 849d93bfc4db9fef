"""D7/PF cross when LiteLLM does: one real `litellm --config` proxy, retries on, LiteLLM's own cooldowns on.

The proxy runs LiteLLM's cooldown logic as it ships (its writes go to Redis under its cache namespace) and the
callback with the fast path (`COOLANT_CONFIG`: the pod decides V2.2/V2.3 on its own counters, PF of
docs/windows.md §6; its writes go under another key prefix). One deployment of three starts answering 500;
requests go one at a time, each with `num_retries: 2`, so a request that meets it can fail it up to three times.
PF counts the publisher exactly as that LiteLLM process counts only if every failed retry is published: the
first request after which LiteLLM's own cooldown key exists must be the one after which coolant's does.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml
from redis import Redis
from support_litellm import MESSAGES, FakeOpenAI, Proxy, deployment

openai = pytest.importorskip("openai")

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]  # a proxy takes minutes to start on a loaded machine

MAX_REQUESTS = 80
SETTLE = 0.6
"""Seconds after a request before the keys are read: the pod writes its cooldown from a task."""


def test_the_pod_cools_on_the_request_litellm_cools_on(fake: FakeOpenAI, tmp_path: Path, kafka_bootstrap: str,
                                                       redis_url: str) -> None:
    u = urlparse(redis_url)
    if u.password or u.path not in ("", "/", "/0"):
        pytest.skip("the proxy is handed a bare host and port")
    tag = uuid.uuid4().hex[:8]
    group, bad = f"cx-{tag}", f"cx-{tag}-c"
    models = [deployment(f"cx-{tag}-a", group, fake.base("ok")), deployment(f"cx-{tag}-b", group, fake.base("ok")),
              deployment(bad, group, fake.base(f"cx{tag}"))]
    worker = tmp_path / "worker.yaml"
    worker.write_text(yaml.safe_dump({"model_list": models}))
    config = tmp_path / "proxy.yaml"
    lit_ns, coolant_ns = f"lit{tag}", f"coo{tag}:"
    config.write_text(yaml.safe_dump({
        "model_list": models,
        "router_settings": {"redis_host": u.hostname, "redis_port": u.port, "cache_kwargs": {"namespace": lit_ns},
                            "num_retries": 2, "retry_after": 0},
        "litellm_settings": {"callbacks": ["coolant.integrations.litellm.coolant_callback"]},
    }))
    proxy = Proxy("crossing", config, {
        "COOLANT_KAFKA_BOOTSTRAP": kafka_bootstrap, "COOLANT_TOPIC_PREFIX": f"cx{tag}.", "COOLANT_CONFIG": str(worker),
        "COOLANT_REDIS_URL": redis_url, "COOLANT_REDIS_KEY_PREFIX": coolant_ns, "COOLANT_GATEWAY_ID": "pod-1"},
        tmp_path, timeout=30)
    redis = Redis.from_url(redis_url)
    keys = {"litellm": f"{lit_ns}:deployment:{bad}:cooldown", "coolant": f"{coolant_ns}deployment:{bad}:cooldown"}
    client = openai.OpenAI(base_url=proxy.base_url, api_key=proxy.key, max_retries=0, timeout=30)
    try:
        proxy.ready()
        for _ in range(6):  # successes on every deployment first
            client.chat.completions.create(model=group, messages=MESSAGES)
        fake.failing.add(f"cx{tag}")
        first: dict[str, int] = {}
        for i in range(MAX_REQUESTS):
            with contextlib.suppress(openai.APIError):
                client.chat.completions.create(model=group, messages=MESSAGES)
            time.sleep(SETTLE)
            first.update({side: i for side, key in keys.items() if side not in first and redis.exists(key)})
            if first:
                time.sleep(2 * SETTLE)  # the other side's write, if it is on its way
                first.update({side: i for side, key in keys.items() if side not in first and redis.exists(key)})
                break
        failed = fake.calls[(f"cx{tag}", 500)]
        assert first.get("litellm") is not None, f"LiteLLM never cooled the deployment ({failed} failed calls)"
        assert first == {"litellm": first["litellm"], "coolant": first["litellm"]}, (first, failed)
    finally:
        client.close()
        proxy.terminate()
        redis.delete(*keys.values())
        redis.close()
