"""Live pipeline figures on the real broker and Redis (issue: live pipeline).

    scripts/kafka-local start && scripts/redis-local start
    .venv/bin/python bench/live_bench.py [--records 200000] [--rate 2000] [--probes 200] [--deployments 2000]
        [--sustain SECONDS]

Prints three figures (four with --sustain), each on its own fresh topics and worker, with the worker's peak
RSS (VmHWM) and its steady RSS (VmRSS at the end of the phase):
  floor      raw aiokafka consume rate of the same records on the same broker (no processing);
  capacity   one worker's catch-up rate: records pre-loaded (event times spaced at --rate, a backlog of live
             traffic), then the worker started; records/s
             from its first to its last processed record (read from its /metrics), and the ratio
             to the floor;
  latency    at --rate records/s of background traffic, --probes records that each trigger a
             cooldown (a 401 on a deployment of a two-deployment group): time from the producer's
             send to the Redis key `deployment:<id>:cooldown` being readable; p50/p95/p99/max;
  sustain    --rate records/s over all --deployments for --sustain seconds; RSS sampled every 30 s.

--phases picks the phases (capacity's ratio needs floor in the same run). --profile FILE runs the capacity phase's
worker under py-spy (`pip install py-spy`; PY_SPY names the binary), writes its raw folded stacks to FILE and
prints where the time went. --memory-profile runs every worker with tracemalloc on and prints, at the end of each
phase, its traced Python heap by package (coolant module, aiokafka, faust, ...) next to the RSS (tracemalloc costs
memory and time: the RSS and rates of such a run are not the figures), with what grew most since its previous report.
--census adds to each RSS line the worker's glibc heap (in use, free but kept, mmapped), pymalloc's blocks and its
object counts by type with their change (no tracing: what still grows in a long --sustain run). --loop-profile
times the latency worker's event-loop steps per thread (wall and CPU), names the slowest, times every collection
and samples the delay of a callback handed into each loop from another thread (Faust's consumer thread hands every
fetched batch to the main loop that way). All three run the workers through bench/worker_probes.py.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.request import urlopen

import orjson
import redis.asyncio as redis_asyncio
import yaml
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from coolant.io.admin import delete_topics

BOOTSTRAP = os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:19092")
REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:16379/0")
DEPLOYMENTS = int(os.environ.get("BENCH_DEPLOYMENTS", "2000"))
"""Set by --deployments (the environment variable is its default)."""
PARTITIONS = 8


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_config(path: Path, probes: int) -> None:
    models = [
        {"model_name": f"group-{i // 4}", "litellm_params": {"model": f"openai/m{i}"}, "model_info": {"id": f"dep-{i}"}}
        for i in range(DEPLOYMENTS)
    ]
    for i in range(probes):  # probe groups of two: a 401 on pN-a cools it at once (non_retryable)
        for side in ("a", "b"):
            models.append({"model_name": f"probe-{i}", "litellm_params": {"model": f"openai/p{i}{side}"},
                           "model_info": {"id": f"p{i}-{side}"}})
    # 60 s cooldowns: a slow probe still shows up in Redis (a 5 s one would have ended, and be skipped)
    path.write_text(yaml.safe_dump({"model_list": models, "router_settings": {"cooldown_time": 60}}))


def outcome(n: int, ts: float, dep: str, ok: bool = True) -> bytes:
    rec: dict[str, object] = {"schema": "coolant.outcome/1", "event_id": f"e{n}-{uuid.uuid4().hex[:6]}", "ts": ts,
                              "deployment_id": dep, "model_group": "g", "ok": ok}
    if not ok:
        rec.update(status_code=401, exception_type="AuthenticationError")
    return orjson.dumps(rec)


FUTURE_TRAFFIC_ALLOWANCE = "1e9"
"""--max-ts-ahead for traffic dated ahead of the clock (seconds: about 31 years)."""


PROBES = Path(__file__).with_name("worker_probes.py")
"""The worker's entry point under --memory-profile or --loop-profile (bench/worker_probes.py)."""
PROFILE_MEMORY = False
"""Set by --memory-profile."""
PROFILE_LOOP = False
"""Set by --loop-profile."""
CENSUS = False
"""Set by --census."""
WORKER_ARGS: list[str] = []
"""Set by --worker-args: more `coolant worker` options for every worker."""


