"""`coolant.deployment/1`: a registry entry published to the compacted deployments topic (§1.3)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from coolant.schemas.errors import InvalidRecord
from coolant.schemas.fields import opt_bool, opt_float, opt_int, opt_map, req_str

DEPLOYMENT_SCHEMA = "coolant.deployment/1"


@dataclass(frozen=True, slots=True)
class DeploymentRecord:
    deployment_id: str
    model_group: str
    wildcard: bool = False
    cooldown_time: float | None = None
    allowed_fails: int | None = None
    allowed_fails_policy: Mapping[str, Any] | None = None
    deleted: bool = False

    schema = DEPLOYMENT_SCHEMA

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DeploymentRecord:
        group = req_str(d, "model_group")
        cooldown_time = opt_float(d, "cooldown_time")
        if cooldown_time is not None and cooldown_time < 0:
            raise InvalidRecord(f"must be >= 0, got {cooldown_time}", "cooldown_time")
        allowed_fails = opt_int(d, "allowed_fails")
        if allowed_fails is not None and allowed_fails < 0:
            raise InvalidRecord(f"must be >= 0, got {allowed_fails}", "allowed_fails")
        policy = opt_map(d, "allowed_fails_policy")
        if policy is not None:
            for key, value in policy.items():
                if value is not None and (type(value) is not int or value < 0):
                    raise InvalidRecord(f"{key} must be an integer >= 0 or null", "allowed_fails_policy")
        return cls(
            req_str(d, "deployment_id"),
            group,
            opt_bool(d, "wildcard", "*" in group),
            cooldown_time,
            allowed_fails,
            policy,
            opt_bool(d, "deleted", False),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": DEPLOYMENT_SCHEMA,
            "deployment_id": self.deployment_id,
            "model_group": self.model_group,
            "wildcard": self.wildcard,
            "cooldown_time": self.cooldown_time,
            "allowed_fails": self.allowed_fails,
            "allowed_fails_policy": dict(self.allowed_fails_policy) if self.allowed_fails_policy is not None else None,
            "deleted": self.deleted,
        }
