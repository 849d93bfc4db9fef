"""A day of healthy traffic replayed under the outlier profile: the cooldowns it emits and the successes it diverts.

    .venv/bin/python bench/false_alarms.py [--deployments 2000] [--hours 24] [--rate-min 0.01] [--rate-max 0.3]
                                           [--seed 1] [--json FILE]

The fleet: 90 % of the deployments in groups of four, 5 % a group's only deployment with a fallback group (a
"primary"), 5 % alone with no fallback ("lone"). Each deployment serves Poisson traffic at its own rate, drawn
log-uniformly between --rate-min and --rate-max requests/s (the defaults: 0.6 to 18 requests a minute, 5 a minute
on average, about 15 million requests a day for 2,000 deployments). Nothing is down; what fails is:

  independent  every attempt fails with probability --error-rate (2 %), as a 500, 503, timeout or connection error
               (a stream that died mid-answer: APIConnectionError, no status)
  bursts       now and then (--burst-every seconds on average per deployment) 2 or 3 attempts in a row fail
  429 spikes   --spiky of the grouped deployments are on a free tier: about every --spike-every seconds they
               answer 429 for 5-20 s, with a Retry-After to the spike's end

A single-deployment group's router retries a failed request twice on the same deployment (`num_retries: 2`,
0.5-1 s later); a grouped deployment's retries go to the other members and are not in its own records.

Each deployment's records go through the profile's engine (the same `Engine` replay and the worker's steps use)
and, for comparison, the compatible profile's. A cooldown is put down to the independent errors when no burst and
no 429 of its deployment lie in the evidence it read (its window: a streak's first failure on, a window's start
on) nor in the 60 s before its trigger. A success is diverted when it falls inside one of
its deployment's cooldowns (open loop, as `coolant tune` counts it: the recording's traffic is not re-routed).
Then the other side of the trade, with the same knobs: a grouped deployment that dies at :01, :15, :30, :45 or :59
for --incident-seconds at --incident-rate requests/s (closed loop: its requests go elsewhere while it is cooled,
a cooldown taking effect --delay s after its trigger), and the failed requests it costs under each profile.
Prints the figures; --json FILE writes them (`deployment_hours`, `cooldowns`, `cooldowns_from_independent_errors`,
`successes`, `successes_diverted`, plus the breakdowns, `incident`, and the compatible profile's figures).
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import os
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from coolant.config.loader import parse_config  # noqa: E402
from coolant.processors import Engine, Policy  # noqa: E402
from coolant.schemas import Cooldown, Outcome  # noqa: E402

T0 = 1_800_000_000.0
FAILURES: list[tuple[int | None, str]] = [
    (500, "InternalServerError"), (503, "ServiceUnavailableError"), (408, "Timeout"), (None, "APIConnectionError"),
]
CLASSES = ("member", "primary", "lone")


@dataclass(frozen=True)
class Deployment:
    id: str
    group: str
    cls: str
    rate: float
    spiky: bool


@dataclass
class Tally:
    cooldowns: int = 0
    independent: int = 0
    by_reason: Counter[str] = field(default_factory=Counter)
    by_cause: Counter[str] = field(default_factory=Counter)
    independent_by_class: Counter[str] = field(default_factory=Counter)
    diverted: int = 0
    diverted_by_class: Counter[str] = field(default_factory=Counter)


def fleet(n: int, rnd: random.Random, rate_min: float, rate_max: float, spiky_share: float) -> list[Deployment]:
    singles = max(1, n // 20)
    members = n - 2 * singles
    out = []
    lo, hi = math.log(rate_min), math.log(rate_max)
    for i in range(members):
        out.append(Deployment(f"m{i}", f"g{i // 4}", "member", math.exp(rnd.uniform(lo, hi)),
                              rnd.random() < spiky_share))
    for i in range(singles):
        out.append(Deployment(f"p{i}", f"p{i}", "primary", math.exp(rnd.uniform(lo, hi)), False))
        out.append(Deployment(f"l{i}", f"l{i}", "lone", math.exp(rnd.uniform(lo, hi)), False))
    return out


def config(deps: list[Deployment], profile: str, knobs: dict[str, Any] | None = None) -> Policy:
    model_list = [{"model_name": d.group, "litellm_params": {"model": f"openai/{d.group}"}, "model_info": {"id": d.id}}
                  for d in deps]
    fallbacks = [{d.group: ["g0"]} for d in deps if d.cls == "primary"]
    coolant: dict[str, Any] = {"profile": profile}
    if knobs:
        coolant["outlier"] = knobs
    return parse_config({"model_list": model_list, "router_settings": {"fallbacks": fallbacks},
                         "coolant": coolant}).policy


def outcome(dep: Deployment, n: int, ts: float, cause: str, status: int | None = None, name: str | None = None,
            retry_after: str | None = None) -> Outcome:
    return Outcome(event_id=f"{cause}{n}", ts=ts, deployment_id=dep.id, model_group=dep.group, ok=cause == "s",
                   status_code=status, exception_type=name, retry_after=retry_after, gateway="pod",
                   origin=None if cause == "s" else "upstream")


def traffic(dep: Deployment, rnd: random.Random, seconds: float, error_rate: float, burst_every: float,
            spike_every: float) -> list[Outcome]:
    """One deployment's day: each record's event id starts with its cause (s, i, b, q)."""
    spikes: list[tuple[float, float]] = []
    if dep.spiky:
        t = rnd.expovariate(1 / spike_every)
        while t < seconds:
            spikes.append((t, t + rnd.uniform(5, 20)))
            t += rnd.expovariate(1 / spike_every)
    next_burst = rnd.expovariate(1 / burst_every)
    retries = 2 if dep.cls != "member" else 0
    out: list[Outcome] = []
    t = rnd.expovariate(dep.rate)
    spike = 0
    while t < seconds:
        while spike < len(spikes) and spikes[spike][1] <= t:
            spike += 1
        in_spike = spike < len(spikes) and spikes[spike][0] <= t
        burst = 0
        if t >= next_burst:
            burst = rnd.choice((2, 3))
            next_burst = t + rnd.expovariate(1 / burst_every)
        at = t
        for attempt in range(retries + 1):
            n = len(out)
            if in_spike:
                left = str(math.ceil(spikes[spike][1] - at))
                out.append(outcome(dep, n, T0 + at, "q", 429, "RateLimitError", left))
            elif burst > 0:
                burst -= 1
                out.append(outcome(dep, n, T0 + at, "b", *rnd.choice(FAILURES)))
            elif rnd.random() < error_rate:
                out.append(outcome(dep, n, T0 + at, "i", *rnd.choice(FAILURES)))
            else:
                out.append(outcome(dep, n, T0 + at, "s"))
                break
            if attempt == retries:
                break
            at += rnd.uniform(0.5, 1.0)
        while burst > 0:  # a grouped deployment's burst spans its next requests
            t += rnd.expovariate(dep.rate)
            if t >= seconds:
                break
            burst -= 1
            out.append(outcome(dep, len(out), T0 + t, "b", *rnd.choice(FAILURES)))
        t = max(t, at) + rnd.expovariate(dep.rate)
    return out


def cause(cd: Cooldown, trouble: list[float]) -> str:
    """independent, unless a burst or a 429 of the deployment lies within the evidence the cooldown read: its
    window (a streak's first failure, a window's start) or the 60 s up to its trigger, whichever starts first."""
    i = bisect.bisect_right(trouble, cd.ts)
    since = min(cd.window.start, cd.ts - 60)
    return "trouble" if i > 0 and trouble[i - 1] >= since else "independent"


def diverted(successes: list[float], cooldowns: list[Cooldown]) -> int:
    spans = sorted((cd.ts, cd.until) for cd in cooldowns)
    merged: list[list[float]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return sum(bisect.bisect_left(successes, e) - bisect.bisect_left(successes, s) for s, e in merged)


def incident(policy: Policy, onset: float, length: float, rate: float, delay: float) -> dict[str, Any]:
    """The other side of the trade: one deployment of a group of four dies at `onset` s into a minute for `length`
    s while `rate` requests/s reach it when it is not cooled (closed loop: a cooled deployment's requests go to
    the others; a cooldown takes effect `delay` s after its trigger, the pipeline and the push). Returns its
    failed requests, those after the first cooldown, and the cooldowns."""
    dep = "m0"
    engine = Engine(policy)
    spans: list[tuple[float, float]] = []
    failed = after_first = 0
    start, stop = T0 + onset, T0 + onset + length
    for k in range(int((onset + length + 120) * rate)):
        t = T0 + k / rate
        if any(s + delay <= t < u for s, u in spans):
            continue
        down = start <= t < stop
        cd = engine.feed(Outcome(event_id=f"x{k}", ts=t, deployment_id=dep, model_group="g0", ok=not down,
                                 status_code=500 if down else None,
                                 exception_type="InternalServerError" if down else None, gateway="pod",
                                 origin="upstream" if down else None)).cooldown
        if down:
            failed += 1
            after_first += bool(spans)
        if cd is not None:
            spans.append((cd.ts, cd.until))
    return {"onset": onset, "failed": failed, "failed_after_first_cooldown": after_first, "cooldowns": len(spans)}


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--deployments", type=int, default=2000)
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--rate-min", type=float, default=0.01, help="requests/s of the quietest deployment")
    ap.add_argument("--rate-max", type=float, default=0.3, help="requests/s of the busiest deployment")
    ap.add_argument("--error-rate", type=float, default=0.02)
    ap.add_argument("--burst-every", type=float, default=7200.0, help="mean seconds between a deployment's bursts")
    ap.add_argument("--spiky", type=float, default=0.1, help="share of grouped deployments with 429 spikes")
    ap.add_argument("--spike-every", type=float, default=10800.0, help="mean seconds between a spiky one's spikes")
    ap.add_argument("--outlier", default="{}", help="the outlier: section as JSON, e.g. '{\"consecutive\": 3}'")
    ap.add_argument("--no-compare", action="store_true", help="skip the compatible profile's run")
    ap.add_argument("--incident-rate", type=float, default=10.0, help="requests/s on the dying deployment")
    ap.add_argument("--incident-seconds", type=float, default=60.0, help="how long it stays dead")
    ap.add_argument("--delay", type=float, default=0.1, help="seconds from a trigger to every router holding it")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    started = time.perf_counter()
    load_before = load()
    rnd = random.Random(args.seed)
    deps = fleet(args.deployments, rnd, args.rate_min, args.rate_max, args.spiky)
    seconds = args.hours * 3600
    knobs = json.loads(args.outlier)
    profiles = {"outlier": config(deps, "outlier", knobs)}
    if not args.no_compare:
        profiles["compatible"] = config(deps, "compatible")
    engines = {name: Engine(policy) for name, policy in profiles.items()}
    tallies = {name: Tally() for name in profiles}
    successes = records = 0
    successes_by_class: Counter[str] = Counter()
    for n, dep in enumerate(deps):
        recs = traffic(dep, random.Random(f"{args.seed}/{dep.id}"), seconds, args.error_rate, args.burst_every,
                       args.spike_every)
        records += len(recs)
        ok = sorted(r.ts for r in recs if r.ok)
        successes += len(ok)
        successes_by_class[dep.cls] += len(ok)
        trouble = sorted(r.ts for r in recs if r.event_id[0] in "bq")
        for name, engine in engines.items():
            cds = engine.run(recs)
            engine.states.pop(dep.id, None)  # done with this deployment: keep memory flat
            t = tallies[name]
            t.cooldowns += len(cds)
            for cd in cds:
                why = cause(cd, trouble)
                t.by_reason[cd.reason] += 1
                t.by_cause[why] += 1
                if why == "independent":
                    t.independent += 1
                    t.independent_by_class[dep.cls] += 1
            d = diverted(ok, cds)
            t.diverted += d
            t.diverted_by_class[dep.cls] += d
        if (n + 1) % 200 == 0:
            print(f"  {n + 1} deployments, {records:,} records, {time.perf_counter() - started:.0f} s",
                  file=sys.stderr)
    hours = len(deps) * args.hours
    hours_by_class = Counter(d.cls for d in deps)
    rates = sorted(d.rate for d in deps)
    result: dict[str, Any] = {
        "deployment_hours": hours,
        "records": records,
        "rates": {"min": args.rate_min, "max": args.rate_max, "mean": round(sum(rates) / len(rates), 4),
                  "median": round(rates[len(rates) // 2], 4)},
        "error_rate": args.error_rate,
        "successes": successes,
        "seed": args.seed,
        "outlier_knobs": knobs,
    }
    for name, t in tallies.items():
        block = {
            "cooldowns": t.cooldowns,
            "cooldowns_from_independent_errors": t.independent,
            "independent_per_1000_deployment_hours": round(1000 * t.independent / hours, 3),
            "independent_per_1000_deployment_hours_by_class": {
                c: round(1000 * t.independent_by_class[c] / (hours_by_class[c] * args.hours), 3) for c in CLASSES},
            "successes_diverted": t.diverted,
            "diverted_share": round(t.diverted / successes, 6) if successes else 0.0,
            "diverted_share_by_class": {
                c: round(t.diverted_by_class[c] / successes_by_class[c], 6) if successes_by_class[c] else 0.0
                for c in CLASSES},
            "by_reason": dict(t.by_reason),
            "by_cause": dict(t.by_cause),
        }
        if name == "outlier":
            result.update(block)
        else:
            result[name] = block
    result["incident"] = {name: [incident(policy, onset, args.incident_seconds, args.incident_rate, args.delay)
                                 for onset in (1.0, 15.0, 30.0, 45.0, 59.0)] for name, policy in profiles.items()}
    result["seconds"] = round(time.perf_counter() - started, 1)
    result["load"] = {"before": load_before, "after": load()}

    print(f"{len(deps)} deployments x {args.hours:g} h = {hours:,.0f} deployment-hours, {records:,} records "
          f"(rates {args.rate_min:g}-{args.rate_max:g}/s, mean {result['rates']['mean']:g}/s), "
          f"{successes:,} successes, {result['seconds']} s, load {result['load']}")
    for name, t in tallies.items():
        print(f"{name:>10}: {t.cooldowns:,} cooldowns ({dict(t.by_reason)}), {t.independent} from the independent "
              f"errors = {1000 * t.independent / hours:.3f} per 1,000 deployment-hours "
              f"(by class {dict(t.independent_by_class)}); successes diverted {t.diverted:,} = "
              f"{100 * t.diverted / max(successes, 1):.4f} %")
    for name, runs in result["incident"].items():
        print(f"{name:>10}: a dead deployment at {args.incident_rate:g} requests/s for {args.incident_seconds:g} s "
              f"(cooldowns effective {args.delay:g} s after their trigger), failed requests by onset second: "
              + ", ".join(f":{r['onset']:02.0f} {r['failed']} ({r['cooldowns']} cooldowns)" for r in runs))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
