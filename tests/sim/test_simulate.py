"""coolant.sim.simulate: determinism, valid records, and scenario S1's properties (rate-limit flapping)."""

from __future__ import annotations

import gzip
import itertools
import subprocess
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from coolant.config.loader import load_config, parse_config
from coolant.processors import Engine, Policy
from coolant.schemas import Outcome, decode, encode
from coolant.sim.simulate import (
    DEFAULT_START_TS,
    AgentLoad,
    EngineCooldowns,
    Fault,
    Scenario,
    ScheduleCooldowns,
    SimStats,
    litellm_config,
    main,
    s1,
    schedule_of,
    simulate,
    write_litellm_config,
)

T0 = DEFAULT_START_TS
FREE = ("gemini-flash-free-1", "gemini-flash-free-2")
GROUP_OF = {
    "gemini-flash-free-1": "gemini-flash",
    "gemini-flash-free-2": "gemini-flash",
    "gemini-pro-paid-1": "gemini-pro-plan",
    "gemini-backup-1": "gemini-backup",
}


def run(scenario: Scenario | None = None, minutes: float = 10, seed: int = 1, **kwargs: Any) -> list[Outcome]:
    return list(simulate(scenario or s1(), T0, minutes * 60, seed=seed, **kwargs))


def rate_limited(records: Sequence[Outcome], deployments: Sequence[str] = FREE) -> int:
    return sum(1 for r in records if r.status_code == 429 and r.deployment_id in deployments)


def pinned_policy(cooldown_time: float, scenario: Scenario | None = None) -> Policy:
    """S1's config with `cooldown_time` written per deployment, so it beats the 429's Retry-After (T1)."""
    config = litellm_config(scenario or s1(), cooldown_time=cooldown_time, pin_cooldown_time=True)
    return parse_config(config, "<s1>").policy


# --------------------------------------------------------------------------------------------
# Determinism and record validity.


def test_same_seed_same_records() -> None:
    a, b = run(seed=7), run(seed=7)
    assert a and [encode(r) for r in a] == [encode(r) for r in b]
    assert [encode(r) for r in run(seed=8)] != [encode(r) for r in a]


def test_closed_loop_is_deterministic_too() -> None:
    a = run(seed=3, cooldown_aware=EngineCooldowns(pinned_policy(60)))
    b = run(seed=3, cooldown_aware=EngineCooldowns(pinned_policy(60)))
    assert [encode(r) for r in a] == [encode(r) for r in b]


def test_no_wall_clock_times_start_at_start_ts() -> None:
    start = 2_000_000_000.0
    records = list(simulate(s1(), start, 300, seed=1))
    assert records and all(start <= r.ts < start + 300 + 60 for r in records)


def test_records_round_trip_and_are_well_formed() -> None:
    records = run(seed=2)
    assert records
    for r in records:
        assert decode(encode(r)) == r
        assert r.model_group == GROUP_OF[r.deployment_id]
        assert r.gateway in s1().pods
        assert r.latency_ms is not None and r.latency_ms > 0
        if r.ok:
            assert r.status_code is None and r.exception_type is None
        if r.status_code == 429:
            assert (r.exception_type, r.retry_after) == ("RateLimitError", "30")
    assert all(a.ts <= b.ts for a, b in itertools.pairwise(records))  # event-time order
    assert len({r.event_id for r in records}) == len(records)


def test_attempts_final_and_fallback_order() -> None:
    """Per request: attempts 0..n, only the last is final, a key at most once, tiers in fallback order."""
    by_request: dict[str, list[Outcome]] = defaultdict(list)
    for r in run(seed=2):
        by_request[r.event_id.rsplit("-a", 1)[0]].append(r)
    tier = {"gemini-flash": 0, "gemini-pro-plan": 1, "gemini-backup": 2}
    fell_back = 0
    for attempts in by_request.values():
        assert [a.attempt for a in attempts] == list(range(len(attempts)))
        assert [a.final for a in attempts] == [False] * (len(attempts) - 1) + [True]
        assert all(not a.ok for a in attempts[:-1])
        assert len({a.deployment_id for a in attempts}) == len(attempts)
        tiers = [tier[a.model_group] for a in attempts]
        assert tiers == sorted(tiers)
        assert len(attempts) <= s1().num_retries + 1
        fell_back += tiers[-1] > 0 and tiers[0] == 0
    assert fell_back > 0  # both free keys rate-limited -> gemini-pro-plan


