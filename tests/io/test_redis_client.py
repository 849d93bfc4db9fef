"""One way to connect to the configured Redis (worker and prober): secrets resolved at the edge, TLS when asked."""

from __future__ import annotations

import pytest
import redis.asyncio as redis_asyncio

from coolant.config.runtime import RedisSettings
from coolant.io.connect import redis_client


def test_password_from_the_environment_and_tls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COOLANT_TEST_REDIS_PASSWORD", "s3cret")
    client = redis_client(RedisSettings(url="redis://cache:6380/2", password="os.environ/COOLANT_TEST_REDIS_PASSWORD",
                                        ssl=True))
    kwargs = client.connection_pool.connection_kwargs
    assert kwargs["password"] == "s3cret"
    assert kwargs["host"] == "cache" and kwargs["port"] == 6380 and kwargs["db"] == 2
    assert client.connection_pool.connection_class is redis_asyncio.SSLConnection
    assert kwargs["socket_timeout"] == 5


def test_options_override_the_defaults() -> None:
    client = redis_client(RedisSettings(url="redis://127.0.0.1:1/0"), socket_timeout=10)
    assert client.connection_pool.connection_kwargs["socket_timeout"] == 10
    assert client.connection_pool.connection_class is not redis_asyncio.SSLConnection
