"""A simulated fleet: the provider keys and their limits, the model groups and fallbacks, the traffic (coding-agent
sessions over a steady background), injected faults, and the LiteLLM proxy config that describes the same fleet.

Scenario S1 (free-tier keys drained by agents) and a sparse one are ready-made (`SCENARIOS`); `simulate` runs one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import yaml

__all__ = [
    "AUTH_MESSAGE",
    "OUTAGE_MESSAGE",
    "RATE_LIMIT_MESSAGE",
    "SCENARIOS",
    "AgentLoad",
    "BackgroundLoad",
    "Fault",
    "Group",
    "ProviderKey",
    "Scenario",
    "litellm_config",
    "s1",
    "s2_sparse",
    "write_litellm_config",
]

RATE_LIMIT_MESSAGE = (
    'litellm.RateLimitError: GeminiException - {"error": {"code": 429, "message": "Resource has been '
    'exhausted (e.g. check quota).", "status": "RESOURCE_EXHAUSTED"}}'
)
AUTH_MESSAGE = (
    'litellm.AuthenticationError: GeminiException - {"error": {"code": 401, "message": "API key not valid. '
    'Please pass a valid API key.", "status": "UNAUTHENTICATED"}}'
)
OUTAGE_MESSAGE = (
    'litellm.InternalServerError: GeminiException - {"error": {"code": 500, "message": "An internal error '
    'has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting", '
    '"status": "INTERNAL"}}'
)


@dataclass(frozen=True, slots=True)
class ProviderKey:
    """One provider API key = one LiteLLM deployment.

    The provider admits at most `rpm` requests in any sliding `window_s` seconds (rejected
    requests do not count) and answers the rest with 429 and `Retry-After: retry_after`.
    """

    deployment_id: str
    model: str
    """`litellm_params.model` in the written config."""
    rpm: int = 15
    window_s: float = 60.0
    retry_after: str | None = "30"
    api_key_env: str = "GEMINI_API_KEY"
    """Written as `api_key: os.environ/<api_key_env>` (never resolved)."""
    announce_quota: bool = False
    """Successes carry the budget left, as OpenAI's and Anthropic's rate-limit headers do (X6): the
    requests the window still admits, and the seconds until it is fully replenished (the providers'
    meaning of "reset": when the request just admitted leaves the window)."""


@dataclass(frozen=True, slots=True)
class Group:
    """A LiteLLM model group (`model_name`) and its keys."""

    name: str
    keys: tuple[ProviderKey, ...]


@dataclass(frozen=True, slots=True)
class Fault:
    """An injected fault: between `start_s` and `end_s` (seconds after the start) every attempt on
    `deployment_id` fails with this status, before the provider's rate limit is consulted."""

    deployment_id: str
    start_s: float
    end_s: float
    status_code: int = 401
    exception_type: str = "AuthenticationError"
    message: str = AUTH_MESSAGE
    latency_s: tuple[float, float] = (0.05, 0.15)

    @classmethod
    def auth(cls, deployment_id: str, start_s: float, end_s: float) -> Fault:
        """A revoked or mistyped key (scenario S4): 401 AuthenticationError."""
        return cls(deployment_id, start_s, end_s)

    @classmethod
    def outage(cls, deployment_id: str, start_s: float, end_s: float) -> Fault:
        """A provider outage: 500 InternalServerError after a slow-ish failure."""
        return cls(deployment_id, start_s, end_s, 500, "InternalServerError", OUTAGE_MESSAGE, (0.3, 2.0))


@dataclass(frozen=True, slots=True)
class AgentLoad:
    """Coding-agent sessions: starts are a Poisson process; each fires a burst of
    `requests` (uniform int range) spread uniformly over `span_s` seconds, from one pod."""

    sessions_per_minute: float = 1.5
    requests: tuple[int, int] = (10, 15)
    span_s: tuple[float, float] = (10.0, 20.0)
    group: str = "gemini-flash"


@dataclass(frozen=True, slots=True)
class BackgroundLoad:
    """Steady traffic: a Poisson process of single requests, each from a random pod."""

    requests_per_minute: float = 6.0
    group: str = "gemini-flash"


@dataclass(frozen=True, slots=True)
class Scenario:
    """A fleet, its traffic and its faults. `fallbacks` maps a group to the groups tried after it."""

    name: str
    groups: tuple[Group, ...]
    fallbacks: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    pods: tuple[str, ...] = ("litellm-0", "litellm-1", "litellm-2")
    agents: AgentLoad | None = field(default_factory=AgentLoad)
    background: BackgroundLoad | None = field(default_factory=BackgroundLoad)
    faults: tuple[Fault, ...] = ()
    num_retries: int = 5
    """Attempts per request = num_retries + 1, over all tiers together."""
    routing: Literal["least-busy", "round-robin"] = "least-busy"
    success_latency_s: tuple[float, float] = (0.8, 1.2)
    rate_limit_latency_s: tuple[float, float] = (0.05, 0.3)
    cooldown_time: float = 60
    """`router_settings.cooldown_time` of the written config."""
    allowed_fails: int | None = 1
    """`router_settings.allowed_fails` of the written config (None: not written, V2 rules)."""

    def group(self, name: str) -> Group:
        for g in self.groups:
            if g.name == name:
                return g
        raise KeyError(f"scenario {self.name!r} has no group {name!r}")

    def provider_keys(self) -> Iterator[tuple[Group, ProviderKey]]:
        """Every (group, key) pair, in config order."""
        for g in self.groups:
            for k in g.keys:
                yield g, k