# --------------------------------------------------------------------------------------------
# Scenario S1.


def test_bursts_exceed_the_free_tier_limit() -> None:
    stats = SimStats()
    records = run(seed=1, stats=stats)
    assert rate_limited(records) > 0
    assert stats.rate_limited(FREE) == rate_limited(records)
    assert stats.requests == stats.succeeded + stats.failed + stats.unroutable


@pytest.mark.parametrize("seed", [1, 2])
def test_provider_admits_at_most_rpm_in_any_sliding_minute(seed: int) -> None:
    """The provider model: successes started within any 60 s on a free key never exceed 15."""
    starts: dict[str, list[float]] = defaultdict(list)
    for r in run(seed=seed):
        if r.ok and r.deployment_id in FREE:
            assert r.latency_ms is not None
            starts[r.deployment_id].append(r.ts - r.latency_ms / 1000)
    for times in starts.values():
        times.sort()
        for i, t in enumerate(times):
            in_window = sum(1 for u in times[i:] if u < t + 60 - 0.01)  # 10 ms slack for the rounding of ts
            assert in_window <= 15


def test_agent_bursts_alone_exceed_the_limit() -> None:
    """No background load: agent bursts (10-15 requests in 10-20 s) still overflow the free keys."""
    stats = SimStats()
    records = run(s1(background=None), minutes=15, seed=1, stats=stats)
    assert rate_limited(records) > 0
    assert stats.attempts["gemini-pro-paid-1", 200] > 0  # the overflow fell back to tier 2


def test_injected_faults() -> None:
    scenario = s1(
        faults=(Fault.auth("gemini-pro-paid-1", 60, 240), Fault.outage("gemini-flash-free-2", 300, 360)),
    )
    records = run(scenario, minutes=8, seed=4)
    auth = [r for r in records if r.status_code == 401]
    outage = [r for r in records if r.status_code == 500]
    assert auth and outage
    assert {(r.deployment_id, r.exception_type) for r in auth} == {("gemini-pro-paid-1", "AuthenticationError")}
    assert {(r.deployment_id, r.exception_type) for r in outage} == {("gemini-flash-free-2", "InternalServerError")}
    for r in auth:
        assert r.latency_ms is not None
        assert T0 + 60 <= r.ts - r.latency_ms / 1000 < T0 + 240
    ok_paid = [r for r in records if r.deployment_id == "gemini-pro-paid-1" and r.ok]
    assert all(not (T0 + 60 <= r.ts - (r.latency_ms or 0) / 1000 < T0 + 240) for r in ok_paid)


def test_cooldown_aware_routers_skip_scheduled_keys() -> None:
    """A schedule cooling free-1 for the whole run: the routers never send it anything."""
    records = run(seed=1, minutes=5, cooldown_aware={"gemini-flash-free-1": [(T0 - 1, T0 + 3600)]})
    assert records and all(r.deployment_id != "gemini-flash-free-1" for r in records)


def test_schedule_lookup() -> None:
    cooled = ScheduleCooldowns({"d": [(10, 20), (15, 30), (40, 50)], "e": []})
    assert [cooled("d", t) for t in (9.9, 10, 25, 30, 45, 50)] == [False, True, True, False, True, False]
    assert not cooled("e", 12) and not cooled("unknown", 12)


# --------------------------------------------------------------------------------------------
# Flapping: cooldown_time 30 against 60, in a closed loop with coolant's engine.
#
# How the cooldown schedules are computed: routers and coolant are run together.
# `EngineCooldowns` feeds every record to coolant's `Engine` as the simulator produces it, and the
# simulated routers ask it which keys are cooled when they route. Because routing at time t only
# sees records that finished before t, this closed loop directly yields the schedule that is
# consistent with the traffic it shapes -- the fixed point a "simulate with a schedule, replay,
# recompute the schedule, repeat" loop would look for (checked below), without iterating.
#
# The config pins cooldown_time per deployment: S1 writes it under router_settings, where the
# provider's Retry-After "30" beats it (spec T2), so both settings would give 30 s cooldowns.


