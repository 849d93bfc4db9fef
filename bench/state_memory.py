"""The live state's memory without Kafka: `PathStore` + `step_outcome` as the worker's decider runs them.

    .venv/bin/python bench/state_memory.py [--deployments 10000] [--rate 2000] [--seconds 600] [--batch 20]
        [--trace] [--no-late-after]

Feeds --rate records/s of event time (one in 200 a 401) over --deployments for --seconds of event time, in batches
of --batch records (load, decide, touch; then one flush), into a `PathStore` over in-memory tables (Faust's
memory store is a dict too) and a producer whose writes are durable at once. Prints, every 30 s of event time,
this process's RSS, what it added since the start, and the tables' seen keys; with --trace, the traced heap and at
the end its largest allocation sites (tracemalloc roughly doubles the RSS: use the RSS of a run without it).
--no-late-after leaves the seen ids to the engine's once-a-minute discard only (the layout before
`SeenView` forgot a bucket at a time). What this leaves out of a worker: imports, Faust, aiokafka's buffers.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import tracemalloc
import uuid
from pathlib import Path
from typing import Any

import yaml

from coolant.config.loader import load_config
from coolant.processors.engine import step_outcome
from coolant.schemas import Outcome
from coolant.streams.pathstore import PathStore


class Topic:
    def __init__(self, name: str) -> None:
        self.name = name

    def get_topic_name(self) -> str:
        return self.name


class Table:
    def __init__(self, name: str) -> None:
        self.data: dict[bytes, bytes] = {}
        self.changelog_topic = Topic(name + "-changelog")


class Producer:
    async def send(self, *_: Any) -> asyncio.Future[None]:
        future = asyncio.get_running_loop().create_future()
        future.set_result(None)
        return future


def rss_mb() -> float:
    status = Path("/proc/self/status").read_text()
    return next(float(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS")) / 1024


async def run(a: argparse.Namespace) -> None:
    config = Path(tempfile.mkdtemp(prefix="coolant-state-")) / "fleet.yaml"
    models = [{"model_name": f"group-{i // 4}", "litellm_params": {"model": f"openai/m{i}"},
               "model_info": {"id": f"dep-{i}"}} for i in range(a.deployments)]
    config.write_text(yaml.safe_dump({"model_list": models, "router_settings": {"cooldown_time": 60}}))
    policy = load_config(config).policy
    late = policy.options.late_after
    if a.trace:
        tracemalloc.start(1)
    base = rss_mb()
    seen = Table("seen")
    store = PathStore(Table("state"), seen, None if a.no_late_after else (lambda: late))
    producer = Producer()
    t0, n, total, report = time.time() + 86400, 0, int(a.rate * a.seconds), 30.0
    print(f"start: RSS {base:.0f} MB ({a.deployments:,} deployments in the registry)")
    while n < total:
        for _ in range(a.batch):
            dep = f"dep-{n % a.deployments}"
            ok = n % 200 != 0
            fail: dict[str, Any] = {} if ok else {"status_code": 401, "exception_type": "AuthenticationError"}
            rec = Outcome(event_id=f"e{n}-{uuid.uuid4().hex[:6]}", ts=t0 + n / a.rate, deployment_id=dep,
                          model_group="g", ok=ok, **fail)
            ps = store.load(dep)
            step_outcome(policy, ps, rec)
            store.touch(dep, ps, 0)
            n += 1
        await store.flush(producer)
        await asyncio.sleep(0)  # the event loop turns between batches, as in the worker (done callbacks run)
        if n / a.rate >= report:
            report += 30
            traced = f", traced {tracemalloc.get_traced_memory()[0] / 2**20:.1f} MB" if a.trace else ""
            now = rss_mb()
            print(f"{n / a.rate:5.0f} s of event time ({n:,} records): RSS {now:.0f} MB (+{now - base:.0f}){traced}, "
                  f"{len(seen.data):,} seen buckets stored")
    if a.trace:
        print("largest allocation sites:")
        for stat in tracemalloc.take_snapshot().statistics("lineno")[:15]:
            frame = stat.traceback[0]
            print(f"  {stat.size / 2**20:6.1f} MB  {'/'.join(frame.filename.rsplit('/', 2)[-2:])}:{frame.lineno}"
                  f" ({stat.count:,} blocks)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--deployments", type=int, default=10_000)
    p.add_argument("--rate", type=float, default=2000, help="records per second of event time")
    p.add_argument("--seconds", type=float, default=600, help="seconds of event time")
    p.add_argument("--batch", type=int, default=20, help="records per flush")
    p.add_argument("--trace", action="store_true", help="tracemalloc: the traced heap and its largest sites")
    p.add_argument("--no-late-after", action="store_true",
                   help="forget seen ids only at the engine's discard (once per event-time minute)")
    asyncio.run(run(p.parse_args()))


if __name__ == "__main__":
    main()
