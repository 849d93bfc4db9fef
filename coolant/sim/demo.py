"""`coolant demo`: scenario S1 end to end on real Kafka and Redis, shown live.

Starts a worker, plays simulated gateway traffic in real time (three LiteLLM pods, two free-tier
Gemini keys drained by coding-agent bursts, a key that starts answering 401), and shows the
cooldowns appearing in Redis and expiring. The simulated routers read the same Redis keys
LiteLLM routers read, so they skip cooled keys: the loop is closed, as in production. It closes with the
outlier profile against LiteLLM alone on one incident, a lone primary failing for a minute (`incident_table`).
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from urllib.request import urlopen

import redis.asyncio as redis_asyncio
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table

from coolant.io.admin import delete_topics
from coolant.io.cooldowns import ActiveCooldown, active_cooldowns
from coolant.schemas import Cooldown, decode, encode
from coolant.sim.incident import compare
from coolant.sim.simulate import AgentLoad, Fault, s1, simulate, write_litellm_config
from coolant.topics import Topics

BROKEN_KEY = "gemini-flash-free-2"
PLAIN_INTERVAL = 5.0
"""Seconds between progress lines when the console is not a terminal."""


@dataclass
class DemoState:
    """What the screen shows; updated by the producer, the cooldown reader and the Redis poller."""

    sent: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    cooldowns: list[Cooldown] = field(default_factory=list)
    active: list[ActiveCooldown] = field(default_factory=list)
    cooled: set[str] = field(default_factory=set)
    ever_active: set[str] = field(default_factory=set)
    """Deployments seen cooled in Redis at some point: the cooldowns reached the routers."""
    phase: str = "starting"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_healthy(port: int, proc: subprocess.Popen[bytes], log: Path, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"worker exited with {proc.returncode}; log:\n{log.read_text()[-3000:]}")
        try:
            with urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"worker not healthy after {timeout:.0f} s; log:\n{log.read_text()[-3000:]}")


def _screen(state: DemoState, minutes: float) -> Group:
    head = Table.grid(padding=(0, 2))
    head.add_row(
        f"[bold]{state.phase}[/bold]",
        f"records published: {state.sent:,}",
        "  ".join(f"{k}: {v:,}" for k, v in sorted(state.statuses.items())),
    )
    active = Table(title="active cooldowns in Redis (what every LiteLLM router sees)", expand=True)
    # columns wrap (fold) when narrow, never cut an id: the two free keys differ only in their last character
    for col in ("deployment", "group", "reason", "status", "remaining s"):
        active.add_column(col, overflow="fold", min_width=len(BROKEN_KEY) if col == "deployment" else None)
    for c in state.active:
        active.add_row(c.deployment_id, c.model_group or "-", c.reason or "-", c.status_code or "-",
                       f"{c.remaining:5.1f}")
    if not state.active:
        active.add_row("-", "-", "-", "-", "-")
    feed = Table(title="coolant.cooldowns (the alert feed), newest last", expand=True)
    for col in ("start", "deployment", "reason", "status", "seconds", "window s/f"):
        feed.add_column(col, overflow="fold", min_width=len(BROKEN_KEY) if col == "deployment" else None)
    for cd in state.cooldowns[-8:]:
        feed.add_row(time.strftime("%H:%M:%S", time.gmtime(cd.ts)), cd.deployment_id, cd.reason,
                     str(cd.status_code), str(cd.cooldown_time), f"{cd.window.successes}/{cd.window.failures}")
    title = f"coolant demo: scenario S1, {minutes:g} min of gateway traffic"
    return Group(Panel(head, title=title), active, feed)


async def _produce(state: DemoState, bootstrap: str, topic: str, minutes: float, seed: int) -> None:
    """Play scenario S1 in real time; the simulated routers skip what Redis says is cooled."""
    start = time.time() + 1.0
    # busier than scenario S1's average so that a short demo sees the coding-agent bursts drain a key
    scenario = s1(agents=AgentLoad(sessions_per_minute=4.0), faults=(Fault.auth(BROKEN_KEY, 25.0, 55.0),))

    def cooled(deployment_id: str, ts: float) -> bool:
        return deployment_id in state.cooled

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await producer.start()
    try:
        for rec in simulate(scenario, start, minutes * 60, seed=seed, cooldown_aware=cooled):
            delay = rec.ts - time.time()
            if delay > 0:
                await asyncio.sleep(delay)
            await producer.send(topic, encode(rec), key=rec.deployment_id.encode())
            state.sent += 1
            state.statuses["ok" if rec.ok else str(rec.status_code)] += 1
        await producer.flush()
    finally:
        await producer.stop()


async def _follow_cooldowns(state: DemoState, bootstrap: str, topic: str) -> None:
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest")
    await consumer.start()
    try:
        async for msg in consumer:
            cd = decode(msg.value or b"")
            if isinstance(cd, Cooldown):
                state.cooldowns.append(cd)
    finally:
        await consumer.stop()


async def _poll_redis(state: DemoState, redis: redis_asyncio.Redis, key_prefix: str) -> None:
    while True:
        state.active = await active_cooldowns(redis, key_prefix)
        state.cooled = {c.deployment_id for c in state.active}
        state.ever_active |= state.cooled
        await asyncio.sleep(0.25)


def _progress_line(state: DemoState, elapsed: float) -> str:
    """The screen in one line, for a console that is not a terminal (a log, CI): printed every few seconds."""
    statuses = ", ".join(f"{k}: {v:,}" for k, v in sorted(state.statuses.items())) or "none yet"
    return (f"[{elapsed:5.0f} s] {state.phase}: {state.sent:,} records published ({statuses}); "
            f"{len(state.cooldowns)} cooldowns emitted, {len(state.active)} active in Redis")


class _View:
    """The live screen on a terminal; elsewhere a progress line every PLAIN_INTERVAL s and one final frame."""

    def __init__(self, console: Console, state: DemoState, minutes: float) -> None:
        self.console, self.state, self.minutes = console, state, minutes
        self.live = Live(_screen(state, minutes), console=console, refresh_per_second=4) if console.is_terminal \
            else None
        self.t0 = self.last = time.monotonic()

    def __enter__(self) -> _View:
        if self.live is not None:
            self.live.__enter__()
        return self

    def update(self) -> None:
        if self.live is not None:
            self.live.update(_screen(self.state, self.minutes))
        elif time.monotonic() - self.last >= PLAIN_INTERVAL:
            self.last = time.monotonic()
            self.console.print(_progress_line(self.state, self.last - self.t0), highlight=False, markup=False)

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.update(_screen(self.state, self.minutes))
            self.live.__exit__(None, None, None)
        else:
            self.console.print(_screen(self.state, self.minutes))


async def _run(console: Console, bootstrap: str, redis_url: str, key_prefix: str, topics: Topics, minutes: float,
               seed: int, worker: subprocess.Popen[bytes]) -> DemoState:
    state = DemoState(phase="playing traffic")
    redis = redis_asyncio.from_url(redis_url)
    tasks = [
        asyncio.create_task(_follow_cooldowns(state, bootstrap, topics.cooldowns)),
        asyncio.create_task(_poll_redis(state, redis, key_prefix)),
    ]
    try:
        with _View(console, state, minutes) as view:
            play = asyncio.create_task(_produce(state, bootstrap, topics.outcomes, minutes, seed))
            while not play.done():
                view.update()
                await asyncio.sleep(0.25)
            await play
            state.phase = "traffic over: waiting for the cooldowns to expire"
            deadline = time.monotonic() + 90
            while state.active and time.monotonic() < deadline and worker.poll() is None:
                view.update()
                await asyncio.sleep(0.25)
            state.phase = "done"
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await redis.aclose()
    return state


def incident_table() -> Table:
    """The outlier profile against LiteLLM alone on one incident (`coolant.sim.incident`, simulated)."""
    table = Table(title="The same incident three ways: a lone primary with a fallback group fails (500s) for 60 s "
                        "(simulated, 15 requests/min, num_retries 2)", title_justify="left")
    for column in ("decider", "primary attempts in the outage", "requests failed", "back on the primary after "
                   "the heal", "probes"):
        table.add_column(column, justify="left" if column == "decider" else "right")
    for row in compare():
        back = "never" if row.back_on_primary_s is None else f"{row.back_on_primary_s:.1f} s"
        table.add_row(row.decider, str(row.primary_attempts_in_outage), f"{row.failed} of {row.requests}", back,
                      str(row.probes))
    return table


def _drop_topics(console: Console, bootstrap: str, prefixes: list[str]) -> None:
    """The run's topics and its worker's changelogs go with it (each run makes its own)."""
    try:
        asyncio.run(delete_topics(prefixes, {"bootstrap_servers": bootstrap}))
    except Exception as exc:  # the demo's result stands; say what is left behind
        console.print(f"[yellow]could not delete the demo's topics ({', '.join(prefixes)}*): {exc}[/yellow]",
                      highlight=False)


def run_demo(console: Console, bootstrap: str, redis_url: str, minutes: float = 2.0, seed: int = 1) -> int:
    """Returns the exit status: 0 when cooldowns were emitted, written to Redis and expired.

    Everything is the run's own: topics, consumer group and Redis keys (`demo-<id>:` prefix, as a LiteLLM
    RedisCache namespace), so cooldowns of another worker on the same Redis never show up here; the working
    directory (config, worker log, state) and the topics are removed at the end, the worker log's tail printed
    if it failed.
    """
    run_id = uuid.uuid4().hex[:8]
    topics = Topics(f"demo-{run_id}.")
    key_prefix = f"demo-{run_id}:"
    with tempfile.TemporaryDirectory(prefix="coolant-demo-") as tmp:
        workdir = Path(tmp)
        config = workdir / "litellm.yaml"
        write_litellm_config(s1(), config)  # scenario S1's own router settings: allowed_fails 1, cooldown_time 60
        port = _free_port()
        log = workdir / "worker.log"
        cmd = [sys.executable, "-m", "coolant.cli", "worker", "--config", str(config), "--bootstrap", bootstrap,
               "--redis-url", redis_url, "--redis-key-prefix", key_prefix, "--topic-prefix", topics.prefix,
               "--app-id", f"demo-{run_id}", "--web-port", str(port), "--data-dir", str(workdir / "data"),
               "--partitions", "4", "-l", "warning"]
        console.print(f"[bold]coolant demo[/bold]: topics {topics.prefix}*, Redis keys {key_prefix}*, "
                      f"{minutes:g} min of traffic", highlight=False)
        state = DemoState()
        with log.open("wb") as out:
            worker = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=os.environ.copy())
        try:
            _wait_healthy(port, worker, log)
            state = asyncio.run(_run(console, bootstrap, redis_url, key_prefix, topics, minutes, seed, worker))
        finally:
            worker.send_signal(signal.SIGTERM)
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
            _drop_topics(console, bootstrap, [topics.prefix, f"demo-{run_id}-"])
        reasons = Counter(cd.reason for cd in state.cooldowns)
        console.line()
        console.print(
            f"published {state.sent:,} outcome records; {len(state.cooldowns)} cooldowns "
            f"({', '.join(f'{r}: {n}' for r, n in reasons.most_common()) or 'none'}); "
            f"{len(state.ever_active)} deployments cooled in Redis, {len(state.active)} still cooled at the end",
            highlight=False,
        )
        problems = [
            *(["no cooldown was emitted"] if not state.cooldowns else []),
            *(["no cooldown reached Redis"] if state.cooldowns and not state.ever_active else []),
            *([f"{len(state.active)} cooldowns had not expired 90 s after the traffic"] if state.active else []),
        ]
        console.line()
        console.print(incident_table())
        if problems:
            tail = log.read_text(errors="replace").splitlines()[-20:]
            console.print(f"[red]demo did not complete as expected[/red]: {'; '.join(problems)}", highlight=False)
            console.print("worker log (last lines):\n" + ("\n".join(tail) or "(empty)"), highlight=False,
                          markup=False)
        return 1 if problems else 0
