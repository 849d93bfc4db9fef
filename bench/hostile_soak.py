"""Issue 26's hostile mix, looped: does any run stall a lane or the commit, and does SIGTERM end the worker in time?

    .venv/bin/python bench/hostile_soak.py [--runs 20] [--flood 300] [--valid 1500] [--rate 200] [--json FILE]

Each run is a fresh worker on fresh topics (the mix's stall came on a worker that had just started), on the
shared broker and Redis with its own prefixes:
  1. the worker starts and is assigned; the outcomes topic is allowed the 2 MB record;
  2. the mix (tests/integration/hostile_mix.py) is produced while --rate records/s of valid background
     traffic run, and the run waits (up to --timeout s) until the consumer group has committed every record
     of the outcomes and health topics and every bad record is dead-lettered;
  3. SIGTERM, timed: the documented bound is 15 s (the worker is SIGKILLed after 60 s).
A run passes when all three hold. A stalled run keeps the worker up until its stall line (/healthz's 503 and
the log line with the producer's and the lanes' state, after the stall watch's 60 s) is in the log, and prints
that line. The load average is printed with every run (these machines are shared); --hogs N adds N busy
processes of this script's own for the duration.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.integration import hostile_mix
from tests.support.kafka import read_topic
from tests.support.records import outcome, uid
from tests.support.worker import Case

BOOTSTRAP = os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:19092")
REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:16379/0")
SIGTERM_BOUND = 15.0
"""The documented bound on a SIGTERMed worker's exit (docs: `coolant worker`)."""


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


async def background(topic: str, rate: float, stop: asyncio.Event) -> int:
    """Valid successes at `rate` records/s for unregistered deployments (counted, never cooled) until `stop`."""
    if rate <= 0:
        await stop.wait()
        return 0
    producer = AIOKafkaProducer(bootstrap_servers=BOOTSTRAP, acks="all", linger_ms=2)
    await producer.start()
    sent = 0
    try:
        t0 = time.monotonic()
        while not stop.is_set():
            due = int((time.monotonic() - t0) * rate)
            while sent < due:
                dep = f"bg-{sent % 500}"
                await producer.send(topic, outcome(f"bg-{uid()}-{sent}", time.time(), dep), key=dep.encode())
                sent += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.02)
        await producer.flush()
    finally:
        await producer.stop()
    return sent


async def committed(group: str, topics: list[str]) -> dict[tuple[str, int], int]:
    """The consumer group's committed offset per partition of `topics`."""
    admin = AIOKafkaAdminClient(bootstrap_servers=BOOTSTRAP)
    await admin.start()
    try:
        offsets = await admin.list_consumer_group_offsets(group)
    finally:
        await admin.close()
    return {(tp.topic, tp.partition): meta.offset for tp, meta in offsets.items() if tp.topic in topics}


async def outcome_of_run(case: Case, mix: list[hostile_mix.Sent], sent: list[Any], timeout: float,
                         ends: dict[tuple[str, int], int] | None = None) -> str | None:
    """None once the group has committed past every record of the mix (or up to `ends`) and every bad record is
    dead-lettered; else what is missing at the deadline."""
    topic = {"outcomes": case.outcomes, "health": case.health}
    bad = {(topic[s.topic], m.partition, m.offset): s.what for s, m in zip(mix, sent, strict=True) if s.kind == "bad"}
    if ends is None:
        ends = {}
        for s, m in zip(mix, sent, strict=True):
            at = (topic[s.topic], m.partition)
            ends[at] = max(ends.get(at, 0), m.offset + 1)
    deadline = time.monotonic() + timeout
    problem = "nothing checked"
    while time.monotonic() < deadline:
        done = await committed(case.app_id, list(topic.values()))
        behind = {f"{t}[{p}]": end - done.get((t, p), 0) for (t, p), end in ends.items() if done.get((t, p), 0) < end}
        dead = set()
        for msg in await read_topic(BOOTSTRAP, case.deadletter):
            d = orjson.loads(msg.value)
            dead.add((d.get("topic"), d.get("partition"), d.get("offset")))
        missing = sorted(bad[at] for at in bad.keys() - dead)
        if not behind and not missing:
            return None
        problem = (f"not committed: {behind or 'none'}; {len(missing)} of {len(bad)} bad records not "
                   f"dead-lettered {missing[:5]}")
        await asyncio.sleep(2)
    return problem


async def end_offsets(topics: list[str], partitions: int) -> dict[tuple[str, int], int]:
    consumer = AIOKafkaConsumer(bootstrap_servers=BOOTSTRAP)
    await consumer.start()
    try:
        tps = [TopicPartition(t, p) for t in topics for p in range(partitions)]
        return {(tp.topic, tp.partition): end for tp, end in (await consumer.end_offsets(tps)).items()}
    finally:
        await consumer.stop()