class Worker:
    def __init__(self, config: Path, prefix: str, workdir: Path, profile: Path | None = None) -> None:
        # the traffic is dated from T0 (2027-01), ahead of the clock on purpose so every cooldown reaches Redis;
        # the worker's B6 check (docs/input-bounds.md) would dead-letter it
        self.port = free_port()
        self.prefix = prefix
        self.log = workdir / f"worker-{prefix}log"
        self.memory_file = workdir / f"memory-{prefix}txt"
        self.loop_file = workdir / f"loop-{prefix}json"
        self.census_file = workdir / f"census-{prefix}txt"
        entry = [str(PROBES)] if PROFILE_MEMORY or PROFILE_LOOP or CENSUS else ["-m", "coolant.cli"]
        cmd = [sys.executable, *entry, "worker", "--config", str(config), "--bootstrap", BOOTSTRAP,
               "--redis-url", REDIS_URL, "--redis-key-prefix", prefix,
               "--topic-prefix", prefix, "--app-id", prefix.rstrip("."),
               "--web-port", str(self.port), "--data-dir", str(workdir / prefix), "--partitions", str(PARTITIONS),
               "--max-ts-ahead", FUTURE_TRAFFIC_ALLOWANCE, "-l", "warning", *WORKER_ARGS]
        env = dict(os.environ)
        if PROFILE_MEMORY:
            env["COOLANT_BENCH_MEMORY"] = str(self.memory_file)
        if PROFILE_LOOP:
            env["COOLANT_BENCH_LOOP"] = str(self.loop_file)
        if CENSUS:
            env["COOLANT_BENCH_CENSUS"] = str(self.census_file)
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
        self.spy = None
        if profile is not None:  # sampling from the start: idle and start-up samples are few next to the busy ones
            spy = os.environ.get("PY_SPY", "py-spy")
            self.spy = subprocess.Popen([spy, "record", "--format", "raw", "--rate", "200", "--nonblocking",
                                         "--output", str(profile), "--pid", str(self.proc.pid)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def metric(self, name: str) -> float:
        # a worker busy catching up on a loaded machine can take seconds to answer
        with urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=60 if PROFILE_MEMORY else 30) as r:
            text = r.read().decode()
        return sum(float(v) for v in re.findall(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M))

    def histograms(self, name: str) -> dict[str, list[tuple[float, float]]]:
        """A labelled histogram's cumulative buckets by its one label's value: [(upper bound, count), ...]."""
        with urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=30) as r:
            text = r.read().decode()
        out: dict[str, list[tuple[float, float]]] = {}
        for labels, count in re.findall(rf"^{name}_bucket{{([^}}]*)}} (\S+)$", text, re.M):
            pairs = dict(re.findall(r'([a-z_]+)="([^"]*)"', labels))
            le = float(pairs.pop("le"))
            out.setdefault(next(iter(pairs.values()), ""), []).append((le, float(count)))
        return out

    def wait_ready(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"worker exited; see {self.log}")
            try:
                with urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=1):
                    return
            except OSError:
                time.sleep(0.3)
        raise SystemExit(f"worker not ready; see {self.log}")

    def memory(self) -> tuple[float, float]:
        """(RSS, peak RSS) in MB, from /proc (Linux)."""
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        kb = {k: float(v.split()[0]) for k, v in (line.split(":", 1) for line in status.splitlines())
              if k in ("VmRSS", "VmHWM")}
        return kb["VmRSS"] / 1024, kb["VmHWM"] / 1024

    def cpu_seconds(self) -> float:
        """User + system CPU seconds the worker has used so far, from /proc (Linux)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def memory_line(self) -> str:
        rss, peak = self.memory()
        return f"worker RSS peak {peak:,.0f} MB, steady {rss:,.0f} MB" + self.heap_by_package()

    def heap_by_package(self) -> str:
        """With --memory-profile: the worker's traced heap by package, now; with --census, its heap census (else
        "")."""
        out = ""
        for on, path, name in ((PROFILE_MEMORY, self.memory_file, "tracemalloc"), (CENSUS, self.census_file,
                                                                                   "census")):
            if not on:
                continue
            path.unlink(missing_ok=True)
            Path(f"{path}.want").touch()
            deadline = time.monotonic() + 120
            while not path.exists() and time.monotonic() < deadline:
                time.sleep(0.2)
            lines = path.read_text().splitlines() if path.exists() else ["(no snapshot)"]
            out += f"; {name} " + lines[0] + "\n" + "\n".join("             " + line for line in lines[1:])
        return out

    def loop_reset(self) -> None:
        """With --loop-profile: start the worker's event-loop counts again (after start-up)."""
        if PROFILE_LOOP:
            Path(f"{self.loop_file}.reset").touch()

    def loop_report(self) -> dict[str, Any] | None:
        """With --loop-profile: the worker's event-loop steps, collections and hand-over delays since the last
        `loop_reset` (bench/worker_probes.py), else None."""
        if not PROFILE_LOOP:
            return None
        self.loop_file.unlink(missing_ok=True)
        Path(f"{self.loop_file}.want").touch()
        deadline = time.monotonic() + 60
        while not self.loop_file.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        if not self.loop_file.exists():
            return None
        report: dict[str, Any] = orjson.loads(self.loop_file.read_bytes())
        return report

    def stop(self) -> None:
        if self.spy is not None:  # py-spy writes its file once the process it samples has exited
            self.proc.send_signal(signal.SIGTERM)
            self.spy.wait(60)
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        # a run's topics (~220 partitions) go with it: a broker left with thousands ran out of file descriptors
        asyncio.run(delete_topics([self.prefix, self.prefix.rstrip(".") + "-"], {"bootstrap_servers": BOOTSTRAP}))


