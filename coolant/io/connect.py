"""Connecting to Kafka and Redis, the same way for every command (issue 16 §5).

One implementation of the connection settings: `coolant.kafka` / `coolant.redis` of a config, or, for what a
config does not set, the `COOLANT_KAFKA_*` / `COOLANT_REDIS_*` environment variables (`config.KafkaSettings`,
`config.RedisSettings`). Secrets are resolved here, at the edge, just before connecting.

Every problem is one line that names the setting, never its value: a password, or a URL holding one, is
never printed (`safe_url`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections import deque
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import typer

from coolant.config.errors import ConfigError
from coolant.config.loader import load_config
from coolant.config.runtime import (
    SASL_MECHANISMS,
    SECURITY_PROTOCOLS,
    KafkaSettings,
    RedisSettings,
    RuntimeSettings,
    resolve_secret,
)
from coolant.errors import CoolantError

__all__ = [
    "ConnectConfig",
    "ConnectionFailed",
    "KafkaDiagnosis",
    "connection_closed",
    "kafka_client_args",
    "kafka_preflight",
    "kafka_problem",
    "kafka_settings",
    "plain_endpoint",
    "probed_redis_problem",
    "redis_client",
    "redis_preflight",
    "redis_problem",
    "runtime_settings",
    "safe_url",
    "speaks_tls",
    "ssl_context",
]

KAFKA_ENV = "COOLANT_KAFKA_*"
REDIS_ENV = "COOLANT_REDIS_*"

ConnectConfig = Annotated[
    Path | None,
    typer.Option(
        "--config", "-c",
        help="LiteLLM proxy config YAML whose `coolant.kafka` / `coolant.redis` sections give the connection "
        "settings (SASL, TLS, passwords). Without it, or for what it does not set: the COOLANT_KAFKA_* and "
        "COOLANT_REDIS_* environment variables.",
    ),
]
"""The `--config` option of the commands that need only the connection settings (publish, tail, alerts, status)."""


class ConnectionFailed(CoolantError):
    """Kafka or Redis could not be used: one line naming the service, where it is and the setting to check."""


def runtime_settings(config: Path | None) -> RuntimeSettings:
    """The config's runtime settings, or the environment's when no config is given (`ConfigError` if bad)."""
    return RuntimeSettings() if config is None else load_config(config).runtime


def kafka_settings(config: Path | None, bootstrap: str | None = None) -> tuple[KafkaSettings, dict[str, Any]]:
    """A command's Kafka settings (`--config`, else the environment; `--bootstrap` wins) and its client args."""
    from dataclasses import replace

    k = runtime_settings(config).kafka
    if bootstrap:
        k = replace(k, bootstrap_servers=bootstrap)
    return k, kafka_client_args(k)


# --------------------------------------------------------------------------------------------
# TLS


def ssl_context(section: str, cafile: str | None, certfile: str | None, keyfile: str | None) -> ssl.SSLContext:
    """A verifying client context; an unreadable or invalid file is a `ConfigError` naming its setting."""
    try:
        ctx = ssl.create_default_context(cafile=cafile)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(section, "ssl_cafile", f"cannot load the CA file: {_reason(exc)}") from None
    if certfile:
        try:
            ctx.load_cert_chain(certfile, keyfile)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                section, "ssl_certfile", f"cannot load the client certificate or ssl_keyfile: {_reason(exc)}"
            ) from None
    elif keyfile:
        raise ConfigError(section, "ssl_keyfile", "is set without ssl_certfile")
    return ctx


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    if isinstance(exc, ssl.SSLError) and exc.reason:
        return str(exc.reason)
    return type(exc).__name__


# --------------------------------------------------------------------------------------------
# Kafka


def kafka_client_args(k: KafkaSettings) -> dict[str, Any]:
    """aiokafka connection arguments (secrets resolved here, at the edge, never logged).

    Values that came from the environment are checked here, as the config reader checks its own.
    """
    section = "coolant.kafka (or COOLANT_KAFKA_*)"
    args: dict[str, Any] = {"bootstrap_servers": k.bootstrap_servers}
    if k.security_protocol:
        if k.security_protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(section, "security_protocol", f"must be one of {', '.join(SECURITY_PROTOCOLS)}")
        args["security_protocol"] = k.security_protocol
    if k.sasl_mechanism:
        if k.sasl_mechanism not in SASL_MECHANISMS:
            raise ConfigError(section, "sasl_mechanism", f"must be one of {', '.join(SASL_MECHANISMS)}")
        args["sasl_mechanism"] = k.sasl_mechanism
        args["sasl_plain_username"] = resolve_secret(k.sasl_plain_username)
        args["sasl_plain_password"] = resolve_secret(k.sasl_plain_password)
    if k.security_protocol in ("SSL", "SASL_SSL"):
        args["ssl_context"] = kafka_ssl_context(k)
    return args


def kafka_ssl_context(k: KafkaSettings) -> ssl.SSLContext:
    return ssl_context("coolant.kafka (or COOLANT_KAFKA_*)", k.ssl_cafile, k.ssl_certfile, k.ssl_keyfile)


