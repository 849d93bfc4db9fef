"""Synthetic incident traffic for benchmarks: the recording a user replays after a bad hour.

Deterministic (seeded). Writes a LiteLLM config and a JSONL outcome file:
    python bench/incident_traffic.py --records 1000000 --deployments 2000 --out bench/out/incident

Deployments sit in groups of five (2,000 deployments: 400 groups; the config is bench/fleet_traffic.py's) and
each belongs to one of eight providers (deployment number modulo 8).
Failures come in the shapes users replay:
  bursts    a deployment fails for a minute (429 storms, 500/502/503 spells, 408 timeouts, 404 and 401
            misconfigurations), each status at its own share of that minute's requests;
  outages   a provider fails almost every request for a few minutes (503, 502, 500), fleet-wide;
and a failed request is retried (attempt 1, 2, ...; `final` false until the last attempt) on another deployment
of its group a moment later, as LiteLLM's router does. `--failures` sets the target share of failed records
(the default 7.4% is the issue's stream) and `--shape` which incidents make it up (bursts, outages or both).
The share reached is printed; it lands within a few tenths of a percent of the target.
"""

from __future__ import annotations

import argparse
import heapq
import random
from pathlib import Path

import orjson
from fleet_traffic import write_config

T0 = 1_800_000_000.0
GROUP_SIZE = 5
PROVIDERS = 8
Incident = tuple[int, str, float, str | None]
"""(status, exception type, share of the minute's requests that fail, retry-after)."""


def _table(rows: str) -> tuple[Incident, ...]:
    """Incidents from "status type share retry-after" rows ("-": no Retry-After)."""
    out: list[Incident] = []
    for row in rows.strip().splitlines():
        status, name, share, retry_after = row.split()
        out.append((int(status), name, float(share), None if retry_after == "-" else retry_after))
    return tuple(out)


BURSTS = _table("""
    429 RateLimitError 0.85 20
    429 RateLimitError 0.6 -
    500 InternalServerError 0.7 -
    502 BadGatewayError 0.6 -
    503 ServiceUnavailableError 0.75 -
    408 Timeout 0.5 -
    404 NotFoundError 1.0 -
    401 AuthenticationError 1.0 -
""")
OUTAGES = _table("""
    503 ServiceUnavailableError 0.95 -
    502 BadGatewayError 0.9 -
    500 InternalServerError 0.9 -
""")
SHAPES = ("mixed", "bursts", "outages")
MAX_ATTEMPTS = 3


