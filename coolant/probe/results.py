"""LiteLLM's shared `health_check_results` document, built from every deployment's latest probe (pure).

LiteLLM 1.110.2 (`SharedHealthCheckManager`) reads the key `health_check_results` through its `RedisCache`:
the Redis value is `json.dumps` of a string that is itself the JSON document (encoded twice), validated as
`{healthy_endpoints: list, unhealthy_endpoints: list, timestamp: number, checked_by: any, ...}` and ignored
when `now - timestamp > 300`. Its own writer adds `healthy_count`/`unhealthy_count`; each endpoint is the
deployment's displayable params plus `model_id`, and unhealthy ones carry `exception_status` (an int: LiteLLM
filters 429/408 with it when `health_check_ignore_transient_errors` is set) and `error`.

Each prober owns only some deployments, so each writes its latest results into one Redis hash (field =
deployment id, value = `entry_value`) and rebuilds the whole document from that hash (see `store`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from coolant.config.runtime import SECRET_REF_PREFIX
from coolant.probe.targets import Target
from coolant.schemas import Health

__all__ = ["build_document", "encode_document", "endpoint", "entry_value", "exception_status"]

SHARED_TTL_SECONDS = 300
"""LiteLLM's `DEFAULT_SHARED_HEALTH_CHECK_TTL`: its key TTL and the age beyond which readers ignore results."""


def exception_status(health: Health) -> int:
    """What LiteLLM stores for an unhealthy endpoint: the HTTP status, else its exception's (408 Timeout, 500)."""
    if health.status_code is not None:
        return health.status_code
    return 408 if health.exception_type == "Timeout" else 500


def endpoint(target: Target, health: Health) -> dict[str, Any]:
    """One endpoint as LiteLLM lists it (never the api_key; api_base only when it is not a secret reference)."""
    entry: dict[str, Any] = {"model": target.model}
    if target.api_base and not target.api_base.startswith(SECRET_REF_PREFIX):
        entry["api_base"] = target.api_base
    if "mode" in target.model_info:
        entry["mode"] = target.mode
    entry["model_id"] = target.deployment_id
    if not health.healthy:
        entry["exception_status"] = exception_status(health)
        if health.exception_message or health.exception_type:
            entry["error"] = health.exception_message or health.exception_type
    return entry


def entry_value(target: Target, health: Health) -> bytes:
    """The Redis hash value of a deployment's latest result: the endpoint plus when, verdict and by whom."""
    return orjson.dumps(
        {"endpoint": endpoint(target, health), "healthy": health.healthy, "ts": health.ts, "prober": health.prober}
    )


def build_document(
    entries: Mapping[str, bytes | str], now: float, checked_by: str, max_age: float = SHARED_TTL_SECONDS
) -> tuple[dict[str, Any], list[str]]:
    """The document from the hash's entries, and the ids to drop (older than `max_age`, or unreadable).

    Endpoints are sorted by model_id so the document does not depend on which prober rebuilt it.
    """
    healthy: list[tuple[str, dict[str, Any]]] = []
    unhealthy: list[tuple[str, dict[str, Any]]] = []
    drop: list[str] = []
    for dep, raw in entries.items():
        try:
            value = orjson.loads(raw)
            ts = float(value["ts"])
            ep = dict(value["endpoint"])
            ok = bool(value["healthy"])
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            drop.append(dep)
            continue
        if now - ts > max_age:
            drop.append(dep)
            continue
        (healthy if ok else unhealthy).append((dep, ep))
    doc: dict[str, Any] = {
        "healthy_endpoints": [ep for _, ep in sorted(healthy, key=lambda x: x[0])],
        "unhealthy_endpoints": [ep for _, ep in sorted(unhealthy, key=lambda x: x[0])],
        "healthy_count": len(healthy),
        "unhealthy_count": len(unhealthy),
        "timestamp": now,
        "checked_by": checked_by,
    }
    return doc, sorted(drop)


def encode_document(doc: Mapping[str, Any]) -> bytes:
    """Encoded twice, as LiteLLM's `RedisCache.async_set_cache(key, safe_dumps(doc))` stores it."""
    return orjson.dumps(orjson.dumps(doc).decode())
