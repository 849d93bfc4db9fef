"""What one write to LiteLLM's health map costs Redis, at fleet size (issue 26).

    .venv/bin/python bench/health_map.py [--deployments 10000] [--writes 300] [--unknown 1000] [--json FILE]

Starts its own redis-server on a free port (so the figures are this bench's commands alone; `--redis-url` to use
another, whose other clients then count too), fills the map with --deployments registered entries (64-hex ids,
as LiteLLM derives them) and --unknown unregistered 256-character ids (the B10 maximum), then merges --writes
verdicts of registered deployments one by one with coolant's writer (`coolant/io/health_map.py`) and reports,
per write:
  redis   the Redis server's time (`INFO commandstats`: WATCH, GET, TIME, MULTI, SET, EXEC, UNWATCH), the time it
          serves no other client: the goal is <= 5 ms at 10,000 deployments;
  wall    the write as the worker waits for it (Redis, the network, and the merge in the worker);
  map     the map's size in bytes, and its entries after the writes (registered + at most UNKNOWN_MAX others).
Then a flood of --flood writes for distinct new unregistered ids: the map must stay at most UNKNOWN_MAX of them.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
from redis.asyncio import Redis

from coolant.io.health_map import UNKNOWN_MAX, HealthMap
from coolant.io.materializer import HEALTH_KEY
from coolant.processors.state import HealthState

COMMANDS = ("watch", "get", "time", "multi", "set", "exec", "unwatch")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _usec(r: Redis) -> float:
    """Microseconds Redis spent in the writer's commands so far."""
    stats: dict[str, Any] = await r.info("commandstats")
    return sum(float(stats.get(f"cmdstat_{c}", {}).get("usec", 0)) for c in COMMANDS)


def _ids(n: int, tag: str) -> list[str]:
    return [hashlib.sha256(f"{tag}{i}".encode()).hexdigest() for i in range(n)]


async def run(url: str, deployments: int, writes: int, unknown: int, flood: int) -> dict[str, Any]:
    r = Redis.from_url(url)
    try:
        registered = _ids(deployments, "reg")
        known = set(registered)
        now = time.time()
        entries = {d: {"is_healthy": True, "timestamp": now - 30, "reason": ""} for d in registered}
        entries |= {("u" * 192) + i[:64]: {"is_healthy": False, "timestamp": now - 60, "reason": "x"}
                    for i in _ids(unknown, "unk")}
        await r.set(HEALTH_KEY, orjson.dumps(entries), ex=900)
        size = await r.strlen(HEALTH_KEY)
        writer = HealthMap(r, HEALTH_KEY, known.__contains__)
        await r.config_resetstat()
        before = await _usec(r)
        started = time.perf_counter()
        cpu = time.process_time()
        for i in range(writes):
            dep = registered[(i * 7919) % deployments]
            assert await writer.write(dep, HealthState(i % 3 != 0, time.time(), "" if i % 3 else "x"))
        wall = (time.perf_counter() - started) / writes
        cpu_per = (time.process_time() - cpu) / writes
        redis_per = (await _usec(r) - before) / writes / 1000
        after = json.loads(await r.get(HEALTH_KEY))
        for i in range(flood):
            await writer.write(f"flood-{i:06d}", HealthState(False, time.time(), "x"))
        flooded = json.loads(await r.get(HEALTH_KEY))
        return {
            "deployments": deployments,
            "unknown_before": unknown,
            "writes": writes,
            "map_bytes": size,
            "redis_ms_per_write": round(redis_per, 3),
            "wall_ms_per_write": round(wall * 1000, 3),
            "worker_cpu_ms_per_write": round(cpu_per * 1000, 3),
            "entries_after": len(after),
            "flood": flood,
            "unknown_after_flood": sum(1 for k in flooded if k not in known),
            "unknown_max": UNKNOWN_MAX,
            "load": os.getloadavg(),
        }
    finally:
        await r.delete(HEALTH_KEY)
        await r.aclose()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--deployments", type=int, default=10_000)
    p.add_argument("--writes", type=int, default=300)
    p.add_argument("--unknown", type=int, default=UNKNOWN_MAX)
    p.add_argument("--flood", type=int, default=2_000)
    p.add_argument("--redis-url", help="use this Redis instead of starting one (its other clients count too)")
    p.add_argument("--json", type=Path, help="also write the figures here")
    a = p.parse_args()
    proc = None
    tmp = None
    url = a.redis_url
    if url is None:
        server = shutil.which("redis-server")
        if server is None:
            raise SystemExit("no redis-server on PATH: pass --redis-url")
        port, tmp = _free_port(), tempfile.mkdtemp(prefix="health-map-bench-")
        proc = subprocess.Popen([server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly",
                                 "no", "--dir", tmp], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"redis://127.0.0.1:{port}/0"
        for _ in range(100):
            try:
                asyncio.run(Redis.from_url(url).ping())
                break
            except Exception:
                time.sleep(0.05)
    try:
        out = asyncio.run(run(url, a.deployments, a.writes, a.unknown, a.flood))
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(10)
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"map        {out['deployments']:,} registered + {out['unknown_before']:,} unregistered 256-char ids: "
          f"{out['map_bytes']:,} bytes")
    print(f"redis      {out['redis_ms_per_write']:.3f} ms per write (goal <= 5 ms)")
    print(f"wall       {out['wall_ms_per_write']:.3f} ms per write "
          f"({out['worker_cpu_ms_per_write']:.3f} ms worker CPU)")
    print(f"flood      {out['flood']:,} new unregistered ids: {out['unknown_after_flood']:,} kept "
          f"(at most {out['unknown_max']:,})")
    print(f"load       {out['load'][0]:.2f} {out['load'][1]:.2f} {out['load'][2]:.2f}")
    if a.json is not None:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
