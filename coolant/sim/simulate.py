"""Deterministic LLM-gateway traffic simulator, modelled on scenario S1 (free-tier keys drained by agents).

A discrete-event simulation of a small LiteLLM fleet: gateway pods route requests over provider
keys grouped in tiers, retry and fall back across tiers, and log one `coolant.outcome/1` record per
attempt. Providers enforce a per-key request limit over a *sliding* 60 s window and answer 429
with `Retry-After` when it is full. Coding-agent sessions fire bursts of 10-15 requests within
10-20 s on top of a steady background load; faults (a broken key, a 500 outage) can be injected.

Everything is seeded: the same scenario, start time, duration and seed give the same records,
byte for byte. No wall clock is read; times are `start_ts` + simulated seconds.

The router can be made cooldown-aware: it then skips keys that are cooled at the moment it
routes. The cooldowns come from a callable `(deployment_id, ts) -> bool`, from a schedule
(`deployment_id -> [(start, until), ...]`), or from coolant itself in a closed loop
(`EngineCooldowns`, which feeds every record to the policy engine as it is produced). That is
what lets a tuning tool show that `cooldown_time: 30` flaps (the key comes back while the
provider's 60 s window is still full and collects 429s again) and `60` does not.

Command line::

    python -m coolant.sim.simulate --scenario s1 --minutes 10 --seed 1 --out s1.jsonl --config-out s1.yaml
"""

from __future__ import annotations

import argparse
import bisect
import gzip
import heapq
import math
import random
import sys
from collections import Counter, deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, BinaryIO, Literal

import yaml

from coolant.processors import Engine, Policy
from coolant.schemas import Cooldown, Outcome, RateLimit, encode

__all__ = [
    "DEFAULT_START_TS",
    "SCENARIOS",
    "AgentLoad",
    "BackgroundLoad",
    "CooledFn",
    "EngineCooldowns",
    "Fault",
    "Group",
    "PodEngineCooldowns",
    "ProviderKey",
    "Scenario",
    "Schedule",
    "ScheduleCooldowns",
    "SimStats",
    "litellm_config",
    "main",
    "s1",
    "s2_sparse",
    "schedule_of",
    "simulate",
    "write_litellm_config",
]

DEFAULT_START_TS = 1_767_225_600.0
"""2026-01-01T00:00:00Z: the default start of simulated time (a whole minute)."""

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


# --------------------------------------------------------------------------------------------
# Scenario description.


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


# --------------------------------------------------------------------------------------------
# Cooldown awareness.

CooledFn = Callable[[str, float], bool]
"""`(deployment_id, ts) -> True` when routers must skip the deployment at `ts`."""
Schedule = Mapping[str, Sequence[tuple[float, float]]]
"""deployment_id -> cooldown intervals `(start, until)`; cooled when start <= ts < until."""


class ScheduleCooldowns:
    """A fixed cooldown schedule as a `CooledFn` (intervals merged, looked up by bisection)."""

    def __init__(self, schedule: Schedule) -> None:
        self._starts: dict[str, list[float]] = {}
        self._ends: dict[str, list[float]] = {}
        for dep, intervals in schedule.items():
            starts: list[float] = []
            ends: list[float] = []
            for start, until in sorted(intervals):
                if until <= start:
                    continue
                if ends and start <= ends[-1]:
                    ends[-1] = max(ends[-1], until)
                else:
                    starts.append(start)
                    ends.append(until)
            self._starts[dep] = starts
            self._ends[dep] = ends

    def __call__(self, deployment_id: str, ts: float) -> bool:
        starts = self._starts.get(deployment_id)
        if not starts:
            return False
        i = bisect.bisect_right(starts, ts) - 1
        return i >= 0 and ts < self._ends[deployment_id][i]


class EngineCooldowns:
    """Closed loop: coolant's policy engine decides the cooldowns the simulated routers obey.

    `simulate` calls `observe` with every record just before yielding it, so a routing decision
    at time t sees the cooldowns decided from every attempt that finished before t, fleet-wide
    (as if the cooldown topic and Redis had no delay). `cooldowns` keeps what was emitted.
    """

    def __init__(self, policy: Policy) -> None:
        self.engine = Engine(policy)
        self.cooldowns: list[Cooldown] = []
        self._until: dict[str, float] = {}

    def observe(self, rec: Outcome) -> None:
        cd = self.engine.feed(rec).cooldown
        if cd is not None:
            self.cooldowns.append(cd)
            if cd.until > self._until.get(cd.deployment_id, -math.inf):
                self._until[cd.deployment_id] = cd.until

    def __call__(self, deployment_id: str, ts: float) -> bool:
        return ts < self._until.get(deployment_id, -math.inf)


