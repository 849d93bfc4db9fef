"""Event records of the contract (§1) and their validation: one definition per record."""

from coolant.schemas.codec import InputRecord, Record, decode_json, from_dict, parse, to_json
from coolant.schemas.cooldown import COOLDOWN_SCHEMA, REASONS, Cooldown, Window
from coolant.schemas.deployment import DEPLOYMENT_SCHEMA, DeploymentRecord
from coolant.schemas.errors import InvalidRecord
from coolant.schemas.health import HEALTH_SCHEMA, Health
from coolant.schemas.outcome import OUTCOME_SCHEMA, Outcome

__all__ = [
    "COOLDOWN_SCHEMA",
    "DEPLOYMENT_SCHEMA",
    "HEALTH_SCHEMA",
    "OUTCOME_SCHEMA",
    "REASONS",
    "Cooldown",
    "DeploymentRecord",
    "Health",
    "InputRecord",
    "InvalidRecord",
    "Outcome",
    "Record",
    "Window",
    "decode_json",
    "from_dict",
    "parse",
    "to_json",
]
