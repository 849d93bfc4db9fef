"""The worker subprocess and one test's world (a pytest plugin, registered in tests/conftest.py): `Worker` runs
`coolant worker` as a user does, `Case` gives each test its own topic prefix, app id (consumer group, changelog
topics), Redis key prefix, web port and data dir, so tests never see each other's records even on the shared broker
and Redis; the `case` fixture cleans it up after. Everything a test waits for is polled with a deadline
(`wait_for`); no fixed sleep is ever an assertion."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from prometheus_client.parser import text_string_to_metric_families

from coolant.topics import Topics, partition_of
from tests.support.brokers import LocalKafka
from tests.support.kafka import create_topics, delete_topics
from tests.support.ports import free_port
from tests.support.records import (
    FUTURE_TRAFFIC_ALLOWANCE,
    ROOT,
    T0,
    outcome,
    read_jsonl,
    run_replay,
    uid,
    write_config,
    write_jsonl,
)
from tests.support.redis import RedisServer, delete_redis_keys
from tests.support.waiting import wait_for

# Faust reads these from the environment and lets them override what `coolant worker` passes; a stray one in
# the test runner's environment (WEB_PORT, BROKER_URL, ...) would silently re-point the worker.
_FAUST_ENV = (
    "APP_DATADIR", "APP_TABLEDIR", "BROKER_URL", "BROKER_CONSUMER_URL", "BROKER_PRODUCER_URL", "WEB_PORT", "WEB_BIND",
    "WEB_HOST", "TOPIC_PARTITIONS", "TOPIC_REPLICATION_FACTOR", "APP_STORE", "CONSUMER_AUTO_OFFSET_RESET",
    "PROCESSING_GUARANTEE", "APP_ENV_PREFIX",
)


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
        from coolant.streams.faust import AGENTS_NOTICE  # Faust's import: not in every process that loads this plugin

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


@pytest.fixture
async def case(tmp_path: Path, redis_url: str) -> AsyncIterator[Case]:
    """One live-pipeline test's own topics, workers and services, cleaned up after."""
    c = Case(tmp_path)
    try:
        yield c
    finally:
        await c.close(redis_url)
