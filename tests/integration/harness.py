"""Helpers for the live integration tests: traffic, `coolant replay`, worker subprocesses, Kafka and Redis I/O.

Everything a test waits for is polled with a deadline (`wait_for`); no fixed sleep is ever an assertion.
Each test gets its own topic prefix, app id (consumer group, changelog topics), Redis key prefix, web port
and data dir, so tests never see each other's records even on the shared broker and Redis.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import orjson
import yaml
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from prometheus_client.parser import text_string_to_metric_families

from coolant.io import admin as kafka_admin
from coolant.io.admin import ensure_topics
from coolant.streams.faust import AGENTS_NOTICE
from coolant.topics import Topics, partition_of
from tests.support.brokers import LocalKafka
from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
T0 = 1_800_000_000.0
"""Jan 2027: in the future, so the Redis writer (which skips cooldowns already over) writes every one."""

FUTURE_TRAFFIC_ALLOWANCE = "1e9"
"""The workers' --max-ts-ahead: T0 traffic is ahead of the clock (about 31 years of allowance)."""

T = TypeVar("T")

# Faust reads these from the environment and lets them override what `coolant worker` passes; a stray one in
# the test runner's environment (WEB_PORT, BROKER_URL, ...) would silently re-point the worker.
_FAUST_ENV = (
    "APP_DATADIR", "APP_TABLEDIR", "BROKER_URL", "BROKER_CONSUMER_URL", "BROKER_PRODUCER_URL", "WEB_PORT", "WEB_BIND",
    "WEB_HOST", "TOPIC_PARTITIONS", "TOPIC_REPLICATION_FACTOR", "APP_STORE", "CONSUMER_AUTO_OFFSET_RESET",
    "PROCESSING_GUARANTEE", "APP_ENV_PREFIX",
)


def uid() -> str:
    return uuid.uuid4().hex[:8]


# ---------------------------------------------------------------------------------------------------------------
# Ports





# ---------------------------------------------------------------------------------------------------------------
# Traffic: ~20 deployments in 5 groups, mostly successes, with 429 / 500 / 401 / 503 bursts and some noise.

GROUP_SIZE = 4
DEPLOYMENTS = tuple(f"dep-{i:02d}" for i in range(20))


def group_of(deployment_id: str) -> str:
    return f"grp-{int(deployment_id.split('-')[1]) // GROUP_SIZE}"


def write_config(path: Path) -> Path:
    """A LiteLLM proxy config for DEPLOYMENTS (model_info.id set); a few deployments have their own duration."""
    model_list = []
    for i, dep in enumerate(DEPLOYMENTS):
        info: dict[str, Any] = {"id": dep}
        if i % 7 == 3:
            info["cooldown_time"] = 45
        model_list.append(
            {
                "model_name": group_of(dep),
                "litellm_params": {"model": f"openai/model-{i}", "api_key": "os.environ/OPENAI_API_KEY"},
                "model_info": info,
            }
        )
    path.write_text(yaml.safe_dump({"model_list": model_list, "router_settings": {"cooldown_time": 30}}))
    return path


# (status, exception type, message, retry-after, share of the incident deployment's records that fail)
INCIDENTS = (
    (429, "RateLimitError", "litellm.RateLimitError: you exceeded your current quota, please check your plan", "20",
     0.9),
    (500, "InternalServerError", "litellm.InternalServerError: upstream returned 500 Internal Server Error", None, 0.9),
    (401, "AuthenticationError", "litellm.AuthenticationError: Incorrect API key provided: sk-...abcd", None, 1.0),
    (503, "ServiceUnavailableError", "litellm.ServiceUnavailableError: overloaded", None, 0.8),
    (None, "APIConnectionError", "litellm.APIConnectionError: connection reset by peer", None, 0.8),  # never cools
    (400, "BadRequestError", "litellm.BadRequestError: invalid request", None, 0.6),  # status exempt
)


def outcome(event_id: str, ts: float, dep: str, ok: bool = True, **fields: Any) -> bytes:
    rec: dict[str, Any] = {
        "schema": "coolant.outcome/1",
        "event_id": event_id,
        "ts": ts,
        "deployment_id": dep,
        "model_group": group_of(dep) if dep in DEPLOYMENTS else "unknown",
        "ok": ok,
    }
    rec.update(fields)
    return orjson.dumps(rec)