class Incidents:
    """Which incident, if any, a deployment is in at a given minute: bursts drawn per deployment-minute at the
    chance `--failures` and `--shape` call for; outages (five minutes of one provider) on a fixed schedule, one
    provider after another, spaced so they make up their share (a drawn schedule swung the share by half)."""

    OUTAGE_MINUTES = 5

    def __init__(self, rng: random.Random, failures: float, shape: str) -> None:
        self.rng = rng
        # failed records per unit of chance, retries included (measured on the default stream, then scaled)
        burst_yield, outage_yield = 0.756, 0.82
        burst_share = {"mixed": 0.6, "bursts": 1.0, "outages": 0.0}[shape]
        self.p_burst = failures * burst_share / burst_yield
        covered = failures * (1 - burst_share) / outage_yield  # share of provider-minutes in an outage
        self.outage_every = self.OUTAGE_MINUTES / (PROVIDERS * covered) if covered > 0 else float("inf")
        self.first_minute = int(T0 // 60)
        self.bursts: dict[tuple[int, int], Incident | None] = {}

    def outage(self, provider: int, minute: int) -> Incident | None:
        """The outage `provider` is in at `minute`: the i-th outage starts at (i + 1/2) spacings, provider i % 8."""
        offset = minute - self.first_minute
        i = int(offset / self.outage_every - 0.5) if offset >= 0 else -1
        for j in (i, i - 1):
            if j >= 0 and j % PROVIDERS == provider:
                start = (j + 0.5) * self.outage_every
                if start <= offset < start + self.OUTAGE_MINUTES:
                    return OUTAGES[j % len(OUTAGES)]
        return None

    def at(self, d: int, minute: int) -> Incident | None:
        ongoing = self.outage(d % PROVIDERS, minute)
        if ongoing is not None:
            return ongoing
        key = (d, minute)
        if key not in self.bursts:
            self.bursts[key] = BURSTS[self.rng.randrange(len(BURSTS))] if self.rng.random() < self.p_burst else None
        return self.bursts[key]

    def forget_before(self, minute: int) -> None:
        self.bursts = {k: v for k, v in self.bursts.items() if k[1] >= minute}


def generate(path: Path, records: int, deployments: int, seed: int, rate: float, failures: float,
             shape: str) -> tuple[int, int]:
    """`rate` records/s of event time. Returns (records written, failed records)."""
    rng = random.Random(seed)
    incidents = Incidents(random.Random(seed + 1), failures, shape)
    written = failed = 0
    pending: list[tuple[float, int, int, int]] = []  # retries due: (ts, deployment, attempt, request number)
    with path.open("wb") as out:
        buf: list[bytes] = []
        n = 0
        while written < records:
            if pending and pending[0][0] <= T0 + n / rate:
                ts, d, attempt, req = heapq.heappop(pending)
            else:
                ts = T0 + n / rate + rng.random() * 0.5  # small out-of-order jitter
                d, attempt, req = rng.randrange(deployments), 1, n
                n += 1
            minute = int(ts // 60)
            incident = incidents.at(d, minute)
            rec: dict[str, object] = {
                "schema": "coolant.outcome/1",
                "event_id": f"r{req}-a{attempt}",
                "ts": round(ts, 3),
                "deployment_id": f"dep-{d}",
                "model_group": f"group-{d // GROUP_SIZE}",
                "gateway": f"pod-{req % 10}",
                "latency_ms": round(rng.uniform(80, 1500), 1),
            }
            if attempt > 1:
                rec["attempt"] = attempt
            if incident is not None and rng.random() < incident[2]:
                status, exc, _, retry_after = incident
                retry = attempt < MAX_ATTEMPTS and status not in (401, 404)
                rec.update(ok=False, status_code=status, exception_type=exc,
                           exception_message=f"{exc}: upstream said no", retry_after=retry_after,
                           attempt=attempt, final=not retry)
                failed += 1
                if retry:  # the router's retry on another deployment of the group, a moment later
                    group = d // GROUP_SIZE
                    other = group * GROUP_SIZE + (d - group * GROUP_SIZE + rng.randint(1, GROUP_SIZE - 1)) % GROUP_SIZE
                    heapq.heappush(pending, (ts + rng.uniform(0.05, 1.5), min(other, deployments - 1), attempt + 1,
                                             req))
            else:
                rec["ok"] = True
            buf.append(orjson.dumps(rec))
            written += 1
            if len(buf) >= 10_000:
                out.write(b"\n".join(buf) + b"\n")
                buf.clear()
                incidents.forget_before(minute - 1)
        if buf:
            out.write(b"\n".join(buf) + b"\n")
    return written, failed


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--deployments", type=int, default=2_000)
    p.add_argument("--rate", type=float, default=300.0, help="new requests per second of event time")
    p.add_argument("--failures", type=float, default=0.074, help="target share of failed records")
    p.add_argument("--shape", choices=SHAPES, default="mixed", help="which incidents make up the failures")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", type=Path, default=Path("bench/out/incident"))
    a = p.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    write_config(a.out / "fleet.yaml", a.deployments, GROUP_SIZE)
    n, failed = generate(a.out / "fleet.jsonl", a.records, a.deployments, a.seed, a.rate, a.failures, a.shape)
    print(f"wrote {a.out / 'fleet.yaml'} and {a.out / 'fleet.jsonl'}: {n:,} records, {failed / n:.1%} failed")


if __name__ == "__main__":
    main()