async def create_topic(name: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=BOOTSTRAP)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, PARTITIONS, 1)])
    finally:
        await admin.close()


async def preload(topic: str, n: int, event_rate: float) -> None:
    """`n` records whose event times are spaced as if published live at `event_rate` records/s (a catch-up of a
    backlog, e.g. after an outage): what a worker must remember for dedup scales with that rate."""
    producer = AIOKafkaProducer(bootstrap_servers=BOOTSTRAP, linger_ms=20, max_batch_size=1 << 20)
    await producer.start()
    now = time.time()
    try:
        for i in range(n):
            dep = f"dep-{i % DEPLOYMENTS}"
            await producer.send(topic, outcome(i, now - n / event_rate + i / event_rate, dep), key=dep.encode())
        await producer.flush()
    finally:
        await producer.stop()


async def floor_rate(topic: str, n: int) -> float:
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=BOOTSTRAP, group_id=None, auto_offset_reset="earliest",
                                max_poll_records=5000)
    await consumer.start()
    try:
        got, t0 = 0, None
        while got < n:
            batch = await consumer.getmany(timeout_ms=1000)
            if t0 is None and batch:
                t0 = time.perf_counter()
            got += sum(len(v) for v in batch.values())
        return n / (time.perf_counter() - (t0 or time.perf_counter()))
    finally:
        await consumer.stop()


def capacity(config: Path, workdir: Path, n: int, event_rate: float, profile: Path | None) -> tuple[float, str]:
    prefix = f"bench-cap-{uuid.uuid4().hex[:6]}."
    asyncio.run(create_topic(prefix + "outcomes"))
    asyncio.run(preload(prefix + "outcomes", n, event_rate))
    worker = Worker(config, prefix, workdir, profile)
    try:
        worker.wait_ready()
        first = last = None
        seen = 0.0
        deadline = time.monotonic() + 1800
        while seen < n and time.monotonic() < deadline:
            seen = worker.metric("coolant_records_total")
            now = time.perf_counter()
            cpu = worker.cpu_seconds()
            if seen > 0 and first is None:
                first = (now, seen, cpu)
            if first is not None:
                last = (now, seen, cpu)
            print(f"\r  capacity: {seen:,.0f}/{n:,} processed", end="", file=sys.stderr)
            time.sleep(1)
        print(file=sys.stderr)
        assert first is not None and last is not None and last[0] > first[0]
        per_cpu = (last[1] - first[1]) / max(last[2] - first[2], 1e-9)
        # records per CPU-second of the worker: steadier than the wall rate on a shared machine
        return (last[1] - first[1]) / (last[0] - first[0]), f"{per_cpu:,.0f} records per worker CPU-second; " \
            + worker.memory_line()
    finally:
        worker.stop()