class KafkaDiagnosis(logging.Handler):
    """Keeps the reason aiokafka logs when a connection attempt fails.

    aiokafka raises only "Unable to bootstrap" whatever went wrong; the cause (wrong SASL password, a certificate
    that does not verify) is in a log record of `aiokafka.conn` / `aiokafka`. Use as a context manager around the
    connect step, then `kafka_problem(exc, diagnosis)`. Meanwhile those records are not printed: they would
    repeat, at length, what the one-line error says.
    """

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: deque[str] = deque(maxlen=50)
        self._saved: tuple[int, bool] = (logging.NOTSET, True)

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):
            self.messages.append(record.getMessage())

    def __enter__(self) -> KafkaDiagnosis:
        logger = logging.getLogger("aiokafka")
        self._saved = (logger.level, logger.propagate)
        logger.setLevel(logging.WARNING)
        logger.propagate = False
        logger.addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        logger = logging.getLogger("aiokafka")
        logger.removeHandler(self)
        logger.setLevel(self._saved[0])
        logger.propagate = self._saved[1]


def kafka_problem(exc: BaseException, diagnosis: KafkaDiagnosis | None = None) -> str:
    """One line saying what went wrong and which setting to check (never a setting's value)."""
    from aiokafka.errors import KafkaConnectionError, SaslAuthenticationFailed, UnsupportedSaslMechanismError

    seen = " ".join([str(exc), *(diagnosis.messages if diagnosis is not None else [])])
    if isinstance(exc, SaslAuthenticationFailed) or any(
        word in seen for word in ("SaslAuthenticationFailed", "Authentication failed")
    ):
        return (
            "authentication failed: check sasl_mechanism, sasl_plain_username and sasl_plain_password "
            f"(coolant.kafka or {KAFKA_ENV})"
        )
    if isinstance(exc, UnsupportedSaslMechanismError) or "UnsupportedSaslMechanism" in seen:
        return f"the broker does not support this sasl_mechanism (coolant.kafka or {KAFKA_ENV})"
    if isinstance(exc, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY_FAILED" in seen:
        return f"TLS: the broker's certificate does not verify: check ssl_cafile (coolant.kafka or {KAFKA_ENV})"
    if isinstance(exc, ssl.SSLError) or "SSL" in type(exc).__name__ or "[SSL" in seen:
        return f"TLS handshake failed: check security_protocol and the ssl_* settings (coolant.kafka or {KAFKA_ENV})"
    if isinstance(exc, KafkaConnectionError):
        return "cannot connect (is Kafka running there?)"
    return str(exc) or type(exc).__name__


async def kafka_preflight(k: KafkaSettings, client_args: dict[str, Any], timeout: float = 20.0) -> None:
    """One metadata round trip, so a long-running command fails at start, in one line, on a bad credential."""
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.errors import KafkaError

    with KafkaDiagnosis() as diagnosis:
        admin = AIOKafkaAdminClient(**client_args, request_timeout_ms=int(timeout * 1000))
        try:
            async with asyncio.timeout(timeout):
                await admin.start()
                await admin.list_topics()
        except (KafkaError, OSError, TimeoutError) as exc:
            raise ConnectionFailed(f"kafka {k.bootstrap_servers}: {kafka_problem(exc, diagnosis)}") from None
        finally:
            with contextlib.suppress(Exception):
                await admin.close()


async def redis_preflight(r: RedisSettings) -> None:
    """A PING with the command's settings: a wrong password or CA is one line at start, not a log per write."""
    from redis.exceptions import RedisError

    client = redis_client(r)
    try:
        await client.ping()
    except (RedisError, OSError) as exc:
        raise ConnectionFailed(f"redis {safe_url(r.url)}: {await probed_redis_problem(exc, client)}") from None
    finally:
        await client.aclose()


# --------------------------------------------------------------------------------------------
# Redis


def redis_client(r: RedisSettings, **options: Any) -> Any:
    """A `redis.asyncio` client for the configured Redis (password resolved here; TLS for `rediss://` or `ssl`)."""
    import redis.asyncio as redis_asyncio

    args: dict[str, Any] = {"socket_timeout": 5, "socket_connect_timeout": 5}
    tls = r.ssl or urlsplit(r.url).scheme == "rediss"
    if r.ssl:
        args["connection_class"] = redis_asyncio.SSLConnection
    if tls:
        if r.ssl_cafile is not None or r.ssl_certfile is not None:
            # the same checks (and one-line errors) as Kafka's files, before redis-py reads them lazily
            ssl_context("coolant.redis (or COOLANT_REDIS_*)", r.ssl_cafile, r.ssl_certfile, r.ssl_keyfile)
        if r.ssl_cafile is not None:
            args["ssl_ca_certs"] = r.ssl_cafile
        if r.ssl_certfile is not None:
            args["ssl_certfile"] = r.ssl_certfile
            args["ssl_keyfile"] = r.ssl_keyfile
    try:
        return redis_asyncio.from_url(r.url, password=resolve_secret(r.password), **{**args, **options})
    except ValueError:  # redis-py quotes the URL in its message: never show it
        raise ConfigError("coolant.redis (or REDIS_URL)", "url", "not a redis://, rediss:// or unix:// URL") from None


def redis_problem(exc: BaseException, *, answered: bool = False, tls: bool | None = None) -> str:
    """One line for a Redis failure, naming the setting to check; the URL (it may hold a password) is never shown.

    A TLS-only server closes a plain connection at once, just as a server that restarts closes every connection:
    the text of the error is the same. `tls`: whether the server answered a TLS handshake (`speaks_tls`), the only
    thing that tells the two apart; the TLS hint is given only then. `answered`: this server has answered before
    (a closed connection is then most likely a restart)."""
    from redis.exceptions import AuthenticationError, AuthenticationWrongNumberOfArgsError, ResponseError

    text = str(exc)
    if isinstance(exc, AuthenticationError | AuthenticationWrongNumberOfArgsError) or (
        isinstance(exc, ResponseError) and ("NOAUTH" in text or "WRONGPASS" in text)
    ):
        return f"authentication failed: check the password (coolant.redis.password or {REDIS_ENV[:-1]}PASSWORD)"
    if "CERTIFICATE_VERIFY_FAILED" in text:
        return f"TLS: the server's certificate does not verify: check ssl_cafile (coolant.redis or {REDIS_ENV})"
    if "SSL" in text or "ssl" in text:
        return f"TLS handshake failed: check rediss:// / ssl and the ssl_* settings (coolant.redis or {REDIS_ENV})"
    if connection_closed(exc):
        if tls:
            return f"{_scrub(text)} (the server speaks TLS: use rediss:// or coolant.redis.ssl)"
        return f"{_scrub(text)} (the server closed the connection: is it restarting?)"
    if "Connection refused" in text or text.startswith("Error 111 "):  # redis.asyncio: "Error 111 connecting to"
        return f"{_scrub(text)} (is Redis running there?{' it answered before: restarting?' if answered else ''})"
    return _scrub(text) or type(exc).__name__


def connection_closed(exc: BaseException) -> bool:
    """The server closed (or reset) the connection: a restart, or a TLS-only server refusing plain text."""
    text = str(exc)
    return "Connection closed by server" in text or "Connection reset by peer" in text


def plain_endpoint(client: Any) -> tuple[str, int] | None:
    """The host and port a `redis.asyncio` client reaches without TLS; None over TLS or a unix socket (nothing
    for `speaks_tls` to ask)."""
    pool = getattr(client, "connection_pool", None)
    kwargs = getattr(pool, "connection_kwargs", {})
    if pool is None or "ssl" in pool.connection_class.__name__.lower() or "path" in kwargs:
        return None
    return str(kwargs.get("host", "localhost")), int(kwargs.get("port", 6379))


async def speaks_tls(host: str, port: int, timeout: float = 2.0) -> bool:
    """Whether host:port answers a TLS handshake (its certificate not checked: only the protocol is asked). A
    server that closed a plain connection and speaks TLS expects TLS; a plain one, or one that is down or
    restarting, does not."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        async with asyncio.timeout(timeout):
            _, writer = await asyncio.open_connection(host, port, ssl=context)
    except ssl.SSLError as exc:  # a TLS alert is a TLS answer (e.g. a client certificate required)
        return "ALERT" in (exc.reason or "")
    except (OSError, TimeoutError):
        return False
    writer.close()
    with contextlib.suppress(OSError, ssl.SSLError):
        await writer.wait_closed()
    return True


async def probed_redis_problem(exc: BaseException, client: Any, *, answered: bool = False) -> str:
    """`redis_problem`, the server asked whether it speaks TLS when it closed a plain connection."""
    endpoint = plain_endpoint(client)
    tls = None
    if endpoint is not None and not answered and connection_closed(exc):
        tls = await speaks_tls(*endpoint)
    return redis_problem(exc, answered=answered, tls=tls)


def _scrub(text: str) -> str:
    """A redis-py message without any URL it may quote."""
    return " ".join(safe_url(w) if "://" in w else w for w in text.split(" "))


def safe_url(url: str) -> str:
    """`url` for a message: the userinfo password and any password-like query value replaced by `***`."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            user, _, host = netloc.rpartition("@")
            name, colon, _ = user.partition(":")
            # `redis://secret@host` is often meant as a password: without a colon the whole userinfo is hidden
            netloc = f"{name}:***@{host}" if colon else f"***@{host}"
        query = urlencode(
            [(k, "***" if _secret_param(k) else v) for k, v in parse_qsl(parts.query, keep_blank_values=True)],
            safe="*",
        )
        return urlunsplit((parts.scheme, netloc, parts.path, query, ""))
    except ValueError:
        return "<a URL that cannot be parsed>"


def _secret_param(name: str) -> bool:
    name = name.lower()
    return any(word in name for word in ("pass", "secret", "token", "key", "auth"))
