"""coolant.io.connect: one way to connect for every command; errors name the setting, never a secret (issue 16 §5)."""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from aiokafka.errors import KafkaConnectionError
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import AuthenticationError, ConnectionError, ResponseError

from coolant.config.errors import ConfigError
from coolant.config.loader import parse_config
from coolant.config.runtime import KafkaSettings, RedisSettings
from coolant.io.connect import (
    KafkaDiagnosis,
    kafka_client_args,
    kafka_problem,
    probed_redis_problem,
    redis_client,
    redis_problem,
    safe_url,
    speaks_tls,
)

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
    # a closed connection reads the same from a TLS-only server and from one restarting: the TLS hint only when the
    # server answered a TLS handshake (issue 26: a plain restart got "does the server expect TLS?")
    for text in ("Connection closed by server.", "Error while reading from h:1 : (104, 'Connection reset by peer')"):
        for answered in (False, True):
            plain = redis_problem(ConnectionError(text), answered=answered)
            assert "TLS" not in plain and "restarting" in plain
            assert "TLS" not in redis_problem(ConnectionError(text), answered=answered, tls=False)
        assert "rediss://" in redis_problem(ConnectionError(text), tls=True)
    refused = ConnectionError("Error 111 connecting to h:1. Connection refused.")
    assert "running" in redis_problem(refused) and "TLS" not in redis_problem(refused, answered=True)
    leaked = redis_problem(ConnectionError(f"Error connecting to redis://:{SECRET}@h:1/0."))
    assert SECRET not in leaked


def tls_server_context(tmp_path: Path) -> ssl.SSLContext:
    """A server context with a throwaway self-signed certificate."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.now(UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now - timedelta(days=1)).not_valid_after(now + timedelta(days=1))
            .sign(key, hashes.SHA256()))
    (tmp_path / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "key.pem").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    return context


@pytest.fixture
async def servers(tmp_path: Path) -> AsyncIterator[dict[str, int]]:
    """Ports of a TLS-only server (it refuses plain text as a `tls-port` Redis does: the handshake fails and the
    connection closes), a plain server that closes every connection at once (as one shutting down for a restart),
    and a port nothing listens on."""

    async def close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    tls = await asyncio.start_server(close, "127.0.0.1", 0, ssl=tls_server_context(tmp_path))
    plain = await asyncio.start_server(close, "127.0.0.1", 0)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    try:
        yield {"tls": tls.sockets[0].getsockname()[1], "plain": plain.sockets[0].getsockname()[1], "none": free}
    finally:
        for server in (tls, plain):
            server.close()


async def test_only_a_server_that_speaks_tls_gets_the_tls_hint(servers: dict[str, int]) -> None:
    assert await speaks_tls("127.0.0.1", servers["tls"])
    assert not await speaks_tls("127.0.0.1", servers["plain"])
    assert not await speaks_tls("127.0.0.1", servers["none"])
    problems = {}
    for name, port in servers.items():
        client = Redis(host="127.0.0.1", port=port, retry=Retry(NoBackoff(), 0))
        try:
            with pytest.raises(ConnectionError) as failed:
                await client.ping()
            problems[name] = await probed_redis_problem(failed.value, client)
        finally:
            await client.aclose()
    assert "speaks TLS" in problems["tls"] and "rediss://" in problems["tls"], problems
    assert "TLS" not in problems["plain"] and "restarting" in problems["plain"], problems
    assert "TLS" not in problems["none"] and "running" in problems["none"], problems


async def test_the_worker_asks_a_server_that_closed_its_connection_whether_it_speaks_tls(
    servers: dict[str, int],
) -> None:
    """The worker's /healthz problem and log line: no TLS hint for a closed connection until the server answered
    a TLS handshake (asked once, in the background: a write's retry does not wait for it)."""
    from types import SimpleNamespace

    from coolant.streams.sinks import Sinks

    for name, expected in (("tls", True), ("plain", False)):
        client = Redis(host="127.0.0.1", port=servers[name], retry=Retry(NoBackoff(), 0))
        ctx = SimpleNamespace(problems={})
        sinks = Sinks(ctx, SimpleNamespace(client=client), None)  # type: ignore[arg-type]
        try:
            with pytest.raises(ConnectionError) as failed:
                await client.ping()
            sinks.redis_error(failed.value, 0.1)
            assert "TLS" not in ctx.problems["redis"]
            asking = sinks._asking
            assert asking is not None
            await asking
            assert sinks.redis_tls is expected
            assert ("speaks TLS" in ctx.problems["redis"]) is expected, ctx.problems
            sinks.redis_error(failed.value, 0.2)  # asked once: the answer stays in every later problem
            assert sinks._asking is None
            assert ("speaks TLS" in ctx.problems["redis"]) is expected, ctx.problems
        finally:
            await client.aclose()