class PodEngineCooldowns:
    """LiteLLM alone: every pod decides from its own attempts only, and skips only what it cooled itself.

    One policy engine per pod, fed that pod's records (the compatible profile models LiteLLM's own
    per-process rules, up to the deliberate differences D1-D6). `simulate` asks `cooled_on(pod, ...)`.
    """

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.pods: dict[str, EngineCooldowns] = {}
        self.cooldowns: list[Cooldown] = []

    def _pod(self, pod: str) -> EngineCooldowns:
        engine = self.pods.get(pod)
        if engine is None:
            engine = self.pods[pod] = EngineCooldowns(self.policy)
        return engine

    def observe(self, rec: Outcome) -> None:
        engine = self._pod(rec.gateway or "")
        before = len(engine.cooldowns)
        engine.observe(rec)
        self.cooldowns.extend(engine.cooldowns[before:])

    def cooled_on(self, pod: str, deployment_id: str, ts: float) -> bool:
        return self._pod(pod)(deployment_id, ts)

    def __call__(self, deployment_id: str, ts: float) -> bool:
        return any(engine(deployment_id, ts) for engine in self.pods.values())


def schedule_of(cooldowns: Sequence[Cooldown]) -> dict[str, list[tuple[float, float]]]:
    """The schedule (deployment_id -> [(ts, until), ...]) of a list of cooldown records."""
    out: dict[str, list[tuple[float, float]]] = {}
    for cd in cooldowns:
        out.setdefault(cd.deployment_id, []).append((cd.ts, cd.until))
    return out


# --------------------------------------------------------------------------------------------
# The simulation.


@dataclass(slots=True)
class SimStats:
    """What happened to the requests (records only show attempts)."""

    requests: int = 0
    succeeded: int = 0
    failed: int = 0
    """Requests whose last attempt failed (the caller saw an error)."""
    failed_by_status: Counter[int] = field(default_factory=Counter)
    """Failed requests by the status of their last attempt (0: none)."""
    unroutable: int = 0
    """Requests for which every key of every tier was cooled: no attempt, no record."""
    attempts: Counter[tuple[str, int]] = field(default_factory=Counter)
    """(deployment_id, status) -> attempts; status 200 for a success."""

    def rate_limited(self, deployment_ids: Sequence[str] | None = None) -> int:
        return sum(
            n for (d, s), n in self.attempts.items() if s == 429 and (deployment_ids is None or d in deployment_ids)
        )


@dataclass(slots=True)
class _Request:
    rid: int
    pod: str
    chain: tuple[str, ...]
    """The group, then its fallbacks, in order."""
    tier: int = 0
    attempt: int = 0
    tried: set[str] = field(default_factory=set)


@dataclass(slots=True)
class _Attempt:
    req: _Request
    group: str
    key: ProviderKey
    start: float
    ok: bool
    status: int | None
    exception_type: str | None
    message: str | None
    retry_after: str | None
    quota: tuple[int, float] | None = None
    """(remaining requests, when the window is fully replenished) the provider announces on a success."""


_FINISH, _ARRIVE, _SESSION, _BACKGROUND = 0, 1, 2, 3
"""Event kinds; at equal times a finish is handled first, so routing sees every earlier record."""


