"""Replay throughput against the JSON parse floor, on the quiet-day stream and on the incident stream.

    .venv/bin/python bench/replay_bench.py [--streams success incident] [--backends auto python] [--repeat 3]
                                          [--records 1000000] [--deployments 2000] [--json FILE]

Streams (generated into bench/out/ when missing or of another size):
  success   bench/fleet_traffic.py: 96-97% plain successes, incident bursts on ~2% of deployment-minutes
            (bench/out/fleet.jsonl; with another --deployments, bench/out/fleet-N/);
  incident  bench/incident_traffic.py: ~7.4% failures (401, 404, 408, 429, 500, 502, 503) in bursts and
            provider-wide outages, with retries (bench/out/incident/; with another --deployments, incident-N/).
For each stream, best of --repeat runs, the runs of each kind interleaved so a load spike hits them alike:
  floor   reading the lines and orjson.loads of each (the least any JSON reader must do);
  replay  coolant's replay: decode + validate + policy + summary (cooldowns encoded as the command writes them),
          once per --backends entry (auto: native when built; python: the pure-Python backend).
Prints records/s, the ratio replay/floor in wall and in CPU seconds (steadier on a busy machine), whether every
backend gave byte-identical cooldowns and summary (md5), and the load average. `--json FILE` writes one entry
per (stream, backend): records, seconds, floor_seconds, ratio, backend, and the CPU figures.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from coolant.config.loader import load_config
from coolant.io.sources import read_blocks, read_lines
from coolant.native_backend import BACKENDS, for_policy
from coolant.replay.run import replay
from coolant.schemas import Cooldown, encode

OUT = Path(__file__).parent / "out"
GENERATORS = {"success": "fleet_traffic.py", "incident": "incident_traffic.py"}


def floor(path: str) -> int:
    n = 0
    loads = orjson.loads
    for _, _, data in read_lines([path]):
        loads(data)
        n += 1
    return n


def run_replay(path: str, config: Path, backend: str) -> tuple[int, int, str]:
    """(records, cooldowns, md5 of the cooldown lines and the summary JSON)."""
    policy = load_config(config).policy
    out: list[Cooldown] = []
    summary = replay(read_blocks([path]), policy, out.append, backend=backend)
    digest = hashlib.md5(usedforsecurity=False)
    for cd in out:
        digest.update(encode(cd) + b"\n")
    digest.update(orjson.dumps(summary.to_dict()))
    return summary.records, len(out), digest.hexdigest()


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """(wall s, CPU s, result) of one run."""
    t, c = time.perf_counter(), _cpu()
    result = fn()
    return time.perf_counter() - t, _cpu() - c, result


def stream_files(stream: str, records: int, deployments: int) -> tuple[Path, Path]:
    """The stream's JSONL and config, generated when missing or of another size."""
    name = "fleet" if stream == "success" else "incident"
    out = OUT / f"{name}-{deployments}" if deployments != 2000 else OUT if stream == "success" else OUT / name
    data, config = out / "fleet.jsonl", out / "fleet.yaml"
    lines = sum(1 for _ in data.open("rb")) if data.exists() else 0
    if lines != records or not config.exists():
        print(f"generating the {stream} stream ({records:,} records) ...", file=sys.stderr)
        gen = Path(__file__).parent / GENERATORS[stream]
        subprocess.run([sys.executable, str(gen), "--records", str(records), "--deployments", str(deployments),
                        "--out", str(out)], check=True)
    return data, config


def bench_stream(stream: str, a: argparse.Namespace) -> list[dict[str, Any]]:
    data, config = stream_files(stream, a.records, a.deployments)
    policy = load_config(config).policy
    ran = {b: for_policy(policy, b).name for b in a.backends}
    floors: list[tuple[float, float]] = []
    runs: dict[str, list[tuple[float, float]]] = {b: [] for b in a.backends}
    results: dict[str, tuple[int, int, str]] = {}
    n = 0
    for _ in range(a.repeat):
        wall, cpu, n = timed(lambda: floor(str(data)))
        floors.append((wall, cpu))
        for b in a.backends:
            wall, cpu, results[b] = timed(lambda b=b: run_replay(str(data), config, b))  # type: ignore[misc]
            runs[b].append((wall, cpu))
    t_floor, c_floor = min(w for w, _ in floors), min(c for _, c in floors)
    size_mb = data.stat().st_size / 1e6
    print(f"{stream} stream: {data} ({n:,} records, {a.deployments:,} deployments, {size_mb:.0f} MB)")
    print(f"  floor            {n / t_floor:>10,.0f} records/s  ({t_floor:.2f} s wall, {c_floor:.2f} s CPU: "
          f"read + orjson.loads)")
    entries = []
    for b in a.backends:
        t, c = min(w for w, _ in runs[b]), min(c for _, c in runs[b])
        records, cooldowns, md5 = results[b]
        print(f"  replay {ran[b]:<9} {records / t:>10,.0f} records/s  ({t:.2f} s wall, {t / t_floor:.2f}x the floor; "
              f"CPU {c:.2f} s, {c / c_floor:.2f}x; {cooldowns:,} cooldowns, md5 {md5[:12]})")
        entries.append({
            "stream": stream, "backend": ran[b], "asked": b, "records": records, "cooldowns": cooldowns,
            "seconds": round(t, 3), "floor_seconds": round(t_floor, 3), "ratio": round(t / t_floor, 3),
            "cpu_seconds": round(c, 3), "floor_cpu_seconds": round(c_floor, 3), "cpu_ratio": round(c / c_floor, 3),
            "output_md5": md5,
        })
    same = len({e["output_md5"] for e in entries}) == 1
    print(f"  output           {'byte-identical across backends' if same else 'DIFFERS between backends'}")
    return entries


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--streams", nargs="+", choices=sorted(GENERATORS), default=["success", "incident"])
    p.add_argument("--backends", nargs="+", choices=BACKENDS, default=["auto", "python"],
                   help="replay each stream on these backends (default: auto and python)")
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--deployments", type=int, default=2000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", type=Path, help="write the figures here")
    a = p.parse_args()
    load = os.getloadavg()
    entries = [e for s in a.streams for e in bench_stream(s, a)]
    after = os.getloadavg()
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {rss_mb:,.0f} MB; load average {load[0]:.2f} before, {after[0]:.2f} after "
          f"({os.cpu_count()} CPUs)")
    if a.json is not None:
        a.json.write_bytes(orjson.dumps({"streams": entries, "load_before": load[0], "load_after": after[0]},
                                        option=orjson.OPT_INDENT_2))


if __name__ == "__main__":
    main()
