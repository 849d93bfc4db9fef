"""coolant.io.connect: one way to connect for every command; errors name the setting, never a secret (issue 16 §5)."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from aiokafka.errors import KafkaConnectionError
from redis.exceptions import AuthenticationError, ConnectionError, ResponseError

from coolant.config.errors import ConfigError
from coolant.config.loader import parse_config
from coolant.config.runtime import KafkaSettings, RedisSettings
from coolant.io.connect import KafkaDiagnosis, kafka_client_args, kafka_problem, redis_client, redis_problem, safe_url

SECRET = "hunter2-secret"


@pytest.mark.parametrize("url", [
    f"redis://:{SECRET}@h:6379/0", f"redis://user:{SECRET}@h:6379/0", f"rediss://h:6380/0?password={SECRET}",
    f"redis://h/0?ssl_cert_reqs=none&password={SECRET}&db=1", f"redis://{SECRET}@h/0",
])
def test_safe_url_hides_every_password(url: str) -> None:
    shown = safe_url(url)
    assert SECRET not in shown and "***" in shown and "h" in shown


def test_safe_url_keeps_what_is_not_secret() -> None:
    assert safe_url("redis://127.0.0.1:16379/0?db=2") == "redis://127.0.0.1:16379/0?db=2"


def test_environment_fills_what_the_config_does_not_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COOLANT_KAFKA_SECURITY_PROTOCOL", "SASL_PLAINTEXT")
    monkeypatch.setenv("COOLANT_KAFKA_SASL_MECHANISM", "SCRAM-SHA-512")
    monkeypatch.setenv("COOLANT_KAFKA_SASL_USERNAME", "u")
    monkeypatch.setenv("COOLANT_KAFKA_SASL_PASSWORD", SECRET)
    monkeypatch.setenv("COOLANT_REDIS_PASSWORD", SECRET)
    monkeypatch.setenv("COOLANT_REDIS_SSL", "true")
    rt = parse_config({"coolant": {"kafka": {"sasl_plain_username": "from-config"}}}).runtime
    assert (rt.kafka.security_protocol, rt.kafka.sasl_plain_username) == ("SASL_PLAINTEXT", "from-config")
    assert rt.kafka.sasl_plain_password == SECRET and rt.redis.password == SECRET and rt.redis.ssl
    assert SECRET not in repr(rt)
    args = kafka_client_args(rt.kafka)
    assert (args["sasl_mechanism"], args["sasl_plain_password"]) == ("SCRAM-SHA-512", SECRET)


@pytest.mark.parametrize("key", ["security_protocol", "sasl_mechanism"])
def test_a_bad_protocol_or_mechanism_is_not_echoed(key: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"coolant": {"kafka": {key: SECRET}}})
    assert SECRET not in str(info.value) and f"coolant.kafka.{key}" in str(info.value)
    with pytest.raises(ConfigError) as info:
        kafka_client_args(KafkaSettings(**{key: SECRET}))  # as from COOLANT_KAFKA_*
    assert SECRET not in str(info.value) and key in str(info.value)


def test_unreadable_tls_files_name_the_setting(tmp_path: Path) -> None:
    missing = str(tmp_path / f"{SECRET}.pem")
    with pytest.raises(ConfigError, match="ssl_cafile") as info:
        kafka_client_args(KafkaSettings(security_protocol="SSL", ssl_cafile=missing))
    assert SECRET not in str(info.value)
    with pytest.raises(ConfigError, match="ssl_cafile"):
        redis_client(RedisSettings(url="rediss://h:1/0", ssl_cafile=missing))
    with pytest.raises(ConfigError, match="ssl_keyfile"):
        kafka_client_args(KafkaSettings(security_protocol="SSL", ssl_keyfile=missing))


def test_an_unset_secret_variable_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COOLANT_TEST_NOT_SET", raising=False)
    settings = KafkaSettings(sasl_mechanism="PLAIN", sasl_plain_password="os.environ/COOLANT_TEST_NOT_SET")
    with pytest.raises(ConfigError, match="COOLANT_TEST_NOT_SET is not set"):
        kafka_client_args(settings)


def test_a_redis_url_that_is_not_one_is_not_quoted() -> None:
    with pytest.raises(ConfigError) as info:
        redis_client(RedisSettings(url=f"http://:{SECRET}@h/0"))
    assert SECRET not in str(info.value) and "url" in str(info.value)


def test_kafka_problems_name_the_settings() -> None:
    diagnosis = KafkaDiagnosis()
    diagnosis.messages.append('Unable connect to "h:1": [Error 58] SaslAuthenticationFailed: Authentication failed')
    assert "sasl_plain_password" in kafka_problem(KafkaConnectionError("Unable to bootstrap"), diagnosis)
    verify = KafkaDiagnosis()
    verify.messages.append("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed")
    assert "ssl_cafile" in kafka_problem(KafkaConnectionError("x"), verify)
    assert "ssl_cafile" in kafka_problem(ssl.SSLCertVerificationError("bad"))
    assert kafka_problem(KafkaConnectionError("x")) == "cannot connect (is Kafka running there?)"


def test_redis_problems_name_the_settings() -> None:
    assert "password" in redis_problem(AuthenticationError("invalid username-password pair"))
    assert "password" in redis_problem(ResponseError("NOAUTH Authentication required."))
    assert "ssl_cafile" in redis_problem(ConnectionError("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed"))
    assert "TLS" in redis_problem(ConnectionError("Error while reading from h:1 : (104, 'Connection reset by peer')"))
    # the same closed connection from a server that answered before is a restart, not a TLS mismatch (issue 26)
    for text in ("Connection closed by server.", "Error while reading from h:1 : (104, 'Connection reset by peer')"):
        assert "TLS" in redis_problem(ConnectionError(text))
        after = redis_problem(ConnectionError(text), answered=True)
        assert "TLS" not in after and "restarting" in after
    refused = ConnectionError("Error 111 connecting to h:1. Connection refused.")
    assert "running" in redis_problem(refused) and "TLS" not in redis_problem(refused, answered=True)
    leaked = redis_problem(ConnectionError(f"Error connecting to redis://:{SECRET}@h:1/0."))
    assert SECRET not in leaked
