"""Load a LiteLLM proxy config YAML into coolant's `Policy` plus runtime settings (contract §3).

The LiteLLM parts (`model_list`, `router_settings`) are read as LiteLLM reads them, so one file
drives both the gateways and coolant; everything else in that file is ignored. coolant's own
`coolant:` section is strict instead: an unknown key or a bad value is a `ConfigError` (exit 2),
so a typo can never fall back to a default silently (spec §2.2).

Secrets (`api_key`, passwords, `os.environ/NAME` references) are never resolved here and never
appear in an error or a warning: the worker resolves them at the edge with `runtime.resolve_secret`.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NoReturn, cast

import yaml

from coolant.config.errors import ConfigError
from coolant.config.runtime import (
    SASL_MECHANISMS,
    SECRET_REF_PREFIX,
    SECURITY_PROTOCOLS,
    KafkaSettings,
    RedisSettings,
    RuntimeSettings,
)
from coolant.config.yaml_read import load_yaml
from coolant.processors.policy import (
    CATEGORIES,
    OUTLIER_BACKOFF,
    OUTLIER_MIN_REQUESTS,
    POLICY_KEY_SUFFIX,
    Backoff,
    DeploymentEntry,
    Options,
    Outlier,
    Policy,
    Quota,
    Recovery,
    Registry,
    RouterSettings,
)
from coolant.schemas import DeploymentRecord

__all__ = ["Config", "derive_deployment_id", "entry_from_record", "load_config", "parse_config"]

_POLICY_KEYS: dict[str, str] = {c + POLICY_KEY_SUFFIX: c for c in CATEGORIES}
_TOPIC_PREFIX = re.compile(r"[A-Za-z0-9._-]*")  # Kafka topic name characters


@dataclass(frozen=True, slots=True)
class Config:
    """A loaded config: the policy inputs, the runtime settings, and where they came from.

    `warnings` are non-fatal findings (ignored policy keys, ids that will not match LiteLLM's);
    the CLI prints them once at start-up.
    """

    policy: Policy
    runtime: RuntimeSettings = field(default_factory=RuntimeSettings)
    source: str = "<config>"
    warnings: tuple[str, ...] = ()


# --------------------------------------------------------------------------------------------
# LiteLLM's derived deployment id.


def _stable_type_name(value: object) -> str:
    # LiteLLM's json.dumps default for values JSON cannot encode (e.g. a YAML date in a dict).
    return f"{type(value).__module__}.{type(value).__qualname__}"


def derive_deployment_id(model_name: str, litellm_params: Mapping[Any, Any]) -> str:
    """The id LiteLLM 1.110.2 gives a deployment without `model_info.id` (contract §3).

    sha256 over the model name, then each litellm_params key and value in order: strings as is,
    dicts as `json.dumps` (default separators, insertion order), anything else as `str()`
    (so 30 -> "30", 2.5 -> "2.5", True -> "True", a list -> its Python repr).
    LiteLLM hashes *after* resolving top-level `os.environ/` values; coolant hashes the literal
    text, so such deployments need an explicit `model_info.id` (a warning says so).
    """
    parts = [model_name]
    for key, value in litellm_params.items():
        for item in (key, value):
            if isinstance(item, str):
                parts.append(item)
            elif isinstance(item, dict):
                parts.append(json.dumps(item, default=_stable_type_name))
            else:
                parts.append(str(item))
    return hashlib.sha256("".join(parts).encode()).hexdigest()


# --------------------------------------------------------------------------------------------
# Value helpers.


def _show(value: Any) -> str:
    """A value for an error message, YAML-spelled; never echoes an `os.environ/` reference."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        if value.startswith(SECRET_REF_PREFIX):
            return "an os.environ/ reference"
        return repr(value if len(value) <= 40 else value[:37] + "...")
    if isinstance(value, Mapping):
        return "a map"
    if isinstance(value, list):
        return "a list"
    return f"a {type(value).__name__}"


def _type_of(value: Any) -> str:
    """Only the kind of a value, for fields whose content may be secret."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return _show(value) if isinstance(value, (Mapping, list)) else f"a {type(value).__name__}"


def _did_you_mean(word: Any, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(str(word), list(choices), n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def _fmt(num: float) -> str:
    return f"{num:g}"


class _Reader:
    """Walks one raw config, collecting warnings; every failure names `source` and the key."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.warnings: list[str] = []

    def fail(self, key: str | None, problem: str) -> NoReturn:
        raise ConfigError(self.source, key, problem)

    def warn(self, key: str, problem: str) -> None:
        self.warnings.append(f"{self.source}: {key}: {problem}")

    def section(self, value: Any, key: str) -> Mapping[Any, Any]:
        """A map-valued setting; null or absent reads as empty (all defaults)."""
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.fail(key, f"must be a map, got {_show(value)}")
        return value

    # -- LiteLLM settings: read as LiteLLM reads them, a boolean is never a number (§2.2) -----

    def _litellm_number(self, value: Any, key: str, rule: str) -> float:
        if isinstance(value, (int, float)):
            num = value
        elif isinstance(value, str) and not value.startswith(SECRET_REF_PREFIX):
            try:
                num = float(value.strip())
            except ValueError:
                self.fail(key, f"{rule}, got {_show(value)}")
        elif isinstance(value, str):
            self.fail(key, f"{rule}; coolant never resolves os.environ/ references, write the number")
        else:
            self.fail(key, f"{rule}, got {_show(value)}")
        try:
            if math.isfinite(num):
                return float(num)
        except OverflowError:
            pass
        self.fail(key, f"{rule}, got {_show(value)}")

    def cooldown_time(self, value: Any, key: str) -> float | None:
        """A duration >= 0; null, absent or a boolean -> None (unset)."""
        if value is None or isinstance(value, bool):
            return None
        rule = "must be a number >= 0"
        num = self._litellm_number(value, key, rule)
        if num < 0:
            self.fail(key, f"{rule}, got {_show(value)}")
        return num

    def allowed_fails(self, value: Any, key: str) -> int | None:
        """An integer >= 0 (2.0 and "2" read as 2); null, absent or a boolean -> None."""
        if value is None or isinstance(value, bool):
            return None
        rule = "must be an integer >= 0"
        if isinstance(value, int):
            count = value
        else:
            num = self._litellm_number(value, key, rule)
            if not num.is_integer():
                self.fail(key, f"{rule}, got {_show(value)}")
            count = int(num)
        if count < 0:
            self.fail(key, f"{rule}, got {_show(value)}")
        return count

    def policy(self, value: Any, key: str) -> dict[str, int] | None:
        """LiteLLM's `<Category>ErrorAllowedFails` map -> {Category: n}; `{}` stays a policy."""
        if value is None:
            return None
        if not isinstance(value, Mapping):
            self.fail(key, f"must be a map of <Category>{POLICY_KEY_SUFFIX} keys or null, got {_show(value)}")
        entries: dict[str, int] = {}
        for name, raw in value.items():
            category = _POLICY_KEYS.get(name) if isinstance(name, str) else None
            if category is None:
                hint = _did_you_mean(name, _POLICY_KEYS)
                self.warn(f"{key}.{name}", f"unknown allowed_fails_policy key, ignored{hint}")
                continue
            count = self.allowed_fails(raw, f"{key}.{name}")
            if count is not None:
                entries[category] = count
        return entries

    def fallback_groups(self, value: Any, key: str) -> frozenset[str]:
        """R4: groups that are a key of some fallbacks map with a non-empty target list."""
        if value is None:
            return frozenset()
        if not isinstance(value, list):
            self.fail(key, f"must be a list of {{group: [fallback groups]}} maps, got {_show(value)}")
        groups: set[str] = set()
        for i, item in enumerate(value):
            if not isinstance(item, Mapping):
                self.fail(f"{key}[{i}]", f"must be a {{group: [fallback groups]}} map, got {_show(item)}")
            for group, targets in item.items():
                if targets is None:
                    continue
                if not isinstance(targets, list):
                    self.fail(f"{key}[{i}].{group}", f"must be a list of model groups, got {_show(targets)}")
                # Exact keys only: "*" is kept literally and so only matches a group named "*".
                if targets and isinstance(group, str):
                    groups.add(group)
        return frozenset(groups)

    # -- coolant's own settings: strict types, no coercion, unknown keys rejected ---------------

    def known_keys(self, section: Mapping[Any, Any], key: str, allowed: Iterable[str]) -> None:
        allowed = tuple(allowed)
        for name in section:
            if name not in allowed:
                self.fail(f"{key}.{name}", f"unknown key{_did_you_mean(name, allowed)}")

    def number(self, value: Any, key: str, rule: str, ok: Callable[[float], bool]) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(key, f"{rule}, got {_show(value)}")
        try:
            num = float(value)
        except OverflowError:
            self.fail(key, f"{rule}, got {_show(value)}")
        if not math.isfinite(num) or not ok(num):
            self.fail(key, f"{rule}, got {_show(value)}")
        return num

    def integer(self, value: Any, key: str, lo: int, hi: int | None = None) -> int:
        rule = f"must be an integer >= {lo}" if hi is None else f"must be an integer from {lo} to {hi}"
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(key, f"{rule}, got {_show(value)}")
        if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
            self.fail(key, f"{rule}, got {_show(value)}")
        count = int(value)
        if count < lo or (hi is not None and count > hi):
            self.fail(key, f"{rule}, got {_show(value)}")
        return count

    def choice(self, value: Any, key: str, choices: tuple[str, ...], *, echo: bool = True) -> str:
        """One of `choices`; `echo=False` for connection settings, where a misplaced secret must not be shown."""
        if not isinstance(value, str) or value not in choices:
            got = f", got {_show(value)}" if echo else ""
            self.fail(key, f"must be one of {', '.join(choices)}{got}")
        return value

    def boolean(self, value: Any, key: str) -> bool:
        if not isinstance(value, bool):
            self.fail(key, f"must be true or false, got {_show(value)}")
        return value

    def string(self, value: Any, key: str, *, optional: bool = True, secret: bool = False) -> str | None:
        if value is None and optional:
            return None
        if not isinstance(value, str):
            got = _type_of(value) if secret else _show(value)
            self.fail(key, f"must be a string{' or null' if optional else ''}, got {got}")
        return value


# --------------------------------------------------------------------------------------------
# The LiteLLM parts.


def _read_router(r: _Reader, raw: Any) -> RouterSettings:
    rs = r.section(raw, "router_settings")
    disable = rs.get("disable_cooldowns")
    if isinstance(disable, str):
        # LiteLLM tests truthiness, so even "false" disables cooldowns; say so rather than guess.
        r.warn("router_settings.disable_cooldowns", "a non-empty string is truthy: cooldowns are disabled")
    return RouterSettings(
        cooldown_time=r.cooldown_time(rs.get("cooldown_time"), "router_settings.cooldown_time"),
        disable_cooldowns=bool(disable),
        allowed_fails=r.allowed_fails(rs.get("allowed_fails"), "router_settings.allowed_fails"),
        allowed_fails_policy=r.policy(rs.get("allowed_fails_policy"), "router_settings.allowed_fails_policy"),
        fallback_groups=r.fallback_groups(rs.get("fallbacks"), "router_settings.fallbacks"),
    )


def _deployment_id(r: _Reader, key: str, name: str, params: Mapping[Any, Any] | None, info: Mapping[Any, Any]) -> str:
    if "id" in info:
        raw = info["id"]
        if raw is None:
            # LiteLLM then assigns a random uuid per process: no outcome record could ever match it.
            r.fail(
                f"{key}.model_info.id", "is null, so LiteLLM assigns a random id per process; set an id or drop the key"
            )
        if isinstance(raw, bool) or not isinstance(raw, (str, int)):
            r.fail(f"{key}.model_info.id", f"must be a string, got {_show(raw)}")
        if raw == "":
            r.fail(f"{key}.model_info.id", "must not be empty")
        return str(raw)  # LiteLLM stores an integer id as its string
    if params is None:
        r.fail(f"{key}.litellm_params", "missing: it is needed to derive the deployment id (or set model_info.id)")
    refs = [str(k) for k, v in params.items() if isinstance(v, str) and v.startswith(SECRET_REF_PREFIX)]
    if refs:
        r.warn(
            f"{key}.model_info.id",
            f"missing, and litellm_params {', '.join(refs)} {'is an' if len(refs) == 1 else 'are'} os.environ/ "
            "reference(s): LiteLLM derives the id after resolving them, coolant never does, "
            "so the derived id will not match the routers'; set model_info.id",
        )
    return derive_deployment_id(name, params)


def _read_model_list(r: _Reader, raw: Any) -> Registry:
    if raw is None:
        return Registry()
    if not isinstance(raw, list):
        r.fail("model_list", f"must be a list of deployments, got {_show(raw)}")
    entries: list[DeploymentEntry] = []
    seen: dict[str, str] = {}
    for i, item in enumerate(raw):
        key = f"model_list[{i}]"
        if not isinstance(item, Mapping):
            r.fail(key, f"must be a map, got {_show(item)}")
        name = item.get("model_name")
        if not isinstance(name, str) or not name:
            r.fail(f"{key}.model_name", f"must be a non-empty string, got {_show(name)}")
        params = (
            None if item.get("litellm_params") is None else r.section(item["litellm_params"], f"{key}.litellm_params")
        )
        info = r.section(item.get("model_info"), f"{key}.model_info")
        dep_id = _deployment_id(r, key, name, params, info)
        if dep_id in seen:
            where = f"{key}.model_info.id" if "id" in info else key
            r.fail(where, f"duplicate deployment id {dep_id!r} (also {seen[dep_id]})")
        seen[dep_id] = key
        params = params or {}
        if params.get("allowed_fails_policy") is not None:
            r.warn(
                f"{key}.litellm_params.allowed_fails_policy",
                "ignored, as LiteLLM ignores it; put it under model_info",
            )
        entries.append(
            DeploymentEntry(
                deployment_id=dep_id,
                model_group=name,
                wildcard="*" in name,
                cooldown_time=r.cooldown_time(info.get("cooldown_time"), f"{key}.model_info.cooldown_time"),
                params_cooldown_time=r.cooldown_time(
                    params.get("cooldown_time"), f"{key}.litellm_params.cooldown_time"
                ),
                allowed_fails=r.allowed_fails(info.get("allowed_fails"), f"{key}.model_info.allowed_fails"),
                allowed_fails_policy=r.policy(
                    info.get("allowed_fails_policy"), f"{key}.model_info.allowed_fails_policy"
                ),
            )
        )
    return Registry.of(entries)


# --------------------------------------------------------------------------------------------
# The coolant section.

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


def _read_backoff(r: _Reader, raw: Any, defaults: Backoff | None = None) -> Backoff | None:
    """X2; `defaults` holds the values of the keys a map leaves out (the outlier profile's turn probation on, X13)."""
    if raw is None:
        return None
    d = Backoff() if defaults is None else defaults
    if not isinstance(raw, Mapping):
        r.fail("coolant.backoff", f"must be a map ({{}} for the defaults) or null, got {_show(raw)}")
    r.known_keys(raw, "coolant.backoff", ("base", "factor", "max", "reset_after", "probation"))
    k = "coolant.backoff."
    base = r.number(raw.get("base", d.base), k + "base", "must be a number > 0", lambda x: x > 0)
    factor = r.number(raw.get("factor", d.factor), k + "factor", "must be a number >= 1", lambda x: x >= 1)
    cap = r.number(raw.get("max", d.max), k + "max", f"must be a number >= base ({_fmt(base)})", lambda x: x >= base)
    reset = r.number(
        raw.get("reset_after", d.reset_after), k + "reset_after", "must be a number >= 0", lambda x: x >= 0
    )
    probation = r.boolean(raw.get("probation", d.probation), k + "probation")
    return Backoff(base=base, factor=factor, max=cap, reset_after=reset, probation=probation)


def _read_recovery(r: _Reader, raw: Any) -> Recovery | None:
    """RC1-RC5 (recovery that probes, docs/probe.md): `recovery: {}` takes the defaults; null is off, and so is
    absent except under the outlier profile."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        r.fail("coolant.recovery", f"must be a map ({{}} for the defaults) or null, got {_show(raw)}")
    r.known_keys(raw, "coolant.recovery", ("release_after", "extend", "max_hold"))
    d = Recovery()
    k = "coolant.recovery."
    release_after = r.integer(raw.get("release_after", d.release_after), k + "release_after", 1)
    extend = r.number(raw.get("extend", d.extend), k + "extend", "must be a number > 0", lambda x: x > 0)
    max_hold = r.number(raw.get("max_hold", d.max_hold), k + "max_hold", f"must be a number >= extend "
                        f"({_fmt(extend)})", lambda x: x >= extend)
    return Recovery(release_after=release_after, extend=extend, max_hold=max_hold)


def _read_quota(r: _Reader, raw: Any) -> Quota | None:
    """X6: `quota: {}` takes the defaults; null or absent is off."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        r.fail("coolant.quota", f"must be a map ({{}} for the defaults) or null, got {_show(raw)}")
    r.known_keys(raw, "coolant.quota", ("requests_threshold", "tokens_per_request"))
    d = Quota()
    k = "coolant.quota."
    threshold = r.integer(raw.get("requests_threshold", d.requests_threshold), k + "requests_threshold", 0)
    tokens = raw.get("tokens_per_request", d.tokens_per_request)
    per_request = None if tokens is None else r.integer(tokens, k + "tokens_per_request", 1)
    return Quota(requests_threshold=threshold, tokens_per_request=per_request)


_OUTLIER_KEYS = ("consecutive", "consecutive_single", "rate_window", "rate_threshold", "rate_min_requests")


def _read_outlier(r: _Reader, profile: str, raw: Any) -> Outlier | None:
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


def _read_options(r: _Reader, c: Mapping[Any, Any]) -> Options:
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


def _read_runtime(r: _Reader, c: Mapping[Any, Any]) -> RuntimeSettings:
    k = "coolant."
    kwargs: dict[str, Any] = {}
    if "topic_prefix" in c:
        prefix = r.string(c["topic_prefix"], k + "topic_prefix", optional=False)
        if prefix is None or not _TOPIC_PREFIX.fullmatch(prefix):
            r.fail(k + "topic_prefix", f"may only hold letters, digits, '.', '_' and '-', got {_show(prefix)}")
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
                r.fail(kk + name, f"must be a non-empty string or list of host:port strings, got {_show(value)}")
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


# --------------------------------------------------------------------------------------------
# Entry points.


def parse_config(data: Mapping[str, Any], source: str = "<config>") -> Config:
    """Build a `Config` from an already-parsed config map (a YAML file's top level)."""
    r = _Reader(source)
    if not isinstance(data, Mapping):
        r.fail(None, f"the top level must be a map, got {_show(data)}")
    registry = _read_model_list(r, data.get("model_list"))
    router = _read_router(r, data.get("router_settings"))
    coolant = r.section(data.get("coolant"), "coolant")
    r.known_keys(coolant, "coolant", _COOLANT_KEYS)
    options = _read_options(r, coolant)
    runtime = _read_runtime(r, coolant)
    return Config(Policy(registry, router, options), runtime, source, tuple(r.warnings))


def load_config(path: str | Path) -> Config:
    """Read and parse a LiteLLM proxy config YAML; every failure is a one-line `ConfigError`."""
    source = os.fspath(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(source, None, "file not found") from None
    except UnicodeDecodeError:
        raise ConfigError(source, None, "not UTF-8 text") from None
    except OSError as e:
        raise ConfigError(source, None, f"cannot read: {e.strerror or type(e).__name__}") from None
    try:
        data = load_yaml(text)  # a safe loader, C or Python, with a linear-time path for plain documents
        del text
    except yaml.YAMLError as e:
        # Only the problem and its position: the snippet YAML would quote may hold a secret.
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or type(e).__name__
        raise ConfigError(source, None, f"invalid YAML{where}: {problem}") from None
    if data is None:
        raise ConfigError(source, None, "the top level must be a map, got an empty file")
    if not isinstance(data, Mapping):
        raise ConfigError(source, None, f"the top level must be a map, got {_show(data)}")
    return parse_config(data, source)


# --------------------------------------------------------------------------------------------
# Deployment records (the live registry).


def entry_from_record(rec: DeploymentRecord) -> tuple[DeploymentEntry, tuple[str, ...]]:
    """R2: a `coolant.deployment/1` record as a registry entry (it has no params-level duration).

    Returns the entry and any warnings (unknown policy keys). The record was already validated
    by its schema, so its numbers are known to be non-negative.
    """
    r = _Reader(f"deployment record {rec.deployment_id}")
    policy = r.policy(rec.allowed_fails_policy, "allowed_fails_policy")
    entry = DeploymentEntry(
        deployment_id=rec.deployment_id,
        model_group=rec.model_group,
        wildcard=rec.is_wildcard,
        cooldown_time=rec.cooldown_time,
        allowed_fails=rec.allowed_fails,
        allowed_fails_policy=policy,
    )
    return entry, tuple(r.warnings)
