"""The pure policy core: no I/O, no Faust, no clock. Same records in, same cooldowns out."""

from coolant.processors.dispositions import Disposition, Skip
from coolant.processors.engine import Engine, Step, eject, step_health, step_outcome
from coolant.processors.policy import Backoff, DeploymentEntry, Options, Policy, Registry, RouterSettings
from coolant.processors.state import DeploymentState, HealthState

__all__ = [
    "Backoff",
    "DeploymentEntry",
    "DeploymentState",
    "Disposition",
    "Engine",
    "HealthState",
    "Options",
    "Policy",
    "Registry",
    "RouterSettings",
    "Skip",
    "Step",
    "eject",
    "step_health",
    "step_outcome",
]
