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

The fleet and its traffic are described in `scenario`, the routers' view of cooldowns in `awareness`; their names
are importable from here too, the path scripts and examples use.

Command line::

    python -m coolant.sim.simulate --scenario s1 --minutes 10 --seed 1 --out s1.jsonl --config-out s1.yaml
"""

from __future__ import annotations

import argparse
import gzip
import heapq
import random
import sys
from collections import Counter, deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from coolant.schemas import Outcome, RateLimit, encode
from coolant.sim.awareness import (
    CooledFn,
    EngineCooldowns,
    PodEngineCooldowns,
    Schedule,
    ScheduleCooldowns,
    schedule_of,
)
from coolant.sim.scenario import (
    RATE_LIMIT_MESSAGE,
    SCENARIOS,
    AgentLoad,
    BackgroundLoad,
    Fault,
    Group,
    ProviderKey,
    Scenario,
    litellm_config,
    s1,
    s2_sparse,
    write_litellm_config,
)

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
