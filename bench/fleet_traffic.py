"""Synthetic fleet traffic for benchmarks: many deployments, mostly successes, incident bursts.

Deterministic (seeded). Writes a LiteLLM config and a JSONL outcome file:
    python bench/fleet_traffic.py --records 1000000 --deployments 2000 --out bench/out
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

import orjson
import yaml

T0 = 1_800_000_000.0
GROUP_SIZE = 4
INCIDENTS = (
    # (status, exception type, share of the incident's records that fail, retry-after)
    (429, "RateLimitError", 0.9, "30"),
    (500, "InternalServerError", 0.8, None),
    (503, "ServiceUnavailableError", 0.7, None),
    (401, "AuthenticationError", 1.0, None),
    (400, "BadRequestError", 0.5, None),
)


def write_config(path: Path, deployments: int, group_size: int = GROUP_SIZE) -> None:
    model_list = [
        {
            "model_name": f"group-{i // group_size}",
            "litellm_params": {"model": f"openai/model-{i}", "api_key": "os.environ/OPENAI_API_KEY"},
            "model_info": {"id": f"dep-{i}"},
        }
        for i in range(deployments)
    ]
    path.write_text(yaml.safe_dump({"model_list": model_list, "router_settings": {"cooldown_time": 30}}))


def generate(path: Path, records: int, deployments: int, seed: int, rate: float) -> None:
    """`rate` records/s of event time; ~2% of deployment-minutes are in an incident."""
    rng = random.Random(seed)
    incident: dict[tuple[int, int], tuple[int, str, float, str | None]] = {}
    with path.open("wb") as out:
        buf = []
        for n in range(records):
            ts = T0 + n / rate + rng.random() * 0.5  # small out-of-order jitter
            d = rng.randrange(deployments)
            minute = int(ts // 60)
            key = (d, minute)
            if key not in incident:
                incident[key] = INCIDENTS[rng.randrange(len(INCIDENTS))] if rng.random() < 0.02 else (0, "", 0.0, None)
            status, exc, share, retry_after = incident[key]
            rec: dict[str, object] = {
                "schema": "coolant.outcome/1",
                "event_id": f"e{n}",
                "ts": round(ts, 3),
                "deployment_id": f"dep-{d}",
                "model_group": f"group-{d // GROUP_SIZE}",
                "gateway": f"pod-{n % 10}",
                "latency_ms": round(rng.uniform(80, 1500), 1),
            }
            if status and rng.random() < share:
                message = f"{exc}: upstream said no"
                rec.update(ok=False, status_code=status, exception_type=exc, exception_message=message,
                           retry_after=retry_after)
            else:
                rec["ok"] = True
            buf.append(orjson.dumps(rec))
            if len(buf) >= 10_000:
                out.write(b"\n".join(buf) + b"\n")
                buf.clear()
                if len(incident) > 4 * deployments:
                    incident = {k: v for k, v in incident.items() if k[1] >= minute - 1}
        if buf:
            out.write(b"\n".join(buf) + b"\n")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--deployments", type=int, default=2_000)
    p.add_argument("--rate", type=float, default=2_000.0, help="records per second of event time")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", type=Path, default=Path("bench/out"))
    a = p.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    write_config(a.out / "fleet.yaml", a.deployments)
    generate(a.out / "fleet.jsonl", a.records, a.deployments, a.seed, a.rate)
    print(f"wrote {a.out / 'fleet.yaml'} and {a.out / 'fleet.jsonl'}")


if __name__ == "__main__":
    main()
