"""Test records and what is compared: traffic (~20 deployments in 5 groups, mostly successes, with 429 / 500 / 401 /
503 bursts and noise), probe traffic, a LiteLLM config for them, `coolant replay` run as a user runs it, and the
helpers that compare cooldowns."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import uuid
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson
import yaml

ROOT = Path(__file__).resolve().parents[2]


T0 = 1_800_000_000.0
"""Jan 2027: in the future, so the Redis writer (which skips cooldowns already over) writes every one."""


FUTURE_TRAFFIC_ALLOWANCE = "1e9"
"""The workers' --max-ts-ahead: T0 traffic is ahead of the clock (about 31 years of allowance)."""


def uid() -> str:
    return uuid.uuid4().hex[:8]


GROUP_SIZE = 4


DEPLOYMENTS = tuple(f"dep-{i:02d}" for i in range(20))


def group_of(deployment_id: str) -> str:
    return f"grp-{int(deployment_id.split('-')[1]) // GROUP_SIZE}"


def write_config(path: Path) -> Path:
    """A LiteLLM proxy config for DEPLOYMENTS (model_info.id set); a few deployments have their own duration."""
    model_list = []
    for i, dep in enumerate(DEPLOYMENTS):
        info: dict[str, Any] = {"id": dep}
        if i % 7 == 3:
            info["cooldown_time"] = 45
        model_list.append(
            {
                "model_name": group_of(dep),
                "litellm_params": {"model": f"openai/model-{i}", "api_key": "os.environ/OPENAI_API_KEY"},
                "model_info": info,
            }
        )
    path.write_text(yaml.safe_dump({"model_list": model_list, "router_settings": {"cooldown_time": 30}}))
    return path


# (status, exception type, message, retry-after, share of the incident deployment's records that fail)
INCIDENTS = (
    (429, "RateLimitError", "litellm.RateLimitError: you exceeded your current quota, please check your plan", "20",
     0.9),
    (500, "InternalServerError", "litellm.InternalServerError: upstream returned 500 Internal Server Error", None, 0.9),
    (401, "AuthenticationError", "litellm.AuthenticationError: Incorrect API key provided: sk-...abcd", None, 1.0),
    (503, "ServiceUnavailableError", "litellm.ServiceUnavailableError: overloaded", None, 0.8),
    (None, "APIConnectionError", "litellm.APIConnectionError: connection reset by peer", None, 0.8),  # never cools
    (400, "BadRequestError", "litellm.BadRequestError: invalid request", None, 0.6),  # status exempt
)


def outcome(event_id: str, ts: float, dep: str, ok: bool = True, **fields: Any) -> bytes:
    rec: dict[str, Any] = {
        "schema": "coolant.outcome/1",
        "event_id": event_id,
        "ts": ts,
        "deployment_id": dep,
        "model_group": group_of(dep) if dep in DEPLOYMENTS else "unknown",
        "ok": ok,
    }
    rec.update(fields)
    return orjson.dumps(rec)


def fleet_traffic(n: int = 3000, seed: int = 1, t0: float = T0, tag: str = "") -> list[bytes]:
    """`n` outcome records (JSON lines, in publish order) over n/10 s of event time; deterministic per seed.

    Besides the incidents it holds what at-least-once publishers and slow pods produce: a re-published copy
    of every 101st record and, every 500th record, one reported more than `late_after` behind.
    """
    rng = random.Random(seed)
    span = n / 10.0
    incidents = []
    for k in range(20):
        start = rng.uniform(0, span - 15)
        incidents.append((rng.choice(DEPLOYMENTS), start, start + rng.uniform(4, 10), INCIDENTS[k % len(INCIDENTS)]))
    lines: list[bytes] = []
    for i in range(n):
        off = i / 10.0 + rng.random() * 0.3  # small out-of-order jitter
        active = [inc for inc in incidents if inc[1] <= off < inc[2]]
        dep = active[0][0] if active and rng.random() < 0.35 else rng.choice(DEPLOYMENTS)
        kind = next((inc[3] for inc in active if inc[0] == dep), None)
        eid = f"ev{tag}-{seed}-{i}"
        ts = round(t0 + off, 3)
        common = {"gateway": f"pod-{i % 5}", "latency_ms": round(rng.uniform(50, 1500), 1), "attempt": i % 3}
        if kind is not None and rng.random() < kind[4]:
            status, exc, msg, retry_after, _ = kind
            line = outcome(eid, ts, dep, False, status_code=status, exception_type=exc, exception_message=msg,
                           retry_after=retry_after, **common)
        else:
            line = outcome(eid, ts, dep, True, **common)
        lines.append(line)
        if i % 101 == 50:
            lines.append(line)  # the same event_id again: dropped as a duplicate
        if i % 500 == 499:
            lines.append(outcome(f"{eid}-late", round(ts - 400, 3), dep, False, status_code=429,
                                 exception_type="RateLimitError", **common))
    return lines


PROBE_FAILURES = (
    (500, "InternalServerError", "litellm.InternalServerError: upstream 500 for key sk-live-abcdefghijklmnop1234"),
    (401, "AuthenticationError", "litellm.AuthenticationError: Incorrect API key provided: sk-...abcd"),
    (None, "APIConnectionError", None),
    (429, None, "rate limited"),
)


