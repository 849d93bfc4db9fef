"""coolant's own `coolant:` section of a proxy config: the policy options (profile, windows, backoff, quota,
recovery, thresholds, the outlier knobs) and where to connect (topics, Kafka, Redis, the web port).

Strict where the LiteLLM sections are lenient: an unknown key or a value of the wrong type is a `ConfigError`
(exit 2), so a typo never falls back to a default silently (spec §2.2). Connection secrets are checked for type
only and never shown; the worker resolves them at the edge with `runtime.resolve_secret`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal, cast

from coolant.config.reader import Reader, fmt, show
from coolant.config.runtime import (
    SASL_MECHANISMS,
    SECURITY_PROTOCOLS,
    KafkaSettings,
    RedisSettings,
    RuntimeSettings,
)
from coolant.processors.policy import (
    OUTLIER_BACKOFF,
    OUTLIER_MIN_REQUESTS,
    Backoff,
    Options,
    Outlier,
    Quota,
    Recovery,
)

__all__ = ["read_coolant", "read_options", "read_runtime"]

_TOPIC_PREFIX = re.compile(r"[A-Za-z0-9._-]*")  # Kafka topic name characters

_COOLANT_KEYS = (
    "profile",
    "window",
    "count_attempts",
    "recool",
    "recool_coalesce",
    "litellm_counters",
    "allowed_fails_window",
    "late_after",
    "health",
    "backoff",
    "max_ejection_percent",
    "max_cooldown_time",
    "quota",
    "recovery",
    "thresholds",
    "outlier",
    "topic_prefix",
    "kafka",
    "redis",
    "web_port",
)
_KAFKA_KEYS = (
    "bootstrap_servers",
    "security_protocol",
    "sasl_mechanism",
    "sasl_plain_username",
    "sasl_plain_password",
    "ssl_cafile",
    "ssl_certfile",
    "ssl_keyfile",
)

_REDIS_TLS_FILES = ("ssl_cafile", "ssl_certfile", "ssl_keyfile")


def _read_backoff(r: Reader, raw: Any, defaults: Backoff | None = None) -> Backoff | None:
    """X2; `defaults` holds the values of the keys a map leaves out (the outlier profile's turn probation on, X13)."""
    if raw is None:
        return None
    d = Backoff() if defaults is None else defaults
    if not isinstance(raw, Mapping):
        r.fail("coolant.backoff", f"must be a map ({{}} for the defaults) or null, got {show(raw)}")
    r.known_keys(raw, "coolant.backoff", ("base", "factor", "max", "reset_after", "probation"))
    k = "coolant.backoff."
    base = r.number(raw.get("base", d.base), k + "base", "must be a number > 0", lambda x: x > 0)
    factor = r.number(raw.get("factor", d.factor), k + "factor", "must be a number >= 1", lambda x: x >= 1)
    cap = r.number(raw.get("max", d.max), k + "max", f"must be a number >= base ({fmt(base)})", lambda x: x >= base)
    reset = r.number(
        raw.get("reset_after", d.reset_after), k + "reset_after", "must be a number >= 0", lambda x: x >= 0
    )
    probation = r.boolean(raw.get("probation", d.probation), k + "probation")
    return Backoff(base=base, factor=factor, max=cap, reset_after=reset, probation=probation)


def _read_recovery(r: Reader, raw: Any) -> Recovery | None:
    """RC1-RC5 (recovery that probes, docs/probe.md): `recovery: {}` takes the defaults; null is off, and so is
    absent except under the outlier profile."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        r.fail("coolant.recovery", f"must be a map ({{}} for the defaults) or null, got {show(raw)}")
    r.known_keys(raw, "coolant.recovery", ("release_after", "extend", "max_hold"))
    d = Recovery()
    k = "coolant.recovery."
    release_after = r.integer(raw.get("release_after", d.release_after), k + "release_after", 1)
    extend = r.number(raw.get("extend", d.extend), k + "extend", "must be a number > 0", lambda x: x > 0)
    max_hold = r.number(
        raw.get("max_hold", d.max_hold),
        k + "max_hold",
        f"must be a number >= extend ({fmt(extend)})",
        lambda x: x >= extend,
    )
    return Recovery(release_after=release_after, extend=extend, max_hold=max_hold)


def _read_quota(r: Reader, raw: Any) -> Quota | None:
    """X6: `quota: {}` takes the defaults; null or absent is off."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        r.fail("coolant.quota", f"must be a map ({{}} for the defaults) or null, got {show(raw)}")
    r.known_keys(raw, "coolant.quota", ("requests_threshold", "tokens_per_request"))
    d = Quota()
    k = "coolant.quota."
    threshold = r.integer(raw.get("requests_threshold", d.requests_threshold), k + "requests_threshold", 0)
    tokens = raw.get("tokens_per_request", d.tokens_per_request)
    per_request = None if tokens is None else r.integer(tokens, k + "tokens_per_request", 1)
    return Quota(requests_threshold=threshold, tokens_per_request=per_request)


_OUTLIER_KEYS = ("consecutive", "consecutive_single", "rate_window", "rate_threshold", "rate_min_requests")


def _read_outlier(r: Reader, profile: str, raw: Any) -> Outlier | None:
    """The `outlier:` knobs, only under `profile: outlier` (absent or null: every default)."""
    k = "coolant.outlier"
    if profile != "outlier":
        if raw is not None:
            r.fail(k, "only applies with profile: outlier (add it, or remove this section)")
        return None
    section = r.section(raw, k)
    r.known_keys(section, k, _OUTLIER_KEYS)
    d = Outlier()
    k += "."
    return Outlier(
        consecutive=r.integer(section.get("consecutive", d.consecutive), k + "consecutive", 1),
        consecutive_single=r.integer(
            section.get("consecutive_single", d.consecutive_single), k + "consecutive_single", 1
        ),
        rate_window=r.integer(section.get("rate_window", d.rate_window), k + "rate_window", 1, 60),
        rate_threshold=r.number(
            section.get("rate_threshold", d.rate_threshold),
            k + "rate_threshold",
            "must be a number between 0 and 1 (exclusive)",
            lambda x: 0 < x < 1,
        ),
        rate_min_requests=r.integer(section.get("rate_min_requests", d.rate_min_requests), k + "rate_min_requests", 1),
    )


def read_options(r: Reader, c: Mapping[Any, Any]) -> Options:
    d = Options()
    k = "coolant."
    profiles = ("compatible", "outlier")
    profile = cast(Literal["compatible", "outlier"], r.choice(c.get("profile", d.profile), k + "profile", profiles))
    outlier = _read_outlier(r, profile, c.get("outlier"))
    if outlier is None:
        backoff = _read_backoff(r, c.get("backoff"))
    else:  # X13: absent means the profile's backoff; an explicit null still turns backoff off
        backoff = _read_backoff(r, c.get("backoff", {}), OUTLIER_BACKOFF)

    def opt_seconds(name: str, default: float | None) -> float | None:
        value = c.get(name, default)
        if value is None:
            return None
        return r.number(value, k + name, "must be a number > 0 or null", lambda x: x > 0)

    health = r.section(c.get("health"), k + "health")
    r.known_keys(health, k + "health", ("cooldown",))
    thresholds = r.section(c.get("thresholds"), k + "thresholds")
    r.known_keys(thresholds, k + "thresholds", ("failure_rate", "min_requests", "outage_min_requests"))
    t = k + "thresholds."
    return Options(
        profile=profile,
        window=cast(
            Literal["tumbling", "sliding"], r.choice(c.get("window", d.window), k + "window", ("tumbling", "sliding"))
        ),
        count_attempts=cast(
            Literal["all", "final_only"],
            r.choice(c.get("count_attempts", d.count_attempts), k + "count_attempts", ("all", "final_only")),
        ),
        recool=cast(
            Literal["extend", "overwrite"], r.choice(c.get("recool", d.recool), k + "recool", ("extend", "overwrite"))
        ),
        recool_coalesce=opt_seconds("recool_coalesce", d.recool_coalesce),
        # X9.5: the profile leaves LiteLLM's per-process counters (D7) off unless the config turns them on
        litellm_counters=r.boolean(c.get("litellm_counters", outlier is None), k + "litellm_counters"),
        allowed_fails_window=opt_seconds("allowed_fails_window", d.allowed_fails_window),
        late_after=r.number(
            c.get("late_after", d.late_after), k + "late_after", "must be a number >= 60", lambda x: x >= 60
        ),
        health_cooldown=r.boolean(health.get("cooldown", d.health_cooldown), k + "health.cooldown"),
        backoff=backoff,
        max_ejection_percent=r.integer(
            c.get("max_ejection_percent", d.max_ejection_percent), k + "max_ejection_percent", 1, 100
        ),
        max_cooldown_time=opt_seconds("max_cooldown_time", d.max_cooldown_time),
        quota=_read_quota(r, c.get("quota")),
        # RC1-RC5: on under the profile (a prober's records of cooled deployments decide); null turns it off
        recovery=_read_recovery(r, c.get("recovery", None if outlier is None else {})),
        failure_rate=r.number(
            thresholds.get("failure_rate", d.failure_rate),
            t + "failure_rate",
            "must be a number between 0 and 1 (exclusive)",
            lambda x: 0 < x < 1,
        ),
        # X9.5: under the profile V2.3 wants 10 outcomes in the minute, unless the config says otherwise
        min_requests=r.integer(
            thresholds.get("min_requests", d.min_requests if outlier is None else OUTLIER_MIN_REQUESTS),
            t + "min_requests",
            1,
        ),
        outage_min_requests=r.integer(
            thresholds.get("outage_min_requests", d.outage_min_requests), t + "outage_min_requests", 1
        ),
        outlier=outlier,
    )


def read_runtime(r: Reader, c: Mapping[Any, Any]) -> RuntimeSettings:
    k = "coolant."
    kwargs: dict[str, Any] = {}
    if "topic_prefix" in c:
        prefix = r.string(c["topic_prefix"], k + "topic_prefix", optional=False)
        if prefix is None or not _TOPIC_PREFIX.fullmatch(prefix):
            r.fail(k + "topic_prefix", f"may only hold letters, digits, '.', '_' and '-', got {show(prefix)}")
        kwargs["topic_prefix"] = prefix
    if "web_port" in c:
        kwargs["web_port"] = r.integer(c["web_port"], k + "web_port", 1, 65535)

    kafka = r.section(c.get("kafka"), k + "kafka")
    r.known_keys(kafka, k + "kafka", _KAFKA_KEYS)
    kk = k + "kafka."
    kafka_args: dict[str, Any] = {}
    for name in _KAFKA_KEYS:
        if name not in kafka:
            continue
        value = kafka[name]
        if name == "bootstrap_servers":
            if isinstance(value, list) and value and all(isinstance(v, str) and v for v in value):
                value = ",".join(value)  # aiokafka takes either; one spelling keeps repr/compare simple
            elif not isinstance(value, str) or not value:
                r.fail(kk + name, f"must be a non-empty string or list of host:port strings, got {show(value)}")
        elif name == "security_protocol" and value is not None:
            value = r.choice(value, kk + name, SECURITY_PROTOCOLS, echo=False)
        elif name == "sasl_mechanism" and value is not None:
            value = r.choice(value, kk + name, SASL_MECHANISMS, echo=False)
        else:
            value = r.string(value, kk + name, secret=name.startswith("sasl_"))
        kafka_args[name] = value
    kwargs["kafka"] = KafkaSettings(**kafka_args)

    redis = r.section(c.get("redis"), k + "redis")
    r.known_keys(redis, k + "redis", ("url", "key_prefix", "password", "ssl", *_REDIS_TLS_FILES))
    rk = k + "redis."
    redis_args: dict[str, Any] = {}
    if "url" in redis:
        redis_args["url"] = r.string(redis["url"], rk + "url", optional=False, secret=True)
    if "key_prefix" in redis:
        redis_args["key_prefix"] = r.string(redis["key_prefix"], rk + "key_prefix", optional=False)
    if "password" in redis:
        redis_args["password"] = r.string(redis["password"], rk + "password", secret=True)
    if "ssl" in redis:
        redis_args["ssl"] = r.boolean(redis["ssl"], rk + "ssl")
    for name in _REDIS_TLS_FILES:
        if name in redis:
            redis_args[name] = r.string(redis[name], rk + name)
    kwargs["redis"] = RedisSettings(**redis_args)
    return RuntimeSettings(**kwargs)


def read_coolant(r: Reader, raw: Any) -> tuple[Options, RuntimeSettings]:
    """The whole `coolant:` section (null or absent: every default)."""
    section = r.section(raw, "coolant")
    r.known_keys(section, "coolant", _COOLANT_KEYS)
    return read_options(r, section), read_runtime(r, section)