def fleet_traffic(n: int = 3000, seed: int = 1, t0: float = T0, tag: str = "") -> list[bytes]:
    """`n` outcome records (JSON lines, in publish order) over n/10 s of event time; deterministic per seed.

    Besides the incidents it holds what at-least-once publishers and slow pods produce: a re-published copy
    of every 101st record and, every 500th record, one reported more than `late_after` behind.
    """
    rng = random.Random(seed)
    span = n / 10.0
    incidents = []
    for k in range(20):
        start = rng.uniform(0, span - 15)
        incidents.append((rng.choice(DEPLOYMENTS), start, start + rng.uniform(4, 10), INCIDENTS[k % len(INCIDENTS)]))
    lines: list[bytes] = []
    for i in range(n):
        off = i / 10.0 + rng.random() * 0.3  # small out-of-order jitter
        active = [inc for inc in incidents if inc[1] <= off < inc[2]]
        dep = active[0][0] if active and rng.random() < 0.35 else rng.choice(DEPLOYMENTS)
        kind = next((inc[3] for inc in active if inc[0] == dep), None)
        eid = f"ev{tag}-{seed}-{i}"
        ts = round(t0 + off, 3)
        common = {"gateway": f"pod-{i % 5}", "latency_ms": round(rng.uniform(50, 1500), 1), "attempt": i % 3}
        if kind is not None and rng.random() < kind[4]:
            status, exc, msg, retry_after, _ = kind
            line = outcome(eid, ts, dep, False, status_code=status, exception_type=exc, exception_message=msg,
                           retry_after=retry_after, **common)
        else:
            line = outcome(eid, ts, dep, True, **common)
        lines.append(line)
        if i % 101 == 50:
            lines.append(line)  # the same event_id again: dropped as a duplicate
        if i % 500 == 499:
            lines.append(outcome(f"{eid}-late", round(ts - 400, 3), dep, False, status_code=429,
                                 exception_type="RateLimitError", **common))
    return lines


PROBE_FAILURES = (
    (500, "InternalServerError", "litellm.InternalServerError: upstream 500 for key sk-live-abcdefghijklmnop1234"),
    (401, "AuthenticationError", "litellm.AuthenticationError: Incorrect API key provided: sk-...abcd"),
    (None, "APIConnectionError", None),
    (429, None, "rate limited"),
)


def probe_traffic(probes: int = 12, seed: int = 1, t0: float = T0) -> list[bytes]:
    """Health probes (JSON lines, in publish order) of every deployment and of one the registry does not know:
    flapping verdicts every 10 s, and what the fleet's probers produce besides: an older verdict arriving late,
    a redelivered copy, two probers agreeing on the same ts with different verdicts."""
    rng = random.Random(seed)
    lines: list[bytes] = []

    def probe(eid: str, ts: float, dep: str, healthy: bool) -> bytes:
        rec: dict[str, Any] = {"schema": "coolant.health/1", "event_id": eid, "ts": round(ts, 3), "deployment_id": dep,
                               "model_group": group_of(dep) if dep in DEPLOYMENTS else "probed-group",
                               "healthy": healthy, "prober": f"prober-{rng.randrange(3)}", "latency_ms": 12.5}
        if not healthy:
            status, exc, msg = rng.choice(PROBE_FAILURES)
            rec.update(status_code=status, exception_type=exc, exception_message=msg)
        return orjson.dumps(rec)

    healthy = dict.fromkeys((*DEPLOYMENTS, "unregistered-dep"), True)
    for i in range(probes):
        for dep in healthy:
            if rng.random() < 0.3:
                healthy[dep] = not healthy[dep]
            ts = t0 + 10 * i + rng.random()
            line = probe(f"hp-{seed}-{dep}-{i}", ts, dep, healthy[dep])
            lines.append(line)
            roll = rng.random()
            if roll < 0.1:
                lines.append(line)  # redelivered
            elif roll < 0.2:
                lines.append(probe(f"hp-{seed}-{dep}-{i}-late", ts - 15, dep, not healthy[dep]))  # H1: too old
            elif roll < 0.3:
                healthy[dep] = not healthy[dep]
                lines.append(probe(f"hp-{seed}-{dep}-{i}-tie", ts, dep, healthy[dep]))  # a tie: the later one wins
    return lines