def probe_traffic(probes: int = 12, seed: int = 1, t0: float = T0) -> list[bytes]:
    """Health probes (JSON lines, in publish order) of every deployment and of one the registry does not know:
    flapping verdicts every 10 s, and what the fleet's probers produce besides: an older verdict arriving late,
    a redelivered copy, two probers agreeing on the same ts with different verdicts."""
    rng = random.Random(seed)
    lines: list[bytes] = []

    def probe(eid: str, ts: float, dep: str, healthy: bool) -> bytes:
        rec: dict[str, Any] = {"schema": "coolant.health/1", "event_id": eid, "ts": round(ts, 3), "deployment_id": dep,
                               "model_group": group_of(dep) if dep in DEPLOYMENTS else "probed-group",
                               "healthy": healthy, "prober": f"prober-{rng.randrange(3)}", "latency_ms": 12.5}
        if not healthy:
            status, exc, msg = rng.choice(PROBE_FAILURES)
            rec.update(status_code=status, exception_type=exc, exception_message=msg)
        return orjson.dumps(rec)

    healthy = dict.fromkeys((*DEPLOYMENTS, "unregistered-dep"), True)
    for i in range(probes):
        for dep in healthy:
            if rng.random() < 0.3:
                healthy[dep] = not healthy[dep]
            ts = t0 + 10 * i + rng.random()
            line = probe(f"hp-{seed}-{dep}-{i}", ts, dep, healthy[dep])
            lines.append(line)
            roll = rng.random()
            if roll < 0.1:
                lines.append(line)  # redelivered
            elif roll < 0.2:
                lines.append(probe(f"hp-{seed}-{dep}-{i}-late", ts - 15, dep, not healthy[dep]))  # H1: too old
            elif roll < 0.3:
                healthy[dep] = not healthy[dep]
                lines.append(probe(f"hp-{seed}-{dep}-{i}-tie", ts, dep, healthy[dep]))  # a tie: the later one wins
    return lines


def sentinels(lines: list[bytes], tag: str = "end") -> list[bytes]:
    """One 401 per deployment, two minutes after the last record: each always cools its deployment (non_retryable,
    ending after any earlier cooldown), so once every sentinel's cooldown is on the topic, every record published
    before it in the same partition has been processed. A completion barrier that needs no consumer offsets."""
    last = max(orjson.loads(line)["ts"] for line in lines)
    return [outcome(f"sentinel-{tag}-{dep}", round(last + 120 + i / 100, 3), dep, False, status_code=401,
                    exception_type="AuthenticationError", exception_message="litellm.AuthenticationError: sentinel")
            for i, dep in enumerate(DEPLOYMENTS)]


def write_jsonl(path: Path, lines: Iterable[bytes]) -> Path:
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def key_of(line: bytes) -> bytes:
    """The Kafka key a publisher uses: the deployment id (or nothing, for bytes that are not a record)."""
    try:
        d = orjson.loads(line)
    except orjson.JSONDecodeError:
        return b""
    dep = d.get("deployment_id") if isinstance(d, dict) else None
    return dep.encode() if isinstance(dep, str) else b""


def run_replay(events: Path, config: Path, out: Path, transitions_out: Path | None = None) -> list[dict[str, Any]]:
    """`coolant replay EVENTS --config CONFIG --out OUT [--transitions-out FILE]` as a subprocess; the cooldown
    records it wrote (the transitions, if asked for, are in `transitions_out`: see `read_jsonl`)."""
    cmd = [sys.executable, "-m", "coolant.cli", "replay", str(events), "--config", str(config), "--out", str(out)]
    if transitions_out is not None:
        cmd += ["--transitions-out", str(transitions_out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT, check=False)
    assert proc.returncode == 0, f"coolant replay failed (rc={proc.returncode}):\n{proc.stderr[-3000:]}"
    return read_jsonl(out)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def by_id(cooldowns: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {cd["event_id"]: cd for cd in cooldowns}


def duplicates(cooldowns: Iterable[dict[str, Any]]) -> dict[str, int]:
    """event_id -> number of extra copies, for ids seen more than once."""
    seen: dict[str, int] = defaultdict(int)
    for cd in cooldowns:
        seen[cd["event_id"]] += 1
    return {k: v - 1 for k, v in seen.items() if v > 1}


def latest_per_deployment(cooldowns: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per deployment, the first cooldown (in order) with the greatest `until`: what Redis must hold, since the
    writer never replaces an entry that ends at or after the new one."""
    best: dict[str, dict[str, Any]] = {}
    for cd in cooldowns:
        cur = best.get(cd["deployment_id"])
        if cur is None or cd["until"] > cur["until"]:
            best[cd["deployment_id"]] = cd
    return best


def litellm_value(cd: dict[str, Any]) -> bytes:
    """LiteLLM's cooldown cache value for a cooldown record, as compact JSON (contract §4)."""
    ct = cd["cooldown_time"]
    value = {
        "exception_received": cd["exception_received"],
        "status_code": "500" if cd["status_code"] is None else str(cd["status_code"]),
        "timestamp": float(cd["ts"]),
        "cooldown_time": int(ct) if float(ct).is_integer() else ct,
    }
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def diff_cooldowns(got: dict[str, dict[str, Any]], want: dict[str, dict[str, Any]], limit: int = 5) -> str:
    """A readable difference between two id -> cooldown maps."""
    extra = sorted(set(got) - set(want))
    missing = sorted(set(want) - set(got))
    changed = sorted(k for k in set(got) & set(want) if got[k] != want[k])
    lines = [f"{len(got)} live vs {len(want)} replay: {len(extra)} extra, {len(missing)} missing, "
             f"{len(changed)} different"]
    lines += [f"  extra   {got[k]}" for k in extra[:limit]]
    lines += [f"  missing {want[k]}" for k in missing[:limit]]
    lines += [f"  differs live {got[k]}\n          replay {want[k]}" for k in changed[:limit]]
    return "\n".join(lines)