def simulate(
    scenario: Scenario,
    start_ts: float = DEFAULT_START_TS,
    duration_s: float = 600.0,
    *,
    seed: int = 0,
    cooldown_aware: CooledFn | Schedule | None = None,
    stats: SimStats | None = None,
) -> Iterator[Outcome]:
    """Yield one `Outcome` per attempt, in event-time (`ts`) order.

    Requests arrive in `[start_ts, start_ts + duration_s)`; attempts still in flight at the end
    complete. A request is routed to its group's keys (least-busy per pod, or round-robin; each
    key at most once per request), then to its fallback groups in order, for at most
    `num_retries + 1` attempts; a failed attempt is retried at once, as LiteLLM does when other
    deployments are available. `final` is true on the attempt whose result reached the caller.

    `cooldown_aware`: None = routers ignore cooldowns; a `CooledFn` or a `Schedule` = routers skip
    the keys it reports cooled. If the callable has an `observe(record)` method (`EngineCooldowns`)
    it receives each record before it is yielded. Arrivals use their own random streams, so runs
    that differ only in cooldowns see the same requests (and the same event ids).
    """
    if duration_s < 0:
        raise ValueError("duration_s must be >= 0")
    cooled: CooledFn | None
    if cooldown_aware is None:
        cooled = None
    elif isinstance(cooldown_aware, Mapping):
        cooled = ScheduleCooldowns(cooldown_aware)
    else:
        cooled = cooldown_aware
    observe: Callable[[Outcome], None] | None = getattr(cooled, "observe", None)
    cooled_on: Callable[[str, str, float], bool] | None = getattr(cooled, "cooled_on", None)
    st = stats if stats is not None else SimStats()

    groups = {g.name: g for g in scenario.groups}
    for chain_group in [*scenario.fallbacks, *(g for targets in scenario.fallbacks.values() for g in targets)]:
        scenario.group(chain_group)  # fail early on a typo
    faults: dict[str, list[Fault]] = {}
    for f in scenario.faults:
        faults.setdefault(f.deployment_id, []).append(f)
    end_ts = start_ts + duration_s
    session_rng = random.Random(f"{seed}:sessions")
    background_rng = random.Random(f"{seed}:background")
    latency_rng = random.Random(f"{seed}:latency")

    window: dict[str, deque[float]] = {k.deployment_id: deque() for _, k in scenario.provider_keys()}
    in_flight: dict[tuple[str, str], int] = Counter()  # (pod, deployment_id) -> attempts in flight
    rotation: dict[tuple[str, str], int] = Counter()  # (pod, group) -> round-robin position

    events: list[tuple[float, int, int, Any]] = []
    seq = 0

    def push(t: float, kind: int, payload: Any) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(events, (t, kind, seq, payload))

    agents, background = scenario.agents, scenario.background
    if agents is not None and agents.sessions_per_minute > 0:
        push(start_ts + session_rng.expovariate(agents.sessions_per_minute / 60), _SESSION, None)
    if background is not None and background.requests_per_minute > 0:
        push(start_ts + background_rng.expovariate(background.requests_per_minute / 60), _BACKGROUND, None)

    def chain(group: str) -> tuple[str, ...]:
        return (group, *scenario.fallbacks.get(group, ()))

    def route(req: _Request, now: float) -> tuple[str, ProviderKey] | None:
        """The next (group, key) for the request, skipping tried and cooled keys; None if none is left."""
        while req.tier < len(req.chain):
            name = req.chain[req.tier]
            free = [
                k
                for k in groups[name].keys
                if k.deployment_id not in req.tried
                and not (
                    cooled_on(req.pod, k.deployment_id, now)
                    if cooled_on is not None
                    else cooled is not None and cooled(k.deployment_id, now)
                )
            ]
            if free:
                turn = rotation[req.pod, name]
                rotation[req.pod, name] = turn + 1
                if scenario.routing == "least-busy":
                    # fewest in flight from this pod; ties broken by the pod's rotation
                    n = len(free)
                    order = [free[(turn + i) % n] for i in range(n)]
                    return name, min(order, key=lambda k: in_flight[req.pod, k.deployment_id])
                return name, free[turn % len(free)]
            req.tier += 1
        return None

    def start_attempt(req: _Request, group: str, key: ProviderKey, now: float) -> None:
        """Send the attempt: injected faults first, then the provider's sliding-window limit."""
        dep = key.deployment_id
        req.tried.add(dep)
        in_flight[req.pod, dep] += 1
        fault = next((f for f in faults.get(dep, ()) if start_ts + f.start_s <= now < start_ts + f.end_s), None)
        if fault is not None:
            att = _Attempt(req, group, key, now, False, fault.status_code, fault.exception_type, fault.message, None)
            latency = latency_rng.uniform(*fault.latency_s)
        else:
            admitted = window[dep]
            while admitted and admitted[0] <= now - key.window_s:
                admitted.popleft()
            if len(admitted) < key.rpm:
                admitted.append(now)
                quota = (key.rpm - len(admitted), now + key.window_s) if key.announce_quota else None
                att = _Attempt(req, group, key, now, True, None, None, None, None, quota)
                latency = latency_rng.uniform(*scenario.success_latency_s)
            else:
                att = _Attempt(req, group, key, now, False, 429, "RateLimitError", RATE_LIMIT_MESSAGE, key.retry_after)
                latency = latency_rng.uniform(*scenario.rate_limit_latency_s)
        push(now + latency, _FINISH, att)

    def arrive(pod: str, group: str, now: float) -> None:
        st.requests += 1
        req = _Request(st.requests, pod, chain(group))
        target = route(req, now)
        if target is None:
            st.unroutable += 1
            return
        start_attempt(req, *target, now)

    while events:
        now, kind, _, payload = heapq.heappop(events)
        if kind == _SESSION:
            assert agents is not None
            if now >= end_ts:
                continue
            pod = session_rng.choice(scenario.pods)
            n = session_rng.randint(*agents.requests)
            span = session_rng.uniform(*agents.span_s)
            for t in sorted(now + session_rng.uniform(0, span) for _ in range(n)):
                if t < end_ts:
                    push(t, _ARRIVE, (pod, agents.group))
            push(now + session_rng.expovariate(agents.sessions_per_minute / 60), _SESSION, None)
        elif kind == _BACKGROUND:
            assert background is not None
            if now >= end_ts:
                continue
            arrive(background_rng.choice(scenario.pods), background.group, now)
            push(now + background_rng.expovariate(background.requests_per_minute / 60), _BACKGROUND, None)
        elif kind == _ARRIVE:
            arrive(payload[0], payload[1], now)
        else:
            att: _Attempt = payload
            req = att.req
            dep = att.key.deployment_id
            in_flight[req.pod, dep] -= 1
            st.attempts[dep, 200 if att.ok else (att.status or 0)] += 1
            final = True
            if att.ok:
                st.succeeded += 1
            else:
                target = route(req, now) if req.attempt < scenario.num_retries else None
                if target is None:
                    st.failed += 1
                    st.failed_by_status[att.status or 0] += 1
                else:
                    final = False
            rec = Outcome(
                event_id=f"{scenario.name}-{seed}-r{req.rid:06d}-a{req.attempt}",
                ts=round(now, 3),
                deployment_id=dep,
                model_group=att.group,
                ok=att.ok,
                status_code=att.status,
                exception_type=att.exception_type,
                exception_message=att.message,
                retry_after=att.retry_after,
                attempt=req.attempt,
                final=final,
                gateway=req.pod,
                latency_ms=round((now - att.start) * 1000, 1),
                ratelimit=None
                if att.quota is None
                else RateLimit(remaining_requests=att.quota[0], reset_requests=round(max(0.0, att.quota[1] - now), 3)),
            )
            if not final:
                assert target is not None
                req.attempt += 1
                start_attempt(req, *target, now)
            if observe is not None:
                observe(rec)
            yield rec