async def paced(rate: float, until: float) -> AsyncIterator[int]:
    """0, 1, 2, ... at `rate` a second until `time.perf_counter()` passes `until`."""
    interval, n, t_next = 1 / rate, 0, time.perf_counter()
    while t_next < until:
        t_next += interval
        delay = t_next - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        yield n
        n += 1


async def sustain_run(worker: Worker, prefix: str, rate: float, seconds: float) -> list[dict[str, float]]:
    """Background traffic over every deployment; RSS printed (and returned) every 30 s. Each report is read in a
    thread of its own, so a slow one (a busy worker's /metrics, a --memory-profile snapshot) never holds up the
    traffic: a report still running when the next is due is skipped."""
    producer = AIOKafkaProducer(bootstrap_servers=BOOTSTRAP, linger_ms=5)
    await producer.start()
    topic = prefix + "outcomes"
    t0 = time.perf_counter()
    next_report = t0 + 30
    samples: list[dict[str, float]] = []
    reporting: asyncio.Future[None] | None = None

    def report(at: float, sent: int) -> None:
        done = worker.metric("coolant_records_total")
        rss, peak = worker.memory()
        samples.append({"s": round(at), "sent": sent, "processed": done, "rss_mb": round(rss, 1),
                        "peak_mb": round(peak, 1)})
        print(f"  sustain {at:5.0f} s: {sent:,} sent, {done:,.0f} processed, {worker.memory_line()}", file=sys.stderr)

    try:
        async for n in paced(rate, t0 + seconds):
            dep = f"dep-{n % DEPLOYMENTS}"
            await producer.send(topic, outcome(n, time.time(), dep, ok=n % 200 != 0), key=dep.encode())
            if time.perf_counter() >= next_report:
                next_report += 30
                if reporting is None or reporting.done():
                    reporting = asyncio.ensure_future(asyncio.to_thread(report, time.perf_counter() - t0, n))
        if reporting is not None:
            await reporting
    finally:
        await producer.stop()
    return samples


async def latency_run(prefix: str, rate: float, probes: int, linger_ms: int = 0) -> list[float]:
    """Probe latencies at `rate` records/s. The publisher is a plain aiokafka producer with acks=1, as
    `coolant.publish.Publisher` sends, batching for `linger_ms` (the Publisher's default is 20; 0, the lowest a
    gateway can choose, unless --publisher-linger-ms): a probe's time starts at its `send`, so its wait behind the
    produce request in flight counts, as a gateway's would."""
    producer = AIOKafkaProducer(bootstrap_servers=BOOTSTRAP, linger_ms=linger_ms, acks=1)
    redis = redis_asyncio.from_url(REDIS_URL)
    await producer.start()
    topic = prefix + "outcomes"
    latencies: list[float] = []
    pending: dict[str, float] = {}

    async def watch() -> None:
        while len(latencies) < probes:
            if pending:
                keys = list(pending)
                # keys under this run's prefix: a previous run's 60 s cooldowns must not count as seen
                values = await redis.mget([f"{prefix}deployment:{k}:cooldown" for k in keys])
                now = time.perf_counter()
                for k, v in zip(keys, values, strict=True):
                    if v is not None:
                        latencies.append(now - pending.pop(k))
            await asyncio.sleep(0.0005)

    watcher = asyncio.create_task(watch())
    try:
        probe_every = max(1, int(rate * 0.25))  # four probes a second
        probe = 0
        async for n in paced(rate, float("inf")):
            if probe >= probes:
                break
            if n % probe_every == 0:
                dep = f"p{probe}-a"
                pending[dep] = time.perf_counter()
                await producer.send(topic, outcome(n, time.time(), dep, ok=False), key=dep.encode())
                probe += 1
            else:
                dep = f"dep-{n % DEPLOYMENTS}"
                await producer.send(topic, outcome(n, time.time(), dep), key=dep.encode())
        await asyncio.wait_for(watcher, 120)
    finally:
        watcher.cancel()
        await producer.stop()
        await redis.aclose()
    return latencies


