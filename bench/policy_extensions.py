"""The opt-in policy extensions on the scenarios they are for, from the closed-loop simulator (issue 15).

    .venv/bin/python bench/policy_extensions.py [--seeds 10] [--json FILE]

A. Quota-aware cooldowns (X6), scenario S1 at peak (3 coding-agent sessions a minute over two free
   15-rpm keys, 30 simulated minutes a seed; the providers announce their remaining budget on every
   success, as OpenAI's and Anthropic's rate-limit headers do). The routers obey coolant's decisions
   the moment they are made (no pipeline delay is modelled). Compared: the LiteLLM-compatible
   reactive policy of S1's own config (`allowed_fails: 1`, `cooldown_time: 60`) against the same with
   `coolant: {quota: {}}` (cool at 0 remaining) and `quota: {requests_threshold: 1 | 2}` (keep one or two
   requests of headroom for the ones already in flight from other pods), the latter also with
   `max_cooldown_time: 50` (X4 caps the announced reset: the providers announce when the budget is
   *fully* replenished, while a sliding window frees slots before that). Printed: the 429s callers
   see (every 429 attempt: S1's clients stream, and a 429 closes the stream mid-way; S1's retries and
   fallbacks hide them from the final answer, whose 429s are shown too) and the successes served by
   the paid tiers (`gemini-pro-plan`, `gemini-backup`): the diverted traffic.
B. Sparse traffic (X7 probation), scenario s2-sparse: 10 pods x 3 requests a minute over 3
   deployments, one failing every request with a 500, 20 minutes, no retries. "LiteLLM alone" is one
   compatible engine per pod, fed that pod's attempts only (LiteLLM's per-process counters); the other
   rows are coolant's fleet-wide engine with the options shown. Printed: failed requests.
C. The sparse recipe on S1's recorded traffic (examples/tuning/s1-peak-30s.jsonl.gz, open loop, as
   `coolant tune` measures it): successes diverted with `backoff: {}` alone and with the recipe.

Medians over the seeds, with min-max. The goals (issue 15): A ≥ 90 % fewer caller-visible 429s with
at most +10 % paid-tier successes; B ≤ 12 failed requests with the recipe; C no more diverted than
`backoff: {}` alone.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import yaml

from coolant.config.loader import parse_config
from coolant.io.sources import read_blocks
from coolant.sim.simulate import (
    AgentLoad,
    EngineCooldowns,
    PodEngineCooldowns,
    Scenario,
    SimStats,
    litellm_config,
    s1,
    s2_sparse,
    simulate,
)
from coolant.tuning.runner import evaluate
from coolant.tuning.traffic import load_recording

ROOT = Path(__file__).resolve().parents[1]
S1_RECORDING = ROOT / "examples" / "tuning" / "s1-peak-30s.jsonl.gz"
S1_CONFIG = ROOT / "examples" / "tuning" / "s1.yaml"
PAID = ("gemini-pro-paid-1", "gemini-backup-1")
RECIPE: dict[str, Any] = {"backoff": {"probation": True}, "thresholds": {"min_requests": 2}}
"""The documented sparse-traffic recipe (docs/policy-extensions.md)."""

Oracle = Callable[[Any], EngineCooldowns | PodEngineCooldowns]


def _run(scenario: Scenario, coolant: Mapping[str, Any] | None, minutes: float, seed: int,
         oracle: Oracle = EngineCooldowns) -> tuple[SimStats, int]:
    config = litellm_config(scenario, coolant=coolant)
    cooled = oracle(parse_config(config, "<bench>").policy)
    stats = SimStats()
    for _ in simulate(scenario, duration_s=minutes * 60, seed=seed, cooldown_aware=cooled, stats=stats):
        pass
    return stats, len(cooled.cooldowns)


def _spread(values: Sequence[float]) -> str:
    return f"{statistics.median(values):g} ({min(values):g}-{max(values):g})"


def part_a(seeds: Sequence[int]) -> dict[str, Any]:
    base = s1(agents=AgentLoad(sessions_per_minute=3.0))
    scenario = replace(base, groups=tuple(
        replace(g, keys=tuple(replace(k, announce_quota=True) for k in g.keys)) for g in base.groups))
    rows: dict[str, dict[str, list[float]]] = {}
    policies = (
        ("reactive (S1 config)", None),
        ("quota: {}", {"quota": {}}),
        ("quota threshold 1", {"quota": {"requests_threshold": 1}}),
        ("quota threshold 2", {"quota": {"requests_threshold": 2}}),
        ("threshold 2, cap 50 s", {"quota": {"requests_threshold": 2}, "max_cooldown_time": 50}),
    )
    for name, coolant in policies:
        row = rows.setdefault(name, {"seen_429": [], "final_429": [], "paid_successes": [], "cooldowns": []})
        for seed in seeds:
            stats, cooldowns = _run(scenario, coolant, 30, seed)
            row["seen_429"].append(stats.rate_limited())
            row["final_429"].append(stats.failed_by_status[429])
            row["paid_successes"].append(sum(stats.attempts[d, 200] for d in PAID))
            row["cooldowns"].append(cooldowns)
    print("A. S1 peak, 30 min a seed: 429s callers see and paid-tier successes (median, min-max)")
    print(f"   {'policy':<22} {'429s seen':>16} {'final 429s':>12} {'paid-tier successes':>22} {'vs reactive':>24}")
    react = rows["reactive (S1 config)"]
    r429, rpaid = statistics.median(react["seen_429"]), statistics.median(react["paid_successes"])
    out: dict[str, Any] = {"rows": rows}
    for name, row in rows.items():
        fewer = 1 - statistics.median(row["seen_429"]) / max(1, r429)
        paid = statistics.median(row["paid_successes"]) / max(1, rpaid) - 1
        out[name] = {"fewer_429": fewer, "paid_change": paid}
        print(f"   {name:<22} {_spread(row['seen_429']):>16} {_spread(row['final_429']):>12} "
              f"{_spread(row['paid_successes']):>22} {f'{fewer:.0%} fewer, paid {paid:+.1%}':>24}")
    print("   goal: >= 90% fewer 429s seen, paid-tier successes <= +10%")
    return out


def part_b(seeds: Sequence[int]) -> dict[str, Any]:
    scenario = s2_sparse()
    policies: list[tuple[str, Mapping[str, Any] | None, Oracle]] = [
        ("LiteLLM alone (per pod)", None, PodEngineCooldowns),
        ("coolant defaults", None, EngineCooldowns),
        ("backoff: {}", {"backoff": {}}, EngineCooldowns),
        ("backoff + probation", {"backoff": {"probation": True}}, EngineCooldowns),
        ("recipe: + min_requests 2", RECIPE, EngineCooldowns),
    ]
    rows: dict[str, dict[str, list[float]]] = {}
    for name, coolant, oracle in policies:
        row = rows.setdefault(name, {"failed": [], "cooldowns": []})
        for seed in seeds:
            stats, cooldowns = _run(scenario, coolant, 20, seed, oracle)
            row["failed"].append(stats.failed)
            row["cooldowns"].append(cooldowns)
    print("B. s2-sparse, 20 min: 10 pods x 3 requests/min, one of 3 deployments failing every request")
    print(f"   {'policy':<26} {'failed requests':>18} {'cooldowns':>14}")
    for name, row in rows.items():
        print(f"   {name:<26} {_spread(row['failed']):>18} {_spread(row['cooldowns']):>14}")
    recipe = statistics.median(rows["recipe: + min_requests 2"]["failed"])
    print(f"   -> recipe: {recipe:g} failed requests (goal <= 12)")
    return {"rows": rows, "recipe_failed": recipe}


def part_c() -> dict[str, Any]:
    recording = load_recording(read_blocks([str(S1_RECORDING)]), quiet_gap=60)
    data = yaml.safe_load(S1_CONFIG.read_text())
    out: dict[str, Any] = {}
    print("C. S1 recorded traffic (open loop, as `coolant tune` measures): successes diverted")
    for name, coolant in (("backoff: {}", {"backoff": {}}), ("recipe", RECIPE)):
        policy = parse_config({**data, "coolant": coolant}, str(S1_CONFIG)).policy
        fig = evaluate(policy, recording.records, recording.traffic, 30).figures
        out[name] = {"successes_diverted": fig.successes_diverted, "failures_avoided": fig.failures_avoided,
                     "cooldowns": fig.cooldowns}
        print(f"   {name:<12} diverted {fig.successes_diverted:>5}   failures avoided {fig.failures_avoided:>5}   "
              f"cooldowns {fig.cooldowns:>4}")
    ok = out["recipe"]["successes_diverted"] <= out["backoff: {}"]["successes_diverted"]
    print(f"   -> recipe diverts {'no more' if ok else 'MORE'} than backoff alone")
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, default=10, help="seeds 1..N (default 10)")
    p.add_argument("--json", type=Path, help="also write the figures as JSON")
    a = p.parse_args()
    seeds = range(1, a.seeds + 1)
    started = time.perf_counter()
    result = {"quota_s1": part_a(seeds), "sparse_s2": part_b(seeds), "recipe_on_s1_recording": part_c()}
    print(f"({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    if a.json:
        a.json.write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
