"""The health-state topic's value: one deployment's latest probe verdict (H1), as the enforced decider publishes
it and the health materializer writes it to LiteLLM's health-state map in Redis.

`{"deployment_id": ..., "is_healthy": ..., "timestamp": ..., "reason": ...}`, keyed by deployment id on a
compacted topic. Both sides use this module, so the shape is spelled once.
"""

from __future__ import annotations

from typing import Any

import orjson

from coolant.processors import HealthState


def encode_health_state(deployment_id: str, state: HealthState) -> bytes:
    return orjson.dumps({"deployment_id": deployment_id, **state.to_dict()})


def decode_health_state(raw: bytes | None) -> tuple[str, HealthState]:
    """The deployment id and its state; ValueError naming what is wrong with a value that is not one."""
    if raw is None:
        raise ValueError("health state: a tombstone (no value)")
    try:
        d: Any = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"health state: not JSON: {exc}") from None
    if not isinstance(d, dict):
        raise ValueError(f"health state: expected an object, got {type(d).__name__}")
    fields = (("deployment_id", str), ("is_healthy", bool), ("timestamp", int | float), ("reason", str))
    for name, kind in fields:
        value = d.get(name)
        if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
            raise ValueError(f"health state: {name} is missing or not a {getattr(kind, '__name__', 'number')}")
    return d["deployment_id"], HealthState(d["is_healthy"], float(d["timestamp"]), d["reason"])
