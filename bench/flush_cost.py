"""CPU per record of the path store's part of a batch (load, mark a seen id, touch, flush), in process CPU time.

    .venv/bin/python bench/flush_cost.py [--records 120000] [--deployments 2000] [--rate 3000] [--batches 30,300]
        [--json FILE]

The live worker's outcome lane does this for every record, after the policy step: at live rates it is about a
third of the worker's main-thread CPU, and it runs with the event loop held between yields (coolant/streams/lane.py
YIELD_EVERY). Records are spread round-robin over the deployments with event times spaced at --rate, and flushed
every batch (30: a lane keeping up at a few thousand records/s; 300: one catching up). The tables and the producer
are in-memory stand-ins (the producer's writes resolve at once), so the figure is the store's own Python work, not
the broker's: process CPU time, steady on a shared machine where wall time is not.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

from coolant.streams.pathstore import PathStore

T0 = 1.8e9
"""Event time of the first record (epoch seconds)."""


class Table:
    """What `PathStore` uses of a table: its data and its changelog topic's name."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.changelog = name + "-changelog"
        self.data: dict[bytes, bytes] = {}


class Producer:
    """A producer whose every write is durable at once (a resolved future)."""

    def __init__(self) -> None:
        self.writes = 0

    async def send(self, *_: Any) -> asyncio.Future[None]:
        self.writes += 1
        future = asyncio.get_running_loop().create_future()
        future.set_result(None)
        return future


async def run(records: int, deployments: int, rate: float, batch: int) -> dict[str, float]:
    store = PathStore(Table("state"), Table("seen"), lambda: 180.0)  # type: ignore[arg-type]
    producer = Producer()
    names = [f"dep-{i}" for i in range(deployments)]
    started = time.process_time()
    for n in range(records):
        dep = names[n % deployments]
        ps = store.load(dep)
        ps.seen[f"e{n}-{n % 997:06x}"] = T0 + n / rate
        store.touch(dep, ps, n % 8)
        if (n + 1) % batch == 0:
            await store.flush(producer)
    await store.flush(producer)
    cpu = time.process_time() - started
    return {"batch": batch, "us_per_record": cpu / records * 1e6, "writes_per_record": producer.writes / records}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=int, default=120_000)
    p.add_argument("--deployments", type=int, default=2000)
    p.add_argument("--rate", type=float, default=3000, help="records/s of event time")
    p.add_argument("--batches", default="30,300", help="comma-separated batch sizes (records per flush)")
    p.add_argument("--json", type=Path, help="also write the figures here (with the load average)")
    a = p.parse_args()
    rows = []
    for batch in (int(b) for b in a.batches.split(",")):
        row = asyncio.run(run(a.records, a.deployments, a.rate, batch))
        rows.append(row)
        print(f"batch {batch:5d}: {row['us_per_record']:6.1f} us CPU per record, "
              f"{row['writes_per_record']:.2f} changelog writes per record")
    load = os.getloadavg()
    print(f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    if a.json:
        a.json.write_text(json.dumps({"rows": rows, "load": load}, indent=2) + "\n")


if __name__ == "__main__":
    main()
