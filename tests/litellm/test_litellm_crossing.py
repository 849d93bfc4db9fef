"""D7/PF cross when LiteLLM does: one real `litellm --config` proxy, retries on, LiteLLM's own cooldowns on.

The proxy runs LiteLLM's cooldown logic as it ships (its writes go to Redis under its cache namespace) and the
callback with the fast path (`COOLANT_CONFIG`: the pod decides V2.2/V2.3 on its own counters, PF of
docs/windows.md §6; its writes go under another key prefix). Two deployments of three start answering 500;
requests go one at a time, each with `num_retries: 2`, so a request can fail on both (the second failure is a
retry, which the proxy's logging hooks never hear of). PF counts the publisher exactly as that LiteLLM process
counts only if every failed retry is published: for each failing deployment, the first request after which
LiteLLM's own cooldown key exists must be the one after which coolant's does.
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
from support_litellm import MESSAGES, Proxy, deployment

from tests.support.upstream import SERVER_ERROR, FakeOpenAI

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
    group, failing = f"cx-{tag}", f"cx{tag}"
    bad = [f"cx-{tag}-c1", f"cx-{tag}-c2"]
    models = [deployment(f"cx-{tag}-a", group, fake.base("ok")),
              *(deployment(dep, group, fake.base(failing)) for dep in bad)]
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
    keys = {(side, dep): f"{prefix}deployment:{dep}:cooldown" for dep in bad
            for side, prefix in (("litellm", f"{lit_ns}:"), ("coolant", coolant_ns))}
    client = openai.OpenAI(base_url=proxy.base_url, api_key=proxy.key, max_retries=0, timeout=30)
    first: dict[tuple[str, str], int] = {}

    def look(i: int) -> None:
        first.update({k: i for k, key in keys.items() if k not in first and redis.exists(key)})

    try:
        proxy.ready()
        for _ in range(6):  # successes on every deployment first
            client.chat.completions.create(model=group, messages=MESSAGES)
        fake.failing[failing] = SERVER_ERROR
        for i in range(MAX_REQUESTS):
            with contextlib.suppress(openai.APIError):
                client.chat.completions.create(model=group, messages=MESSAGES)
            time.sleep(SETTLE)
            look(i)
            if len(first) == len(keys):
                break
        time.sleep(2 * SETTLE)  # a write on its way
        look(MAX_REQUESTS)
        failed = fake.count(failing, 500)
        assert any(side == "litellm" for side, _ in first), f"LiteLLM cooled nothing ({failed} failed calls)"
        for dep in bad:  # each failing deployment: cooled by both after the same request, or by neither
            assert first.get(("coolant", dep)) == first.get(("litellm", dep)), (dep, first, failed)
    finally:
        client.close()
        proxy.terminate()
        redis.delete(*keys.values())
        redis.close()
