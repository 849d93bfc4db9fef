"""`coolant tune` throughput: one recording × a 12-policy grid, in parallel processes, against one replay of it.

    .venv/bin/python bench/tune_bench.py [--stream success|incident] [--records 1000000] [--jobs N]
                                        [--backend auto|native|python] [--json FILE]

Generates the stream if missing (bench/replay_bench.py's: success = bench/fleet_traffic.py, incident =
bench/incident_traffic.py), then runs what `coolant tune` runs, timing each phase:
  read     reading + decoding + validating every record once, and indexing the traffic;
  grid     12 policies (router allowed_fails null/0/3 × window tumbling/sliding × backoff off/on),
           each a full replay plus its metrics, over --jobs worker processes (default: CPU count);
then one `coolant replay` of the same file on the same backend (its ratio to the tune run is the goal's figure;
on a loaded machine the CPU-based one is steadier: read CPU plus grid CPU spread over the processes, over the
replay's CPU seconds),
and prints the wall time and records × policies per second (of the grid phase and overall), and
the CPU time the grid used (records × policies per CPU-second is the per-core rate, which holds on
a busy machine too). Peak RSS is shown for the parent and for the largest worker.
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from pathlib import Path

import orjson
from replay_bench import run_replay, stream_files

from coolant.config.loader import load_config
from coolant.config.yaml_read import load_yaml
from coolant.io.sources import read_blocks
from coolant.native_backend import BACKENDS, on_python, resolve
from coolant.tuning.grid import build_grid, parse_axis
from coolant.tuning.runner import GridRun, default_jobs
from coolant.tuning.traffic import load_recording

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
    p.add_argument("--stream", choices=("success", "incident"), default="incident")
    p.add_argument("--backend", choices=BACKENDS, default="auto")
    p.add_argument("--json", type=Path, help="write the figures here")
    a = p.parse_args()
    data, config = stream_files(a.stream, a.records, 2000)
    load_before = os.getloadavg()[0]

    load_config(config)  # validates, as the command does
    raw = load_yaml(config.read_text())
    points = build_grid(raw, [parse_axis(g) for g in GRID], str(config))

    started, cpu_started = time.perf_counter(), _cpu()
    backend = resolve(a.backend)
    native = backend == "native"
    recording = load_recording(read_blocks([str(data)]), quiet_gap=60, keep_blocks=native,
                               lean=native and not any(on_python(pt.policy) for pt in points))
    t_read, cpu_read = time.perf_counter() - started, _cpu() - cpu_started
    charted = recording.busiest(3)
    grid_started = time.perf_counter()
    cpu_before = _cpu()
    with GridRun([pt.policy for pt in points], recording.records, recording.traffic, 30, charted, a.jobs,
                 recording.blocks, recording.decoded, recording.compact) as run:
        for _ in run.completed():
            pass
    results = run.ordered()
    t_grid = time.perf_counter() - grid_started
    cpu_grid = _cpu() - cpu_before
    wall = time.perf_counter() - started
    replay_started, cpu_before = time.perf_counter(), _cpu()
    run_replay(str(data), config, a.backend)
    t_replay, cpu_replay = time.perf_counter() - replay_started, _cpu() - cpu_before
    # the wall time the run would take on `jobs` otherwise idle cores: its CPU seconds spread over them
    idle_ratio = (cpu_read + cpu_grid / run.jobs) / cpu_replay

    n, k = recording.engine_records, len(points)
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
    print(f"replay      {t_replay:>8.2f} s  (one `coolant replay` of the file, backend {backend}): tune = "
          f"{wall / t_replay:.2f}x one replay")
    print(f"CPU         read {cpu_read:.2f} s + grid {cpu_grid:.2f} s over {run.jobs} processes, against one replay's "
          f"{cpu_replay:.2f} s: {idle_ratio:.2f}x one replay on idle cores")
    if a.json is not None:
        a.json.write_bytes(orjson.dumps({
            "stream": a.stream, "backend": backend, "records": recording.lines, "policies": k, "jobs": run.jobs,
            "seconds": round(wall, 3), "read_seconds": round(t_read, 3), "grid_seconds": round(t_grid, 3),
            "grid_cpu_seconds": round(cpu_grid, 3), "replay_seconds": round(t_replay, 3),
            "ratio_to_replay": round(wall / t_replay, 3), "read_cpu_seconds": round(cpu_read, 3),
            "replay_cpu_seconds": round(cpu_replay, 3), "cpu_ratio_to_replay": round(idle_ratio, 3),
            "load_before": load_before,
            "load_after": os.getloadavg()[0],
        }, option=orjson.OPT_INDENT_2))
    print()
    print(f"{'policy':<55} {'cooldowns':>9} {'avoided':>9} {'diverted':>9} {'flaps':>6}")
    for pt, ev in zip(points, results, strict=True):
        f = ev.figures
        print(f"{pt.label:<55} {f.cooldowns:>9,} {f.failures_avoided:>9,} {f.successes_diverted:>9,} {f.flaps:>6,}")


if __name__ == "__main__":
    main()