def s1(**changes: Any) -> Scenario:
    """Scenario S1: 4 Gemini keys in 3 tiers behind 3 gateway pods, drained by coding agents.

    Tier 1 `gemini-flash`: two free keys (15 rpm each); tier 2 `gemini-pro-plan`: one paid key
    (1000 rpm); tier 3 `gemini-backup`: one key (60 rpm). `gemini-flash` falls back to the other
    two; `num_retries: 5`, `allowed_fails: 1`, `cooldown_time: 60`. `changes` replace fields.
    """
    flash = "gemini/gemini-2.5-flash"
    scenario = Scenario(
        name="s1",
        groups=(
            Group(
                "gemini-flash",
                (
                    ProviderKey("gemini-flash-free-1", flash, rpm=15, api_key_env="GEMINI_FREE_KEY_1"),
                    ProviderKey("gemini-flash-free-2", flash, rpm=15, api_key_env="GEMINI_FREE_KEY_2"),
                ),
            ),
            Group(
                "gemini-pro-plan",
                (ProviderKey("gemini-pro-paid-1", "gemini/gemini-2.5-pro", rpm=1000, api_key_env="GEMINI_PAID_KEY"),),
            ),
            Group("gemini-backup", (ProviderKey("gemini-backup-1", flash, rpm=60, api_key_env="GEMINI_BACKUP_KEY"),)),
        ),
        fallbacks={"gemini-flash": ("gemini-pro-plan", "gemini-backup")},
    )
    return replace(scenario, **changes)


def s2_sparse(**changes: Any) -> Scenario:
    """Scenario S2 at low traffic: 10 pods x 3 requests a minute over 3 deployments of one group, V2 rules.

    Each pod sees too few requests a minute for the "5 requests, > 50 % failed" rule, so LiteLLM's
    per-process counting never cools a dead deployment; `faults` kills one (`Fault.outage`).
    Round-robin, no retries: every attempt on the dead deployment is a failed request.
    """
    keys = tuple(
        ProviderKey(f"gpt4o-{region}", "openai/gpt-4o", rpm=10_000, retry_after=None, api_key_env=f"OPENAI_KEY_{i}")
        for i, region in enumerate(("eu", "us", "asia"))
    )
    scenario = Scenario(
        name="s2-sparse",
        groups=(Group("gpt-4o", keys),),
        pods=tuple(f"litellm-{i}" for i in range(10)),
        agents=None,
        background=BackgroundLoad(requests_per_minute=30.0, group="gpt-4o"),
        faults=(Fault.outage("gpt4o-eu", 0.0, 1e9),),
        num_retries=0,
        routing="round-robin",
        success_latency_s=(0.5, 1.5),
        cooldown_time=5,
        allowed_fails=None,
    )
    return replace(scenario, **changes)


SCENARIOS: dict[str, Callable[..., Scenario]] = {"s1": s1, "s2-sparse": s2_sparse}


def litellm_config(
    scenario: Scenario,
    *,
    cooldown_time: float | None = None,
    pin_cooldown_time: bool = False,
    coolant: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The LiteLLM proxy config (plus an optional `coolant:` section) for the scenario's fleet.

    `cooldown_time` overrides the scenario's `router_settings.cooldown_time`. Note that by spec
    T2 a 429's `Retry-After` beats the router-level value: with scenario S1's "30" the cooldowns last 30 s
    whatever `router_settings.cooldown_time` says. `pin_cooldown_time` also writes the value as
    each deployment's `model_info.cooldown_time`, which beats Retry-After (T1).
    """
    ct = scenario.cooldown_time if cooldown_time is None else cooldown_time
    model_list = []
    for group, key in scenario.provider_keys():
        info: dict[str, Any] = {"id": key.deployment_id}
        if pin_cooldown_time:
            info["cooldown_time"] = ct
        model_list.append(
            {
                "model_name": group.name,
                "litellm_params": {"model": key.model, "api_key": f"os.environ/{key.api_key_env}", "rpm": key.rpm},
                "model_info": info,
            }
        )
    router: dict[str, Any] = {
        "routing_strategy": "least-busy" if scenario.routing == "least-busy" else "simple-shuffle",
        "num_retries": scenario.num_retries,
    }
    if scenario.allowed_fails is not None:
        router["allowed_fails"] = scenario.allowed_fails
    router["cooldown_time"] = ct
    if scenario.fallbacks:
        router["fallbacks"] = [{g: list(targets)} for g, targets in scenario.fallbacks.items()]
    config: dict[str, Any] = {"model_list": model_list, "router_settings": router}
    if coolant is not None:
        config["coolant"] = dict(coolant)
    return config


def write_litellm_config(scenario: Scenario, path: str | Path, **kwargs: Any) -> None:
    """Write `litellm_config(scenario, **kwargs)` as YAML."""
    text = yaml.safe_dump(litellm_config(scenario, **kwargs), sort_keys=False, default_flow_style=False)
    header = f"# LiteLLM proxy config for simulated scenario {scenario.name} (coolant.sim.simulate)\n"
    Path(path).write_text(header + text)