STAGES = ("fetched", "queued", "decided", "durable", "redis")
"""The worker's cooldown stages (coolant/streams/metrics.py COOLDOWN_STAGES): the first three in order, then
durable and redis side by side."""


def bucket_quantile(buckets: list[tuple[float, float]], q: float) -> float:
    """The q-quantile of a cumulative Prometheus histogram, linear within the bucket (as histogram_quantile)."""
    total = buckets[-1][1]
    rank = q * total
    lower, below = 0.0, 0.0
    for upper, count in buckets:
        if count >= rank:
            if upper == float("inf"):
                return lower
            return lower + (upper - lower) * ((rank - below) / max(count - below, 1e-9))
        lower, below = upper, count
    return lower


def loop_lines(report: dict[str, Any]) -> str:
    """--loop-profile's summary: per thread, its event-loop steps (wall and CPU) and the slowest by what ran; the
    collections; the delay of a callback handed to each loop from another thread."""
    bounds = report["bounds_ms"]
    out = []
    for name, t in report["threads"].items():
        slow = sum(n for b, n in zip(bounds, t["wall_hist"], strict=True) if float(b) > 5)
        hist = ", ".join(f"<{b} {n}" for b, n in zip(bounds, t["wall_hist"], strict=True) if n)
        cpu = ", ".join(f"<{b} {n}" for b, n in zip(bounds, t["cpu_hist"], strict=True) if n)
        out.append(f"loop       {name}: {t['steps']:,} steps, {t['cpu_s']:.1f} s CPU in steps ({t['wall_s']:.1f} s "
                   f"wall), {slow:,} of >= 5 ms wall; wall ms {hist}; CPU ms {cpu}")
        for row in t["slow"][:8]:
            out.append(f"             {row['n']:5,} x >= 5 ms, {row['wall_ms']:8.1f} ms wall / {row['cpu_ms']:8.1f} ms "
                       f"CPU  {row['what']}")
        for row in t.get("cpu", [])[:8]:
            out.append(f"             CPU {row['cpu_ms'] / 1000:6.2f} s in {row['n']:8,} steps  {row['what']}")
        for row in t["longest"][:5]:
            out.append(f"             longest {row['wall_ms']:.1f} ms wall / {row['cpu_ms']:.1f} ms CPU  {row['what']}")
    gcs = "; ".join(f"gen{g} {q}" for g, q in report["gc"].items() if q)
    out.append(f"loop       collections: {gcs or 'none'}")
    hand = "; ".join(f"{name} {q}" for name, q in report["handover_ms"].items())
    out.append(f"loop       hand-over into each loop from another thread, ms: {hand}")
    return "\n".join(out)


def stage_line(worker: Worker) -> str:
    """p50 / p99 of each of the worker's cooldown stages (from its stage histograms, bucket-interpolated)."""
    hist = worker.histograms("coolant_cooldown_stage_seconds")
    parts = []
    for stage in STAGES:
        buckets = hist.get(stage)
        if not buckets or not buckets[-1][1]:
            continue
        p50, p99 = (bucket_quantile(buckets, q) * 1000 for q in (0.5, 0.99))
        parts.append(f"{stage} {p50:.1f} / {p99:.1f}")
    script = worker.histograms("coolant_redis_write_seconds").get("cooldown")
    tail = ""
    if script and script[-1][1]:
        tail = "; of redis, the write script's own call " + " / ".join(
            f"{bucket_quantile(script, q) * 1000:.1f}" for q in (0.5, 0.99))
    return ("stages     p50 / p99 ms of the worker's cooldowns (bucket-interpolated; fetched, queued, decided in "
            "order, then durable and redis each from the decision): "
            + (", ".join(parts) or "none recorded") + tail)


