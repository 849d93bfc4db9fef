"""Run only by test_testcontainers.py, in a pytest with KAFKA_BOOTSTRAP and REDIS_URL unset: the session fixtures
(tests/conftest.py) must have started containers of KAFKA_TEST_IMAGE and REDIS_TEST_IMAGE, and those must serve."""

from __future__ import annotations

import json
import os

import redis

from tests.containers_support import docker
from tests.support.kafka import produce, read_topic
from tests.support.records import uid


def _container_env(image: str) -> list[str]:
    ids = docker("ps", "--filter", f"ancestor={image}", "--format", "{{.ID}}").split()
    return [e for i in ids for e in json.loads(docker("inspect", "--format", "{{json .Config.Env}}", i))] + [
        " ".join(json.loads(docker("inspect", "--format", "{{json .Config.Cmd}}", i)) or []) for i in ids]


def test_fixtures_are_containers(kafka_bootstrap: str, redis_url: str) -> None:
    assert "KAFKA_BOOTSTRAP" not in os.environ and "REDIS_URL" not in os.environ
    kafka_port = kafka_bootstrap.rsplit(":", 1)[1]
    assert any(e.startswith("KAFKA_LISTENERS=") and f":{kafka_port}," in e
               for e in _container_env(os.environ["KAFKA_TEST_IMAGE"])), kafka_bootstrap
    redis_port = redis_url.rsplit(":", 1)[1].split("/")[0]
    assert any(f"--port {redis_port} " in e for e in _container_env(os.environ["REDIS_TEST_IMAGE"])), redis_url


async def test_kafka_and_redis_serve(kafka_bootstrap: str, redis_url: str) -> None:
    topic = f"tc-{uid()}"
    await produce(kafka_bootstrap, topic, [(b"k", b"hello")])
    assert [m.value for m in await read_topic(kafka_bootstrap, topic)] == [b"hello"]
    client = redis.Redis.from_url(redis_url)
    try:
        assert client.ping()
    finally:
        client.close()
