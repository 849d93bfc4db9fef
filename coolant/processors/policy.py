"""The policy's inputs as plain data: deployment registry, router settings, coolant options.

Built by `coolant.config` from a LiteLLM proxy YAML (contract §3), or directly in tests.
Everything here is immutable so one `Policy` can be shared by replay, tuning grids and agents.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

# §3.7: resolution order of the policy categories (key = category + "ErrorAllowedFails").
CATEGORIES: tuple[str, ...] = (
    "ContentPolicyViolation",
    "BadRequest",
    "Authentication",
    "Timeout",
    "RateLimit",
    "InternalServer",
    "ServiceUnavailable",
    "BadGateway",
    "NotFound",
)
POLICY_KEY_SUFFIX = "ErrorAllowedFails"
WINDOW_SECONDS = 60
COUNTER_TTL = 60
"""D7/LC1: LiteLLM's `ttl=60` on its `<id>:successes` and `<id>:fails` keys (track_deployment_metrics.py)."""
SLIDING_BUCKET = 5
"""X1 bucket width b: divides 60 and is <= 5, as the spec requires."""

AllowedFailsPolicy = Mapping[str, int]
"""Category name (e.g. "RateLimit") -> allowed fails; only keys with an integer entry."""


@dataclass(frozen=True, slots=True)
class DeploymentEntry:
    """One registry entry (R1). `allowed_fails_policy` is None when absent, {} when an empty map."""

    deployment_id: str
    model_group: str
    wildcard: bool = False
    cooldown_time: float | None = None
    params_cooldown_time: float | None = None
    allowed_fails: int | None = None
    allowed_fails_policy: AllowedFailsPolicy | None = None


@dataclass(frozen=True, slots=True)
class RouterSettings:
    """The `router_settings` the spec reads (§2.2)."""

    cooldown_time: float | None = None
    disable_cooldowns: bool = False
    allowed_fails: int | None = None
    allowed_fails_policy: AllowedFailsPolicy | None = None
    fallback_groups: frozenset[str] = frozenset()
    """Groups that are a key of some `fallbacks` map with a non-empty target list (R4)."""


@dataclass(frozen=True, slots=True)
class Backoff:
    """X2 exponential backoff parameters."""

    base: float = 5.0
    factor: float = 2.0
    max: float = 300.0
    reset_after: float = 300.0
    probation: bool = False
    """X7: after a backed-off cooldown ends, the first failure re-cools at once (next step)."""


@dataclass(frozen=True, slots=True)
class Recovery:
    """RC1-RC5: recovery that probes (docs/probe.md). Probe records decide when a cooled deployment comes back."""

    release_after: int = 2
    """RC4: healthy probes in a row that release a cooled deployment early."""
    extend: float = 10.0
    """RC3: seconds past a failing probe the cooldown is held (longer than the prober's cooled interval)."""
    max_hold: float = 300.0
    """RC3: probes hold a deployment at most this long past the hold's first failing probe; then the cooldown
    runs out and real traffic decides (half-open under the profile's own rules)."""


@dataclass(frozen=True, slots=True)
class Quota:
    """X6 quota-aware cooldowns: cool a deployment whose provider announced its budget is spent."""

    requests_threshold: int = 0
    """Cool when the announced remaining requests are at or below this."""
    tokens_per_request: int | None = None
    """When set, also cool when the announced remaining tokens are below this estimate."""


@dataclass(frozen=True, slots=True)
class Outlier:
    """The outlier-detection profile's knobs (docs/outlier.md, X9-X13); every one has a default."""

    consecutive: int = 4
    """X10: counted failures in a row that cool a deployment of a group of several."""
    consecutive_single: int = 3
    """X10/X12: the same for a group's only deployment when the group has fallbacks (one failed request of a
    router with `num_retries: 2` is three attempts in a row)."""
    rate_window: int = 10
    """X11: seconds of recent traffic (whole seconds, 1-60) the failure share is taken over."""
    rate_threshold: float = 0.5
    """X11: the failure share that cools, compared strictly (f/n > rate_threshold)."""
    rate_min_requests: int = 10
    """X11: the request volume the recent window must hold before its share is trusted."""


OUTLIER_MIN_REQUESTS = 10
"""X9.5: V2.3's minimum under the profile (`thresholds.min_requests`), where the compatible profile has 5."""
OUTLIER_BACKOFF = Backoff(probation=True)
"""X13: the profile's `backoff` when the config sets none: X2's ejection time x count and X7's half-open."""


@dataclass(frozen=True, slots=True)
class Options:
    """coolant's own settings (the `coolant:` section), defaults = compatible profile."""

    profile: Literal["compatible", "outlier"] = "compatible"
    window: Literal["tumbling", "sliding"] = "tumbling"
    count_attempts: Literal["all", "final_only"] = "all"
    recool: Literal["extend", "overwrite"] = "extend"
    recool_coalesce: float | None = None
    """X8: absorb a re-cool that extends a cooldown still in force by less than this many seconds."""
    litellm_counters: bool = True
    """D7: V2.2/V2.3 also read LiteLLM's own first-increment counters, kept fleet-wide in event time."""
    allowed_fails_window: float | None = None
    late_after: float = 180.0
    health_cooldown: bool = False
    backoff: Backoff | None = None
    max_ejection_percent: int = 100
    max_cooldown_time: float | None = None
    quota: Quota | None = None
    recovery: Recovery | None = None
    """RC1-RC5: probe records release and hold cooled deployments (off: probes only feed H1-H3)."""
    failure_rate: float = 0.5
    min_requests: int = 5
    outage_min_requests: int = 1000
    outlier: Outlier | None = None
    """The outlier profile's knobs; set exactly when `profile` is "outlier" (docs/outlier.md)."""

    slot_width: int = field(init=False, repr=False, compare=False)
    """Seconds per window slot: a whole window (tumbling) or one X1 bucket (sliding). Derived."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "slot_width", SLIDING_BUCKET if self.window == "sliding" else WINDOW_SECONDS)


@dataclass(frozen=True, slots=True)
class Registry:
    """Deployments by id, with group sizes precomputed (R4)."""

    entries: Mapping[str, DeploymentEntry] = field(default_factory=dict)
    group_sizes: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, entries: Iterable[DeploymentEntry]) -> Registry:
        by_id = {e.deployment_id: e for e in entries}
        return cls(by_id, dict(Counter(e.model_group for e in by_id.values())))

    def get(self, deployment_id: str) -> DeploymentEntry | None:
        return self.entries.get(deployment_id)

    def size(self, group: str) -> int:
        return self.group_sizes.get(group, 0)

    def upsert(self, entry: DeploymentEntry) -> Registry:
        """R2: a deployment record replaces the whole entry."""
        merged = dict(self.entries)
        merged[entry.deployment_id] = entry
        return Registry.of(merged.values())

    def remove(self, deployment_id: str) -> Registry:
        return Registry.of(e for e in self.entries.values() if e.deployment_id != deployment_id)


@dataclass(frozen=True, slots=True)
class Policy:
    """Everything a decision reads besides the records and the state."""

    registry: Registry = field(default_factory=Registry)
    router: RouterSettings = field(default_factory=RouterSettings)
    options: Options = field(default_factory=Options)

    def single(self, group: str) -> bool:
        return self.registry.size(group) == 1

    def lone(self, group: str) -> bool:
        return self.single(group) and group not in self.router.fallback_groups