PROFILE_SPOTS = (
    ("Prometheus metrics", ("prometheus_client/",)),
    ("policy core (coolant/processors)", ("coolant/processors/",)),
    ("record decode (coolant/schemas)", ("coolant/schemas/",)),
    ("path state load/flush (pathstore.py)", ("pathstore.py",)),
    ("aiokafka producer (batching, send)", ("aiokafka/producer/",)),
    ("aiokafka fetch + record parsing", ("aiokafka/consumer/", "aiokafka/record/")),
    ("Faust consumer (getmany, acks, commits)", ("faust/transport/",)),
    ("coolant shell (app.py, lane, routing)", ("coolant/streams/",)),
    ("asyncio event loop", ("asyncio/",)),
)
"""Where a worker's time goes: a sample counts for the first spot whose marks appear in its stack, leaf first."""


def profile_summary(path: Path) -> str:
    """Share of py-spy's samples per spot of PROFILE_SPOTS, and the idle share (the event loop in select)."""
    if not path.exists():
        return f"profile: {path} not written (is py-spy installed? PY_SPY names its binary)"
    spots: dict[str, int] = dict.fromkeys([name for name, _ in PROFILE_SPOTS] + ["idle (select)", "other"], 0)
    consumer_thread = 0
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        if frames[0].startswith("Thread._bootstrap"):
            consumer_thread += n
        if "select (selectors.py" in frames[-1]:  # the event loop (either thread's) waiting for the network
            spots["idle (select)"] += n
            continue
        for frame in reversed(frames):
            name = next((name for name, marks in PROFILE_SPOTS if any(m in frame for m in marks)), None)
            if name is not None:
                spots[name] += n
                break
        else:
            spots["other"] += n
    rows = [f"  {100 * n / max(total, 1):5.1f}%  {name}" for name, n in sorted(spots.items(), key=lambda x: -x[1])]
    threads = f"{100 * consumer_thread / max(total, 1):.0f}% in Faust's consumer thread (aiokafka)"
    return (f"profile    {total:,} samples of the capacity worker ({path}), by leaf-most spot; {threads}:\n"
            + "\n".join(rows))


