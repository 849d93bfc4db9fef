"""Config load time and memory against the fleet size: the cost per deployment should be flat.

    .venv/bin/python bench/config_bench.py [--sizes 2000,10000,50000] [--repeat 3]

Writes bench/out/config-N.yaml (bench/fleet_traffic.py's config: N deployments, groups of 4, each with
litellm_params and model_info.id) if missing, then for each N loads it with `coolant.config.load_config` in a
fresh process, as every command does at start, best of --repeat, and prints the seconds, µs per deployment,
and the peak RSS the load added (peak RSS after it, less RSS before it, with the imports done).
Goal (issue 13): 10,000 deployments in <= 0.5 s and <= 40 MB.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

OUT = Path(__file__).parent / "out"

_CHILD = """
import json, resource, sys, time
from coolant.config.loader import load_config
def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20
before = rss_mb()
t = time.perf_counter()
config = load_config(sys.argv[1])
took = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": took, "added_mb": peak - before, "deployments": len(config.policy.registry.entries)}))
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="2000,10000,50000", help="comma-separated deployment counts")
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args()
    sys.path.insert(0, str(Path(__file__).parent))
    from fleet_traffic import write_config

    OUT.mkdir(parents=True, exist_ok=True)
    print(f"{'deployments':>11} {'YAML':>8} {'load':>8} {'per deployment':>15} {'RSS added':>10}")
    for n in (int(s) for s in a.sizes.split(",")):
        path = OUT / f"config-{n}.yaml"
        if not path.exists():
            write_config(path, n)
        runs = [
            json.loads(subprocess.run([sys.executable, "-c", _CHILD, str(path)], check=True, capture_output=True,
                                      text=True).stdout)
            for _ in range(a.repeat)
        ]
        assert all(r["deployments"] == n for r in runs), runs
        secs = min(r["seconds"] for r in runs)
        added = min(r["added_mb"] for r in runs)
        size = path.stat().st_size / 1e6
        print(f"{n:>11,} {size:>6.1f}MB {secs:>7.3f}s {secs / n * 1e6:>12.1f} µs {added:>8.1f}MB")


if __name__ == "__main__":
    main()