def stall_lines(log: Path) -> list[str]:
    text = log.read_text(errors="replace").splitlines()
    return [line for line in text if "stalled:" in line or "still being decided" in line]


async def one_run(n: int, a: argparse.Namespace) -> dict[str, Any]:
    case = Case(Path(tempfile.mkdtemp(prefix="coolant-soak-")))
    result: dict[str, Any] = {"run": n, "load_before": load_average()}
    try:
        w = await case.worker("a", BOOTSTRAP, redis_url=REDIS_URL, partitions=a.partitions,
                              extra_args=("--max-ts-ahead", "60"))
        if a.warm:
            await w.wait_ready()
        else:  # the mix is the worker's first input: no probe has used its producer yet
            await w.wait_healthy()
        await hostile_mix.allow_big_records(BOOTSTRAP, [case.outcomes])
        mix = hostile_mix.build(time.time() - 5, f"s{n}-{case.tag}", a.partitions, flood=a.flood, valid=a.valid)
        stop = asyncio.Event()
        bg = asyncio.create_task(background(case.outcomes, a.rate, stop))
        t0 = time.monotonic()
        sent = await hostile_mix.produce(BOOTSTRAP, case.prefix, mix)
        problem = await outcome_of_run(case, mix, sent, a.timeout)
        result["caught_up_s"] = round(time.monotonic() - t0, 1) if problem is None else None
        stop.set()
        result["background"] = await bg
        if problem is None:  # and the background traffic too
            ends = await end_offsets([case.outcomes, case.health], a.partitions)
            problem = await outcome_of_run(case, mix, sent, a.timeout, ends)
        result["problem"] = problem
        if problem is not None:
            case.log(f"run {n}: STALL? {problem}; waiting for the stall line")
            with contextlib.suppress(AssertionError):
                _, body = await w.get("/healthz")
                result["healthz"] = body
            for _ in range(45):
                if stall_lines(w.log_path):
                    break
                await asyncio.sleep(2)
            result["stall_lines"] = stall_lines(w.log_path)
            _, body = await w.get("/healthz")
            result["healthz"] = body
        assert w.proc is not None
        t_term = time.monotonic()
        w.proc.terminate()
        try:
            rc = await asyncio.to_thread(w.proc.wait, 60)
            result["sigterm_s"] = round(time.monotonic() - t_term, 1)
            result["rc"] = rc
        except subprocess.TimeoutExpired:
            result["sigterm_s"] = None
            w.kill()
        result["passed"] = problem is None and result["sigterm_s"] is not None and result["sigterm_s"] <= SIGTERM_BOUND
        result["log"] = str(w.log_path)
        if not result["passed"]:
            print(w.log_tail(80))
    finally:
        result["load_after"] = load_average()
        await case.close(REDIS_URL)
    return result


async def main_async(a: argparse.Namespace) -> int:
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(a.hogs)]
    results = []
    try:
        for n in range(1, a.runs + 1):
            r = await one_run(n, a)
            results.append(r)
            print(f"run {n:2d}: {'pass' if r['passed'] else 'FAIL'}  caught up {r.get('caught_up_s')} s  "
                  f"SIGTERM exit {r.get('sigterm_s')} s  background {r.get('background')} records  "
                  f"load {r['load_before']} -> {r['load_after']}"
                  + (f"\n        {r['problem']}\n        " + "\n        ".join(r.get("stall_lines", []))
                     if r.get("problem") else ""), flush=True)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    passed = sum(1 for r in results if r["passed"])
    print(f"{passed} of {len(results)} runs passed (flood {a.flood}, valid {a.valid}, rate {a.rate}/s, "
          f"hogs {a.hogs}); load now {load_average()}")
    if a.json:
        a.json.write_text(orjson.dumps({"runs": results, "passed": passed, "total": len(results)},
                                       option=orjson.OPT_INDENT_2).decode())
    return 0 if passed == len(results) else 1


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--flood", type=int, default=300,
                   help="misrouted health records (unregistered ids of the longest valid length)")
    p.add_argument("--valid", type=int, default=1500, help="valid outcome records after the flood")
    p.add_argument("--rate", type=float, default=200.0, help="background valid records/s during each run")
    p.add_argument("--partitions", type=int, default=2)
    p.add_argument("--timeout", type=float, default=120.0, help="seconds a run may take to commit everything")
    p.add_argument("--warm", action="store_true", help="probe the worker until it decides before the mix (by "
                   "default the mix is its first input, as in the run that found the stall)")
    p.add_argument("--hogs", type=int, default=0, help="busy processes of its own while it runs (extra load)")
    p.add_argument("--json", type=Path, help="write every run's figures here")
    sys.exit(asyncio.run(main_async(p.parse_args())))


if __name__ == "__main__":
    main()
