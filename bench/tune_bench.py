"""`coolant tune` throughput: one recording × a 12-policy grid, in parallel processes.

    .venv/bin/python bench/tune_bench.py [--records 1000000] [--jobs N]

Generates bench/out/fleet.jsonl (bench/fleet_traffic.py: 2,000 deployments, incident bursts) if
missing, then runs what `coolant tune` runs, timing each phase:
  read     reading + decoding + validating every record once, and indexing the traffic;
  grid     12 policies (router allowed_fails null/0/3 × window tumbling/sliding × backoff off/on),
           each a full replay plus its metrics, over --jobs worker processes (default: CPU count);
and prints the wall time and records × policies per second (of the grid phase and overall), and
the CPU time the grid used (records × policies per CPU-second is the per-core rate, which holds on
a busy machine too). Peak RSS is shown for the parent and for the largest worker.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from coolant.config.loader import load_config
from coolant.config.yaml_read import load_yaml
from coolant.io.sources import read_blocks
from coolant.tuning.grid import build_grid, parse_axis
from coolant.tuning.runner import GridRun, default_jobs
from coolant.tuning.traffic import load_recording

OUT = Path(__file__).parent / "out"
GRID = (
    "router_settings.allowed_fails=null,0,3",
    "coolant.window=tumbling,sliding",
    "coolant.backoff=null,{}",
)


def _cpu() -> float:
    """User + system CPU seconds of this process and its finished workers."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--jobs", type=int, default=default_jobs())
    a = p.parse_args()
    data, config = OUT / "fleet.jsonl", OUT / "fleet.yaml"
    lines = sum(1 for _ in data.open("rb")) if data.exists() else 0
    if lines != a.records or not config.exists():
        print(f"generating {a.records:,} records ...", file=sys.stderr)
        gen = Path(__file__).parent / "fleet_traffic.py"
        subprocess.run([sys.executable, str(gen), "--records", str(a.records), "--out", str(OUT)], check=True)

    load_config(config)  # validates, as the command does
    raw = load_yaml(config.read_text())
    points = build_grid(raw, [parse_axis(g) for g in GRID], str(config))

    started = time.perf_counter()
    recording = load_recording(read_blocks([str(data)]), quiet_gap=60)
    t_read = time.perf_counter() - started
    charted = recording.busiest(3)
    grid_started = time.perf_counter()
    cpu_before = _cpu()
    with GridRun([pt.policy for pt in points], recording.records, recording.traffic, 30, charted, a.jobs,
                 recording.blocks) as run:
        for _ in run.completed():
            pass
    results = run.ordered()
    t_grid = time.perf_counter() - grid_started
    cpu_grid = _cpu() - cpu_before
    wall = time.perf_counter() - started

    n, k = len(recording.records), len(points)
    size_mb = data.stat().st_size / 1e6
    print(f"file        {data} ({recording.lines:,} records, {size_mb:.0f} MB), {k} policies, {run.jobs} processes "
          f"(cpus: {os.cpu_count()})")
    print(f"read        {t_read:>8.2f} s  ({recording.lines / t_read:,.0f} records/s: read + decode + index, once)")
    print(f"grid        {t_grid:>8.2f} s  ({n * k / t_grid:,.0f} records×policies/s; "
          f"{n / (t_grid / k * run.jobs):,.0f} records/s per process)")
    print(f"wall        {wall:>8.2f} s  ({n * k / wall:,.0f} records×policies/s overall)")
    print(f"grid CPU    {cpu_grid:>8.2f} s  ({n * k / cpu_grid:,.0f} records×policies per CPU-second; "
          f"{cpu_grid / t_grid:.2f} CPUs busy on average, load average now {os.getloadavg()[0]:.1f})")
    parent = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"peak RSS    {parent:>8,.0f} MB parent, {child:,.0f} MB largest worker")
    print()
    print(f"{'policy':<55} {'cooldowns':>9} {'avoided':>9} {'diverted':>9} {'flaps':>6}")
    for pt, ev in zip(points, results, strict=True):
        f = ev.figures
        print(f"{pt.label:<55} {f.cooldowns:>9,} {f.failures_avoided:>9,} {f.successes_diverted:>9,} {f.flaps:>6,}")


if __name__ == "__main__":
    main()
