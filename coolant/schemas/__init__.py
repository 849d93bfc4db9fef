"""Event records of the contract (§1) and their validation: one definition per record."""

from coolant.schemas.codec import InputRecord, Record, decode, decode_block, encode, from_dict, to_dict
from coolant.schemas.cooldown import COOLDOWN_SCHEMA, Cooldown, Reason, Window
from coolant.schemas.deployment import DEPLOYMENT_SCHEMA, DeploymentRecord
from coolant.schemas.errors import InvalidRecord
from coolant.schemas.health import HEALTH_SCHEMA, Health
from coolant.schemas.outcome import OUTCOME_SCHEMA, Outcome, RateLimit
from coolant.schemas.transition import TRANSITION_SCHEMA, HealthTransition

__all__ = [
    "COOLDOWN_SCHEMA",
    "DEPLOYMENT_SCHEMA",
    "HEALTH_SCHEMA",
    "OUTCOME_SCHEMA",
    "TRANSITION_SCHEMA",
    "Cooldown",
    "DeploymentRecord",
    "Health",
    "HealthTransition",
    "InputRecord",
    "InvalidRecord",
    "Outcome",
    "RateLimit",
    "Reason",
    "Record",
    "Window",
    "decode",
    "decode_block",
    "encode",
    "from_dict",
    "to_dict",
]