def sentinels(lines: list[bytes], tag: str = "end") -> list[bytes]:
    """One 401 per deployment, two minutes after the last record: each always cools its deployment (non_retryable,
    ending after any earlier cooldown), so once every sentinel's cooldown is on the topic, every record published
    before it in the same partition has been processed. A completion barrier that needs no consumer offsets."""
    last = max(orjson.loads(line)["ts"] for line in lines)
    return [outcome(f"sentinel-{tag}-{dep}", round(last + 120 + i / 100, 3), dep, False, status_code=401,
                    exception_type="AuthenticationError", exception_message="litellm.AuthenticationError: sentinel")
            for i, dep in enumerate(DEPLOYMENTS)]


async def wait_sentinels(bootstrap: str, topic: str, lines: list[bytes], timeout: float = 90.0,
                         on_timeout: Callable[[], str] | None = None) -> list[dict[str, Any]]:
    """Until the cooldowns of every sentinel among `lines` are on `topic`; returns the topic's records then."""
    want = {orjson.loads(line)["event_id"] for line in lines if b'"sentinel-' in line}
    got: list[dict[str, Any]] = []

    async def all_there() -> bool:
        nonlocal got
        try:
            got = await read_json(bootstrap, topic)
        except Exception:  # a broker coming back: poll again
            return False
        missing = want - {cd["trigger_event_id"] for cd in got}
        return not missing

    await wait_for(all_there, f"the cooldowns of {len(want)} sentinel records on {topic}", timeout, 1.0, on_timeout)
    return got


def write_jsonl(path: Path, lines: Iterable[bytes]) -> Path:
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def key_of(line: bytes) -> bytes:
    """The Kafka key a publisher uses: the deployment id (or nothing, for bytes that are not a record)."""
    try:
        d = orjson.loads(line)
    except orjson.JSONDecodeError:
        return b""
    dep = d.get("deployment_id") if isinstance(d, dict) else None
    return dep.encode() if isinstance(dep, str) else b""


# ---------------------------------------------------------------------------------------------------------------
# Replay


