"""Replay throughput against the JSON parse floor (issue: policy core and replay).

    .venv/bin/python bench/replay_bench.py [--records 1000000] [--deployments 2000] [--repeat 3] [--backend auto]

Generates bench/out/fleet.jsonl (1M outcome records, 2,000 deployments, incident bursts; with another
--deployments, bench/out/fleet-N/) if missing, then times, on the same file, best of --repeat runs:
  floor   reading the lines and orjson.loads of each (the least any JSON reader must do),
  replay  coolant's replay loop: decode + validate + policy + summary (cooldowns kept in a list).
Prints records/s for both and the ratio replay/floor, and the same in CPU seconds (steadier on a busy machine).
Also peak RSS, to show state stays bounded. --backend picks the success path (coolant.native_backend: native when
built, python to compare).
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
from pathlib import Path

import orjson

from coolant.config.loader import load_config
from coolant.io.sources import read_blocks, read_lines
from coolant.native_backend import BACKENDS, for_policy
from coolant.replay.run import replay
from coolant.schemas import Cooldown

OUT = Path(__file__).parent / "out"


def floor(path: str) -> int:
    n = 0
    loads = orjson.loads
    for _, _, data in read_lines([path]):
        loads(data)
        n += 1
    return n


def run_replay(path: str, config: Path, backend: str) -> tuple[int, int]:
    policy = load_config(config).policy
    out: list[Cooldown] = []
    summary = replay(read_blocks([path]), policy, out.append, backend=backend)
    return summary.records, len(out)


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def best(fn: object, repeat: int) -> tuple[float, float, object]:
    """(best wall s, best CPU s, result) of `repeat` runs."""
    times, cpus, result = [], [], None
    for _ in range(repeat):
        t, c = time.perf_counter(), _cpu()
        result = fn()  # type: ignore[operator]
        times.append(time.perf_counter() - t)
        cpus.append(_cpu() - c)
    return min(times), min(cpus), result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--deployments", type=int, default=2000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--backend", choices=BACKENDS, default="auto", help="the success path (default: native when built)")
    a = p.parse_args()
    out = OUT if a.deployments == 2000 else OUT / f"fleet-{a.deployments}"
    data, config = out / "fleet.jsonl", out / "fleet.yaml"
    lines = sum(1 for _ in data.open("rb")) if data.exists() else 0
    if lines != a.records:
        print(f"generating {a.records:,} records ...", file=sys.stderr)
        gen = Path(__file__).parent / "fleet_traffic.py"
        subprocess.run([sys.executable, str(gen), "--records", str(a.records), "--deployments", str(a.deployments),
                        "--out", str(out)], check=True)
    size_mb = data.stat().st_size / 1e6
    t_floor, c_floor, n = best(lambda: floor(str(data)), a.repeat)
    t_replay, c_replay, (records, cooldowns) = best(  # type: ignore[misc]
        lambda: run_replay(str(data), config, a.backend), a.repeat
    )
    backend = for_policy(load_config(config).policy, a.backend)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"file        {data} ({n:,} records, {a.deployments:,} deployments, {size_mb:.0f} MB)")
    print(f"floor       {n / t_floor:>12,.0f} records/s  ({t_floor:.2f} s, read + orjson.loads)")
    print(f"replay      {records / t_replay:>12,.0f} records/s  ({t_replay:.2f} s, {cooldowns:,} cooldowns)")
    print(f"ratio       {t_replay / t_floor:>12.2f} x the parse floor  (CPU s: {c_replay:.2f} / {c_floor:.2f} = "
          f"{c_replay / c_floor:.2f} x)")
    print(f"backend     {type(backend).__name__:>12}")
    print(f"peak RSS    {rss_mb:>12,.0f} MB")


if __name__ == "__main__":
    main()
