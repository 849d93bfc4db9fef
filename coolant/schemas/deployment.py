"""`coolant.deployment/1`: a registry entry published to the compacted deployments topic (§1.3)."""

from __future__ import annotations

import msgspec

from coolant.schemas.types import Duration, Name, NonNegativeInt

DEPLOYMENT_SCHEMA = "coolant.deployment/1"


class DeploymentRecord(msgspec.Struct, frozen=True, tag_field="schema", tag=DEPLOYMENT_SCHEMA):
    deployment_id: Name
    model_group: Name
    wildcard: bool | None = None
    """Absent: true when the model name contains `*`, as in the config file."""
    cooldown_time: Duration | None = None
    allowed_fails: NonNegativeInt | None = None
    allowed_fails_policy: dict[str, NonNegativeInt | None] | None = None
    """LiteLLM's keys (`RateLimitErrorAllowedFails`, …) as published; the registry interprets them."""
    deleted: bool | None = None

    schema = DEPLOYMENT_SCHEMA

    @property
    def is_wildcard(self) -> bool:
        return "*" in self.model_group if self.wildcard is None else self.wildcard
