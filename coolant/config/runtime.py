"""Runtime settings: where the worker and every other command connect (Kafka, Redis), and secrets.

Secret fields stay unresolved (`os.environ/NAME`) and out of repr until `resolve_secret` at the edge.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from coolant.config.errors import ConfigError

SECRET_REF_PREFIX = "os.environ/"
"""LiteLLM's marker for "read this value from the environment"."""

DEFAULT_KAFKA_BOOTSTRAP = "127.0.0.1:19092"
DEFAULT_REDIS_URL = "redis://127.0.0.1:16379/0"

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI")


def _env_kafka_bootstrap() -> str:
    return os.environ.get("KAFKA_BOOTSTRAP") or DEFAULT_KAFKA_BOOTSTRAP


def _env_redis_url() -> str:
    return os.environ.get("REDIS_URL") or DEFAULT_REDIS_URL


def _env(name: str) -> Callable[[], str | None]:
    """A field default read from the environment when the settings are built (unset or empty: None)."""
    return lambda: os.environ.get(name) or None


def _env_flag(name: str) -> Callable[[], bool]:
    return lambda: (os.environ.get(name) or "").strip().lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True, slots=True)
class KafkaSettings:
    """aiokafka connection settings; any string may be an unresolved `os.environ/NAME`.

    What a config's `coolant.kafka` does not set comes from `COOLANT_KAFKA_*` variables, so every command
    (with or without a config) connects to a secured cluster the same way (`coolant.io.connect`).
    """

    bootstrap_servers: str = field(default_factory=_env_kafka_bootstrap)
    security_protocol: str | None = field(default_factory=_env("COOLANT_KAFKA_SECURITY_PROTOCOL"))
    sasl_mechanism: str | None = field(default_factory=_env("COOLANT_KAFKA_SASL_MECHANISM"))
    sasl_plain_username: str | None = field(default_factory=_env("COOLANT_KAFKA_SASL_USERNAME"))
    sasl_plain_password: str | None = field(default_factory=_env("COOLANT_KAFKA_SASL_PASSWORD"), repr=False)
    ssl_cafile: str | None = field(default_factory=_env("COOLANT_KAFKA_SSL_CAFILE"))
    ssl_certfile: str | None = field(default_factory=_env("COOLANT_KAFKA_SSL_CERTFILE"))
    ssl_keyfile: str | None = field(default_factory=_env("COOLANT_KAFKA_SSL_KEYFILE"))


@dataclass(frozen=True, slots=True)
class RedisSettings:
    """Redis connection for the materializer (contract §4); unset fields from `REDIS_URL` / `COOLANT_REDIS_*`.

    `url` is kept out of repr too: `redis://:password@host` is a common way to pass a password.
    TLS is on for a `rediss://` URL or `ssl: true`; the `ssl_*` files are the CA and the client certificate.
    """

    url: str = field(default_factory=_env_redis_url, repr=False)
    key_prefix: str = ""
    password: str | None = field(default_factory=_env("COOLANT_REDIS_PASSWORD"), repr=False)
    ssl: bool = field(default_factory=_env_flag("COOLANT_REDIS_SSL"))
    ssl_cafile: str | None = field(default_factory=_env("COOLANT_REDIS_SSL_CAFILE"))
    ssl_certfile: str | None = field(default_factory=_env("COOLANT_REDIS_SSL_CERTFILE"))
    ssl_keyfile: str | None = field(default_factory=_env("COOLANT_REDIS_SSL_KEYFILE"))


@dataclass(frozen=True, slots=True)
class RuntimeSettings:
    """What only the live worker needs; replay and tuning ignore it."""

    topic_prefix: str = "coolant."
    kafka: KafkaSettings = field(default_factory=KafkaSettings)
    redis: RedisSettings = field(default_factory=RedisSettings)
    web_port: int = 6066


def resolve_secret(value: str | None) -> str | None:
    """Resolve an `os.environ/NAME` reference at the edge (the worker, just before connecting).

    Anything else is returned unchanged. Unlike LiteLLM (which yields None), an unset variable
    is an error: connecting without the intended password only fails later and more obscurely.
    """
    if value is None or not value.startswith(SECRET_REF_PREFIX):
        return value
    name = value[len(SECRET_REF_PREFIX) :]
    resolved = os.environ.get(name)
    if resolved is None:
        raise ConfigError("environment", None, f"environment variable {name} is not set")
    return resolved
