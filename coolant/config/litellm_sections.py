"""The LiteLLM sections of a proxy config, read as LiteLLM 1.110.2 reads them: `model_list` (with the id LiteLLM
derives for a deployment without `model_info.id`) and `router_settings`; and a deployment record (R2) as the same
registry entry a `model_list` item gives.

Secrets (`api_key`, `os.environ/NAME` references in `litellm_params`) are hashed as written, never resolved here,
and never shown in an error or a warning.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from coolant.config.reader import Reader, show
from coolant.config.runtime import SECRET_REF_PREFIX
from coolant.processors.policy import DeploymentEntry, Registry, RouterSettings
from coolant.schemas import DeploymentRecord

__all__ = ["derive_deployment_id", "entry_from_record", "read_model_list", "read_router"]


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


def read_router(r: Reader, raw: Any) -> RouterSettings:
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


def _deployment_id(r: Reader, key: str, name: str, params: Mapping[Any, Any] | None, info: Mapping[Any, Any]) -> str:
    if "id" in info:
        raw = info["id"]
        if raw is None:
            # LiteLLM then assigns a random uuid per process: no outcome record could ever match it.
            r.fail(
                f"{key}.model_info.id", "is null, so LiteLLM assigns a random id per process; set an id or drop the key"
            )
        if isinstance(raw, bool) or not isinstance(raw, (str, int)):
            r.fail(f"{key}.model_info.id", f"must be a string, got {show(raw)}")
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


def read_model_list(r: Reader, raw: Any) -> Registry:
    if raw is None:
        return Registry()
    if not isinstance(raw, list):
        r.fail("model_list", f"must be a list of deployments, got {show(raw)}")
    entries: list[DeploymentEntry] = []
    seen: dict[str, str] = {}
    for i, item in enumerate(raw):
        key = f"model_list[{i}]"
        if not isinstance(item, Mapping):
            r.fail(key, f"must be a map, got {show(item)}")
        name = item.get("model_name")
        if not isinstance(name, str) or not name:
            r.fail(f"{key}.model_name", f"must be a non-empty string, got {show(name)}")
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


def entry_from_record(rec: DeploymentRecord) -> tuple[DeploymentEntry, tuple[str, ...]]:
    """R2: a `coolant.deployment/1` record as a registry entry (it has no params-level duration).

    Returns the entry and any warnings (unknown policy keys). The record was already validated
    by its schema, so its numbers are known to be non-negative.
    """
    r = Reader(f"deployment record {rec.deployment_id}")
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