def main() -> None:
    global DEPLOYMENTS
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=int, default=200_000)
    p.add_argument("--rate", type=float, default=2000)
    p.add_argument("--probes", type=int, default=200)
    p.add_argument("--deployments", type=int, default=DEPLOYMENTS, help="deployments in the config and traffic")
    p.add_argument("--sustain", type=float, default=0, help="seconds of --rate traffic for the memory figure")
    p.add_argument("--phases", default="floor,capacity,latency",
                   help="comma-separated phases to run (floor, capacity, latency); sustain runs with --sustain")
    p.add_argument("--profile", type=Path, help="py-spy raw folded stacks of the capacity worker to this file")
    p.add_argument("--memory-profile", action="store_true",
                   help="tracemalloc in every worker: its heap by package at the end of each phase")
    p.add_argument("--census", action="store_true",
                   help="every worker reports its RSS, glibc heap and object counts by type (and their change) "
                   "with each RSS line (bench/worker_probes.py; no tracing, a pause of a few hundred ms each)")
    p.add_argument("--loop-profile", action="store_true",
                   help="time the latency worker's event-loop steps, collections and thread hand-overs "
                   "(bench/worker_probes.py; it costs time: the latency of such a run is not the figure)")
    p.add_argument("--publisher-linger-ms", type=int, default=0,
                   help="the latency phase's publisher batching in ms (default 0, the lowest; coolant's Publisher "
                   "defaults to 20, which every record of a gateway with the default waits at most)")
    p.add_argument("--json", type=Path, help="also write the figures here (with the load average before and after)")
    p.add_argument("--worker-args", default="",
                   help="more `coolant worker` options for every worker, e.g. '--fetch-min-bytes 1' (one string)")
    a = p.parse_args()
    global PROFILE_MEMORY, PROFILE_LOOP, CENSUS, WORKER_ARGS
    WORKER_ARGS = shlex.split(a.worker_args)
    PROFILE_MEMORY = a.memory_profile
    PROFILE_LOOP = a.loop_profile
    CENSUS = a.census
    phases = {x.strip() for x in a.phases.split(",") if x.strip()}
    unknown = phases - {"floor", "capacity", "latency"}
    if unknown:
        p.error(f"--phases: unknown {', '.join(sorted(unknown))} (floor, capacity, latency)")
    DEPLOYMENTS = a.deployments
    workdir = Path(tempfile.mkdtemp(prefix="coolant-bench-"))
    config = workdir / "fleet.yaml"
    write_config(config, a.probes)

    figures: dict[str, object] = {"rate": a.rate, "deployments": DEPLOYMENTS, "load_before": os.getloadavg()}
    floor = None
    if "floor" in phases:
        floor_topic = f"bench-floor-{uuid.uuid4().hex[:6]}"
        asyncio.run(create_topic(floor_topic))
        asyncio.run(preload(floor_topic, a.records, a.rate))
        floor = asyncio.run(floor_rate(floor_topic, a.records))
        figures["floor"] = floor
        print(f"floor      {floor:>10,.0f} records/s  raw aiokafka consume, {a.records:,} records, {PARTITIONS} "
              "partitions")

    if "capacity" in phases:
        cap, memory = capacity(config, workdir, a.records, a.rate, a.profile)
        figures["capacity"] = cap
        ratio = "" if floor is None else f" ({cap / floor:.1%} of the floor)"
        print(f"capacity   {cap:>10,.0f} records/s  one worker catching up{ratio}; {DEPLOYMENTS:,} deployments; "
              f"{memory}")
        if a.profile is not None:
            print(profile_summary(a.profile))

    if "latency" in phases:
        prefix = f"bench-lat-{uuid.uuid4().hex[:6]}."
        worker = Worker(config, prefix, workdir)
        try:
            worker.wait_ready()
            time.sleep(3)  # let the consumer group settle before timing
            worker.loop_reset()
            cpu, wall = worker.cpu_seconds(), time.perf_counter()
            lat = sorted(asyncio.run(latency_run(prefix, a.rate, a.probes, a.publisher_linger_ms)))
            busy = (worker.cpu_seconds() - cpu) / (time.perf_counter() - wall)
            memory = f"worker CPU {busy:.0%} of a core; " + worker.memory_line()
            stages = stage_line(worker)
            loops = worker.loop_report()
        finally:
            worker.stop()
        q = statistics.quantiles(lat, n=100, method="inclusive")
        ms = {name: q[i] * 1000 for name, i in (("p50", 49), ("p95", 94), ("p99", 98))}
        linger = f" (publisher linger {a.publisher_linger_ms} ms)" if a.publisher_linger_ms else ""
        figures["latency_ms"] = {**ms, "max": lat[-1] * 1000, "probes": len(lat), "worker_cpu": busy}
        print(f"latency    produce -> Redis key visible at {a.rate:,.0f} records/s, {len(lat)} probes{linger}: "
              + ", ".join(f"{k} {v:.1f} ms" for k, v in ms.items()) + f", max {lat[-1] * 1000:.1f} ms; {memory}")
        print(stages)
        if loops is not None:
            print(loop_lines(loops))
            figures["loop"] = loops
    if a.sustain:
        prefix = f"bench-sus-{uuid.uuid4().hex[:6]}."
        worker = Worker(config, prefix, workdir)
        try:
            worker.wait_ready()
            samples = asyncio.run(sustain_run(worker, prefix, a.rate, a.sustain))
            time.sleep(5)  # let it drain what is in flight
            print(f"sustain    {a.rate:,.0f} records/s over {DEPLOYMENTS:,} deployments for {a.sustain:,.0f} s: "
                  f"{worker.metric('coolant_records_total'):,.0f} processed; {worker.memory_line()}")
            rss, peak = worker.memory()
            figures["sustain"] = {"seconds": a.sustain, "rss_mb": rss, "peak_mb": peak, "samples": samples}
        finally:
            worker.stop()
    figures["load_after"] = os.getloadavg()
    if a.json:
        a.json.write_text(orjson.dumps(figures, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