def closed_loop(
    cooldown_time: float, seed: int, scenario: Scenario | None = None
) -> tuple[list[Outcome], EngineCooldowns]:
    oracle = EngineCooldowns(pinned_policy(cooldown_time, scenario))
    return run(scenario, minutes=15, seed=seed, cooldown_aware=oracle), oracle


def test_cooldown_60_flaps_less_than_30() -> None:
    """With 30 s the key returns while the provider's 60 s window is still full and is rate-limited again."""
    seeds = (0, 1, 2, 4)
    open_loop = sum(rate_limited(run(minutes=15, seed=s)) for s in seeds)
    with_30 = sum(rate_limited(closed_loop(30, s)[0]) for s in seeds)
    with_60 = sum(rate_limited(closed_loop(60, s)[0]) for s in seeds)
    assert with_60 < with_30 < open_loop


def test_cooldown_60_flaps_less_than_30_at_peak() -> None:
    peak = s1(agents=AgentLoad(sessions_per_minute=3.0))
    with_30 = sum(rate_limited(closed_loop(30, s, peak)[0]) for s in (0, 1))
    with_60 = sum(rate_limited(closed_loop(60, s, peak)[0]) for s in (0, 1))
    assert with_60 < 0.8 * with_30


def test_closed_loop_schedule_is_a_fixed_point() -> None:
    """Re-simulating with the closed loop's schedule gives the same traffic, and replaying that
    traffic through the engine gives the same schedule."""
    records, oracle = closed_loop(60, seed=1)
    schedule = schedule_of(oracle.cooldowns)
    assert schedule and set(schedule) <= set(FREE)
    again = run(minutes=15, seed=1, cooldown_aware=schedule)
    assert [encode(r) for r in again] == [encode(r) for r in records]
    assert schedule_of(Engine(pinned_policy(60)).run(again)) == schedule


def test_same_requests_whatever_the_cooldowns() -> None:
    """Arrivals have their own random streams: first attempts (event ids) agree between runs."""
    first = {r.event_id for r in run(minutes=15, seed=2) if r.attempt == 0}
    aware = {r.event_id for r in closed_loop(60, seed=2)[0] if r.attempt == 0}
    assert first == aware


# --------------------------------------------------------------------------------------------
# The LiteLLM config and the command line.


def test_litellm_config_matches_s1(tmp_path: Path) -> None:
    path = tmp_path / "s1.yaml"
    write_litellm_config(s1(), path)
    cfg = load_config(path)
    policy = cfg.policy
    assert {d: policy.registry.get(d).model_group for d in GROUP_OF} == GROUP_OF  # type: ignore[union-attr]
    assert policy.router.allowed_fails == 1
    assert policy.router.cooldown_time == 60
    assert policy.router.fallback_groups == frozenset({"gemini-flash"})
    assert not cfg.warnings
    assert policy.registry.get("gemini-flash-free-1").cooldown_time is None  # type: ignore[union-attr]
    pinned = pinned_policy(30)
    assert pinned.registry.get("gemini-flash-free-1").cooldown_time == 30  # type: ignore[union-attr]


def test_main_writes_records_and_config(tmp_path: Path) -> None:
    out, gz, config = tmp_path / "s1.jsonl", tmp_path / "s1.jsonl.gz", tmp_path / "s1.yaml"
    argv = ["--scenario", "s1", "--minutes", "3", "--seed", "5", "--start", str(T0)]
    assert main([*argv, "--out", str(out), "--config-out", str(config)]) == 0
    assert main([*argv, "--out", str(gz)]) == 0
    data = out.read_bytes()
    assert gzip.decompress(gz.read_bytes()) == data
    expected = b"".join(encode(r) + b"\n" for r in simulate(s1(), T0, 180, seed=5))
    assert data == expected
    load_config(config)


def test_module_entry_point(tmp_path: Path) -> None:
    out = tmp_path / "s1.jsonl"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "coolant.sim.simulate",
            "--minutes",
            "2",
            "--seed",
            "1",
            "--out",
            str(out),
            "--cooldown-aware",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "records" in proc.stderr
    assert out.read_bytes().count(b"\n") > 0