# --------------------------------------------------------------------------------------------
# The matching LiteLLM config.


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


# --------------------------------------------------------------------------------------------
# Command line.


def _open_out(path: str) -> BinaryIO:
    if path == "-":
        return sys.stdout.buffer
    if path.endswith(".gz"):
        return gzip.open(path, "wb")  # type: ignore[return-value]
    return open(path, "wb")


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m coolant.sim.simulate`: write simulated outcome records (JSONL) and optionally the config."""
    p = argparse.ArgumentParser(prog="python -m coolant.sim.simulate", description=__doc__.split("\n\n")[0])
    p.add_argument("--scenario", choices=sorted(SCENARIOS), default="s1")
    p.add_argument("--minutes", type=float, default=10.0, help="arrivals during this many minutes (default 10)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="JSONL output (.gz compressed; - for stdout)")
    p.add_argument("--start", type=float, default=DEFAULT_START_TS, help="start, epoch seconds (default 2026-01-01)")
    p.add_argument("--config-out", help="also write the matching LiteLLM config YAML here")
    p.add_argument("--cooldown-time", type=float, help="router cooldown_time of the config (default: the scenario's)")
    p.add_argument(
        "--cooldown-aware",
        action="store_true",
        help="routers skip keys cooled by coolant's policy over that config (closed loop)",
    )
    args = p.parse_args(argv)
    if args.minutes < 0:
        p.error("--minutes must be >= 0")
    scenario = SCENARIOS[args.scenario]()
    config = litellm_config(scenario, cooldown_time=args.cooldown_time)
    if args.config_out:
        write_litellm_config(scenario, args.config_out, cooldown_time=args.cooldown_time)
    oracle = None
    if args.cooldown_aware:
        from coolant.config.loader import parse_config

        oracle = EngineCooldowns(parse_config(config, "<simulated>").policy)
    stats = SimStats()
    out = _open_out(args.out)
    records = 0
    try:
        for rec in simulate(
            scenario, args.start, args.minutes * 60, seed=args.seed, cooldown_aware=oracle, stats=stats
        ):
            out.write(encode(rec) + b"\n")
            records += 1
    finally:
        if out is sys.stdout.buffer:
            out.flush()
        else:
            out.close()
    by_key = ", ".join(
        f"{k.deployment_id} {stats.attempts[k.deployment_id, 200]} ok/{stats.attempts[k.deployment_id, 429]} 429"
        for _, k in scenario.provider_keys()
    )
    print(
        f"{records} records, {stats.requests} requests ({stats.succeeded} ok, {stats.failed} failed, "
        f"{stats.unroutable} unroutable); {by_key}"
        + (f"; {len(oracle.cooldowns)} cooldowns" if oracle is not None else ""),
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