def run_replay(events: Path, config: Path, out: Path, transitions_out: Path | None = None) -> list[dict[str, Any]]:
    """`coolant replay EVENTS --config CONFIG --out OUT [--transitions-out FILE]` as a subprocess; the cooldown
    records it wrote (the transitions, if asked for, are in `transitions_out`: see `read_jsonl`)."""
    cmd = [sys.executable, "-m", "coolant.cli", "replay", str(events), "--config", str(config), "--out", str(out)]
    if transitions_out is not None:
        cmd += ["--transitions-out", str(transitions_out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT, check=False)
    assert proc.returncode == 0, f"coolant replay failed (rc={proc.returncode}):\n{proc.stderr[-3000:]}"
    return read_jsonl(out)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def by_id(cooldowns: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {cd["event_id"]: cd for cd in cooldowns}


def duplicates(cooldowns: Iterable[dict[str, Any]]) -> dict[str, int]:
    """event_id -> number of extra copies, for ids seen more than once."""
    seen: dict[str, int] = defaultdict(int)
    for cd in cooldowns:
        seen[cd["event_id"]] += 1
    return {k: v - 1 for k, v in seen.items() if v > 1}


def latest_per_deployment(cooldowns: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per deployment, the first cooldown (in order) with the greatest `until`: what Redis must hold, since the
    writer never replaces an entry that ends at or after the new one."""
    best: dict[str, dict[str, Any]] = {}
    for cd in cooldowns:
        cur = best.get(cd["deployment_id"])
        if cur is None or cd["until"] > cur["until"]:
            best[cd["deployment_id"]] = cd
    return best


def litellm_value(cd: dict[str, Any]) -> bytes:
    """LiteLLM's cooldown cache value for a cooldown record, as compact JSON (contract §4)."""
    ct = cd["cooldown_time"]
    value = {
        "exception_received": cd["exception_received"],
        "status_code": "500" if cd["status_code"] is None else str(cd["status_code"]),
        "timestamp": float(cd["ts"]),
        "cooldown_time": int(ct) if float(ct).is_integer() else ct,
    }
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


# ---------------------------------------------------------------------------------------------------------------
# Waiting


async def wait_for(
    check: Callable[[], Awaitable[T]], what: str, timeout: float = 60.0, interval: float = 0.5,
    on_timeout: Callable[[], str] | None = None,
) -> T:
    """Poll `check` until it returns something truthy; fail with `what` (and `on_timeout()`) after `timeout` s."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        last = await check()
        if last:
            return last
        if time.monotonic() > deadline:
            extra = on_timeout() if on_timeout is not None else ""
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})\n{extra}")
        await asyncio.sleep(interval)


# ---------------------------------------------------------------------------------------------------------------
# Kafka


async def produce(bootstrap: str, topic: str, records: Iterable[tuple[bytes | None, bytes]]) -> list[Any]:
    """Send in order (one partition per key keeps each deployment's order) and wait until all are acked."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, max_batch_size=1 << 20,
                                enable_idempotence=True)
    await producer.start()
    try:
        futs = [await producer.send(topic, key=k, value=v) for k, v in records]
        return list(await asyncio.gather(*futs))
    finally:
        await producer.stop()


async def produce_lines(bootstrap: str, topic: str, lines: Iterable[bytes]) -> list[Any]:
    return await produce(bootstrap, topic, ((key_of(line), line) for line in lines))


async def _partitions(client: AIOKafkaConsumer, topic: str) -> list[TopicPartition]:
    cluster = await client._client.fetch_all_metadata()  # fresh metadata (partitions_for_topic may be stale)
    parts = cluster.partitions_for_topic(topic)
    return [TopicPartition(topic, p) for p in sorted(parts or ())]


async def read_topic(bootstrap: str, topic: str, timeout: float = 30.0) -> list[Any]:
    """Every message of `topic` from the beginning up to its current end offsets (a fresh, group-less reader)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                auto_offset_reset="earliest")
    await consumer.start()
    try:
        tps = await _partitions(consumer, topic)
        if not tps:
            return []
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        await consumer.seek_to_beginning(*tps)
        out: list[Any] = []
        deadline = time.monotonic() + timeout
        while True:
            pending = [tp for tp in tps if await consumer.position(tp) < ends[tp]]
            if not pending:
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"could not read {topic} to its end offsets {ends} within {timeout} s")
            batches = await consumer.getmany(*pending, timeout_ms=500)
            for msgs in batches.values():
                out.extend(m for m in msgs if m.offset < ends[TopicPartition(m.topic, m.partition)])
        out.sort(key=lambda m: (m.partition, m.offset))
        return out
    finally:
        await consumer.stop()


async def read_json(bootstrap: str, topic: str) -> list[dict[str, Any]]:
    return [orjson.loads(m.value) for m in await read_topic(bootstrap, topic)]


async def group_lag(bootstrap: str, group: str, topic: str) -> int | None:
    """Records of `topic` not yet committed by consumer group `group` (None when the topic is unknown)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await consumer.start()
    await admin.start()
    try:
        tps = await _partitions(consumer, topic)
        if not tps:
            return None
        ends = await consumer.end_offsets(tps)
        committed = await admin.list_consumer_group_offsets(group, partitions=tps)
        lag = 0
        for tp in tps:
            meta = committed.get(tp)
            done = meta.offset if meta is not None and meta.offset >= 0 else 0
            lag += max(0, ends[tp] - done)
        return lag
    finally:
        await admin.close()
        await consumer.stop()


async def wait_caught_up(bootstrap: str, group: str, topic: str, timeout: float = 90.0,
                         on_timeout: Callable[[], str] | None = None) -> None:
    """Until `group` has committed every record of `topic`. Faust commits a record's offset only once its agent
    is done with it (cooldown sent and acknowledged), so afterwards the outputs of all input are durable."""

    async def caught_up() -> bool:
        try:
            return await group_lag(bootstrap, group, topic) == 0
        except Exception:  # the broker restarting, a coordinator moving: just poll again
            return False

    await wait_for(caught_up, f"consumer group {group} to commit all of {topic}", timeout, 1.0, on_timeout)


async def create_topics(bootstrap: str, prefix: str, partitions: int, timeout: float = 30.0) -> None:
    """Create the contract's topics under `prefix` exactly as `coolant worker` does. Not used by default (the
    worker creates its own topics); `Case(precreate=True)` takes the worker's topic creation out of a test.
    """
    await asyncio.wait_for(ensure_topics(Topics(prefix), {"bootstrap_servers": bootstrap}, partitions), timeout)


async def delete_topics(bootstrap: str, prefixes: Iterable[str]) -> None:
    """Best effort: drop the topics a test created (its prefix, its app id's changelogs)."""
    with contextlib.suppress(Exception):
        await kafka_admin.delete_topics(prefixes, {"bootstrap_servers": bootstrap, "request_timeout_ms": 10000})


# ---------------------------------------------------------------------------------------------------------------
# Metrics


def parse_metrics(text: str) -> list[tuple[str, dict[str, str], float]]:
    return [(s.name, dict(s.labels), s.value) for fam in text_string_to_metric_families(text) for s in fam.samples]


def metric_sum(samples: list[tuple[str, dict[str, str], float]], name: str, **labels: str) -> float:
    """Sum of the samples called `name` whose labels include `labels`."""
    return sum(v for n, lab, v in samples if n == name and all(lab.get(k) == x for k, x in labels.items()))


def _http_get(url: str, timeout: float = 5.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")
    except OSError:
        return 0, ""


# ---------------------------------------------------------------------------------------------------------------
# The worker subprocess


_RUNNING: set[Worker] = set()


@atexit.register
def _kill_leftovers() -> None:
    """A test run that dies (Ctrl-C, a timeout) must not leave workers behind: they run in their own session."""
    for w in list(_RUNNING):
        w.kill()


def _child_setup() -> None:
    """In the worker process: its own session (no terminal signals), and SIGTERM when the test process dies."""
    os.setsid()
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG (Linux)


class Worker:
    """`coolant worker` as a subprocess with its own web port, data dir and log file."""

    def __init__(
        self,
        *,
        name: str,
        config: Path,
        bootstrap: str,
        topic_prefix: str,
        app_id: str,
        workdir: Path,
        redis_url: str | None = None,
        redis_key_prefix: str = "",
        partitions: int = 2,
        env: dict[str, str] | None = None,
        loglevel: str | None = None,
        extra_args: tuple[str, ...] = (),
        image: str | None = None,
    ) -> None:
        """With `image`, the worker is that container image (`docker run --network host`, the config's directory
        mounted at /config, data inside the container) instead of this checkout's code."""
        self.name = name
        self.image = image
        self.container = f"coolant-it-{name}-{uid()}"
        self.bootstrap = bootstrap
        self.topic_prefix = topic_prefix
        self.app_id = app_id
        self.web_port = free_port()
        self.data_dir = workdir / f"data-{name}"
        self.log_path = workdir / f"worker-{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        if image is None:
            self.cmd = [sys.executable, "-m", "coolant.cli", "worker", "--config", str(config),
                        "--data-dir", str(self.data_dir)]
        else:
            # read-only root filesystem, writable /tmp and state dir: as deploy/kubernetes runs it
            self.cmd = ["docker", "run", "--rm", "--name", self.container, "--network", "host", "--read-only",
                        "--tmpfs", "/tmp", "--tmpfs", "/var/lib/coolant:uid=10001,gid=10001",
                        "-v", f"{config.parent}:/config:ro",
                        "-e", f"COOLANT_HEALTH_URL=http://127.0.0.1:{self.web_port}/healthz",
                        image, "worker", "--config", f"/config/{config.name}"]
        self.cmd += [
            "--bootstrap", bootstrap,
            "--topic-prefix", topic_prefix,
            "--app-id", app_id,
            "--web-port", str(self.web_port),
            "--partitions", str(partitions),
            "-l", loglevel or os.environ.get("COOLANT_IT_LOGLEVEL", "warning"),
            # T0 traffic is dated 2027-01, ahead of the clock on purpose (so the Redis writer writes every cooldown);
            # B6 (docs/input-bounds.md) would dead-letter it. A test that checks B6 passes its own value after this.
            "--max-ts-ahead", FUTURE_TRAFFIC_ALLOWANCE,
        ]
        if redis_url is None:
            self.cmd.append("--no-materialize")
        else:
            self.cmd += ["--redis-url", redis_url, "--redis-key-prefix", redis_key_prefix]
        self.cmd += extra_args
        self.env = {k: v for k, v in os.environ.items() if k not in _FAUST_ENV}
        self.env.update(env or {})
        self.env["PYTHONUNBUFFERED"] = "1"

    @property
    def outcomes(self) -> str:
        return self.topic_prefix + "outcomes"

    def start(self) -> Worker:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            log.write(f"$ {' '.join(self.cmd)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(self.cmd, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, preexec_fn=_child_setup)
        _RUNNING.add(self)
        return self

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return f"(no log at {self.log_path})"
        return f"--- {self.name} ({self.log_path}), last {lines} lines ---\n" + "\n".join(text[-lines:])

    def _assert_alive(self) -> None:
        if not self.alive:
            rc = None if self.proc is None else self.proc.returncode
            raise AssertionError(f"worker {self.name} exited (rc={rc})\n{self.log_tail()}")

    async def get(self, path: str) -> tuple[int, str]:
        return await asyncio.to_thread(_http_get, f"http://127.0.0.1:{self.web_port}{path}")

    async def metrics(self) -> list[tuple[str, dict[str, str], float]]:
        status, text = await self.get("/metrics")
        return parse_metrics(text) if status == 200 else []

    async def metric(self, name: str, **labels: str) -> float:
        return metric_sum(await self.metrics(), name, **labels)

    async def records_processed(self) -> float:
        """`coolant_records_total` over all dispositions for this worker's outcomes topic."""
        return await self.metric("coolant_records_total", topic=self.outcomes)

    async def wait_healthy(self, timeout: float = 90.0) -> None:
        async def healthy() -> bool:
            self._assert_alive()
            status, _ = await self.get("/healthz")
            return status == 200

        await wait_for(healthy, f"worker {self.name} /healthz", timeout, 0.3, self.log_tail)

    async def wait_ready(self, timeout: float = 90.0) -> None:
        """/healthz answers, and the outcomes consumer is assigned and processing (see `wait_assigned`)."""
        await self.wait_healthy(timeout)
        await wait_assigned([self], timeout)

    async def wait_assigned(self, timeout: float = 90.0) -> None:
        """Until this worker owns at least one outcomes partition and processes from it: probes go to every
        partition (explicitly), again each round, until this worker's counter moves."""
        await wait_assigned([self], timeout)

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (a clean Faust shutdown), SIGKILL if it lingers. Returns the exit status."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # the docker CLI passes it on to the container
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        _RUNNING.discard(self)
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL: a crash, no shutdown at all."""
        if self.image is not None:  # the docker CLI does not pass SIGKILL on: remove the container itself
            subprocess.run(["docker", "rm", "-f", self.container], capture_output=True, check=False, timeout=30)
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        _RUNNING.discard(self)


def probe_deployment(partition: int, partitions: int) -> str:
    """An unknown deployment id whose murmur2 partition is `partition` (a misrouted record is re-published)."""
    return next(d for i in range(10_000) if partition_of(d := f"probe-{partition}-{i}", partitions) == partition)


async def wait_assigned(workers: list[Worker], timeout: float = 90.0) -> None:
    """Until every worker of one group processes records from some outcomes partition (a rebalance has given each
    its share): each round sends a probe (a success for an unknown deployment, counted and never cooled) to every
    partition explicitly, and checks every worker's `coolant_records_total`."""
    bootstrap, topic = workers[0].bootstrap, workers[0].outcomes
    base = [await w.records_processed() for w in workers]
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        parts = sorted(await producer.partitions_for(topic))

        async def all_processing() -> bool:
            for w in workers:
                w._assert_alive()
            for p in parts:
                dep = probe_deployment(p, len(parts))  # on its murmur2 partition, so the worker decides it there
                await producer.send_and_wait(topic, outcome(f"probe-{uid()}", T0, dep, True),
                                             key=dep.encode(), partition=p)
            await asyncio.sleep(0.5)
            return all([await w.records_processed() > b for w, b in zip(workers, base, strict=True)])

        names = ", ".join(w.name for w in workers)
        await wait_for(all_processing, f"workers {names} to be assigned and processing", timeout, 0.5,
                       lambda: "\n".join(w.log_tail() for w in workers))
    finally:
        await producer.stop()


# ---------------------------------------------------------------------------------------------------------------
# Services of their own (so the shared ones are never stopped)


class RedisServer:
    """A throwaway redis-server on a free port, no persistence: stopping it loses everything, like a crash."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.dir = workdir / f"redis-{self.port}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.pidfile = self.dir / "redis.pid"
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 20.0) -> None:
        subprocess.run(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--save", "", "--appendonly", "no",
             "--dir", str(self.dir), "--daemonize", "yes", "--pidfile", str(self.pidfile),
             "--logfile", str(self.dir / "redis.log")],
            check=True, capture_output=True, timeout=timeout,
        )
        deadline = time.monotonic() + timeout
        while not self.ping():
            if time.monotonic() > deadline:
                raise AssertionError(f"redis-server on {self.port} did not answer PING within {timeout} s")
            time.sleep(0.1)

    def ping(self) -> bool:
        r = subprocess.run(["redis-cli", "-p", str(self.port), "ping"], capture_output=True, text=True, check=False)
        return r.stdout.strip() == "PONG"

    def stop(self, timeout: float = 20.0) -> None:
        """SHUTDOWN NOSAVE, then wait until the port no longer answers (and the pid is gone)."""
        pid = self._pid()
        subprocess.run(["redis-cli", "-p", str(self.port), "shutdown", "nosave"], capture_output=True,
                       check=False, timeout=timeout)
        deadline = time.monotonic() + timeout
        while self.ping() or (pid is not None and _pid_alive(pid)):
            if time.monotonic() > deadline:
                if pid is not None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                break
            time.sleep(0.1)

    def _pid(self) -> int | None:
        try:
            return int(self.pidfile.read_text().strip())
        except (OSError, ValueError):
            return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# ---------------------------------------------------------------------------------------------------------------
# One test's world


class Case:
    """One test's names (topic prefix, app id, Redis key prefix), config, workers and services, and their cleanup."""

    def __init__(self, tmp: Path, precreate: bool = False, intake: str | None = None) -> None:
        self.tmp = tmp
        self.intake = intake
        """`lanes` or `agents`: every worker of the case runs with that `--intake`; None: the default."""
        self.tag = uid()
        self.prefix = f"it-{self.tag}."
        self.app_id = f"it-{self.tag}-app"
        self.key_prefix = f"it-{self.tag}:"
        self.config = write_config(tmp / "litellm.yaml")
        self.precreate = precreate
        self.workers: list[Worker] = []
        self.redis_servers: list[RedisServer] = []
        self.brokers: list[LocalKafka] = []
        self.bootstraps: set[str] = set()
        self.t_start = time.monotonic()

    @property
    def outcomes(self) -> str:
        return Topics(self.prefix).outcomes

    @property
    def cooldowns(self) -> str:
        return Topics(self.prefix).cooldowns

    @property
    def deadletter(self) -> str:
        return Topics(self.prefix).deadletter

    @property
    def health(self) -> str:
        return Topics(self.prefix).health

    @property
    def transitions(self) -> str:
        return Topics(self.prefix).health_transitions

    def log(self, msg: str) -> None:
        print(f"[{time.monotonic() - self.t_start:6.1f} s] {msg}", flush=True)

    def replay(self, lines: list[bytes], name: str = "events") -> list[dict[str, Any]]:
        events = write_jsonl(self.tmp / f"{name}.jsonl", lines)
        return run_replay(events, self.config, self.tmp / f"{name}.replay.jsonl")

    def replay_transitions(self, lines: list[bytes], name: str = "events") -> list[dict[str, Any]]:
        """The health transitions `coolant replay --transitions-out` writes for `lines`."""
        events = write_jsonl(self.tmp / f"{name}.jsonl", lines)
        out = self.tmp / f"{name}.transitions.jsonl"
        run_replay(events, self.config, self.tmp / f"{name}.replay.jsonl", transitions_out=out)
        return read_jsonl(out)

    async def worker(self, name: str, bootstrap: str, *, redis_url: str | None = None, partitions: int = 2,
                     env: dict[str, str] | None = None, loglevel: str | None = None,
                     extra_args: tuple[str, ...] = (), image: str | None = None) -> Worker:
        """Start a worker (it creates its topics; with `precreate`, they exist before); not yet waited for.
        With `image`, the worker runs from that container image (see `Worker`)."""
        self.bootstraps.add(bootstrap)
        if self.precreate:
            await create_topics(bootstrap, self.prefix, partitions)
        if self.intake is not None:
            extra_args = ("--intake", self.intake, *extra_args)
        w = Worker(name=name, config=self.config, bootstrap=bootstrap, topic_prefix=self.prefix, app_id=self.app_id,
                   workdir=self.tmp, redis_url=redis_url, redis_key_prefix=self.key_prefix, partitions=partitions,
                   env=env, loglevel=loglevel, extra_args=extra_args, image=image)
        self.workers.append(w)
        w.start()
        return w

    def redis_server(self) -> RedisServer:
        server = RedisServer(self.tmp)
        self.redis_servers.append(server)
        server.start()
        return server

    def broker(self) -> LocalKafka:
        broker = LocalKafka(self.tmp)
        self.brokers.append(broker)
        broker.start()
        return broker

    def logs(self) -> str:
        return "\n".join(w.log_tail() for w in self.workers)

    def assert_intake(self) -> None:
        """Each worker ran the case's intake: with Faust's agents it says so in its log (one line at start-up)."""
        if self.intake is None:
            return
        for w in self.workers:
            agents = AGENTS_NOTICE in w.log_path.read_text(errors="replace")
            assert agents == (self.intake == "agents"), f"worker {w.name} did not run the {self.intake} intake"

    async def close(self, redis_url: str | None) -> None:
        for w in self.workers:
            rc = w.stop()
            self.log(f"worker {w.name} stopped, rc={rc}")
        print(self.logs())  # pytest shows captured output only when the test failed
        for b in self.brokers:
            print(b.log_tail())
        keep = os.environ.get("COOLANT_IT_KEEP") == "1"  # debugging: leave topics and keys for inspection
        for bootstrap in self.bootstraps:
            if not keep and all(b.bootstrap != bootstrap for b in self.brokers):
                await delete_topics(bootstrap, [self.prefix, self.app_id])
        for b in self.brokers:
            with contextlib.suppress(Exception):
                b.stop()
        for r in self.redis_servers:
            r.stop()
        if redis_url is not None and not keep:
            await delete_redis_keys(redis_url, self.key_prefix)


async def delete_redis_keys(url: str, prefix: str) -> None:
    from redis.asyncio import Redis

    client = Redis.from_url(url)
    try:
        keys = [k async for k in client.scan_iter(match=prefix + "*", count=1000)]
        if keys:
            await client.delete(*keys)
    except Exception:
        pass
    finally:
        await client.aclose()


async def redis_mismatches(url: str, key_prefix: str, expected: dict[str, dict[str, Any]],
                           absent: Iterable[str] = ()) -> list[str]:
    """What differs between Redis and `expected` (deployment -> the cooldown its keys must hold): LiteLLM's value
    byte for byte, the absolute expiry at `until` (ms, rounded up), the detail key; `absent` must have no key."""
    import math

    from redis.asyncio import Redis

    problems: list[str] = []
    client = Redis.from_url(url)
    try:
        for dep, cd in sorted(expected.items()):
            key = f"{key_prefix}deployment:{dep}:cooldown"
            raw = await client.get(key)
            if raw is None:
                problems.append(f"{key}: missing, expected {cd['event_id']} until {cd['until']}")
                continue
            want = litellm_value(cd)
            if raw != want:
                problems.append(f"{key}: {raw!r} != expected {want!r} ({cd['event_id']})")
            exp = await client.pexpiretime(key)
            if exp != math.ceil(cd["until"] * 1000):
                problems.append(f"{key}: expires at {exp} ms, expected {math.ceil(cd['until'] * 1000)}")
            detail = await client.get(f"{key_prefix}coolant:cooldown:{dep}")
            if detail is None or orjson.loads(detail) != cd:
                problems.append(f"{key_prefix}coolant:cooldown:{dep}: {detail!r} != {cd}")
        for dep in absent:
            key = f"{key_prefix}deployment:{dep}:cooldown"
            if await client.exists(key):
                problems.append(f"{key}: present ({await client.get(key)!r}) but no cooldown was emitted for {dep}")
    finally:
        await client.aclose()
    return problems


def diff_cooldowns(got: dict[str, dict[str, Any]], want: dict[str, dict[str, Any]], limit: int = 5) -> str:
    """A readable difference between two id -> cooldown maps."""
    extra = sorted(set(got) - set(want))
    missing = sorted(set(want) - set(got))
    changed = sorted(k for k in set(got) & set(want) if got[k] != want[k])
    lines = [f"{len(got)} live vs {len(want)} replay: {len(extra)} extra, {len(missing)} missing, "
             f"{len(changed)} different"]
    lines += [f"  extra   {got[k]}" for k in extra[:limit]]
    lines += [f"  missing {want[k]}" for k in missing[:limit]]
    lines += [f"  differs live {got[k]}\n          replay {want[k]}" for k in changed[:limit]]
    return "\n".join(lines)
