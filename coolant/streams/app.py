"""The Faust app: topics, tables, agents and input lanes around the pure policy core.

Input records (outcomes, health) arrive in batches through lanes (see `lane.py`): raw bytes -> decode (dead
letter if invalid) -> each decider loads the deployment's path state -> `step_outcome`/`step_health` -> publish
the cooldown (and wait until durable); the touched states are saved once per batch, then the batch is
acknowledged. No policy decision is made here; the same functions run in `coolant replay`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import faust
import orjson
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from redis.exceptions import RedisError

from coolant.config.loader import Config
from coolant.config.runtime import KafkaSettings, resolve_secret
from coolant.io.connect import kafka_client_args, kafka_ssl_context, redis_problem
from coolant.io.materializer import EarlyWrites
from coolant.processors import Disposition, HealthState, Policy, Step, eject, step_health, step_outcome
from coolant.processors.recovery import Release
from coolant.processors.redact import redact
from coolant.schemas import Cooldown, Health, HealthTransition, InvalidRecord, Outcome, Record, decode, encode
from coolant.streams import admin_api, metrics
from coolant.streams.deadletter import ERROR_KEEP, deadletter_value
from coolant.streams.faust_adapter import (
    FetchTuning,
    keep_unacknowledged,
    partition_count,
    producer_state,
    recovery_state,
)
from coolant.streams.faust_adapter import install as install_fast_path
from coolant.streams.lane import FILL, Lane
from coolant.streams.monitor import (
    ACTIVE_INTERVAL,
    LAG_INTERVAL,
    ActiveCooldownsReporter,
    LagReporter,
    StallWatch,
    awaiting,
)
from coolant.streams.pathstore import PathStore
from coolant.streams.registry import LiveRegistry, follow
from coolant.streams.repair import CHECK_INTERVAL as REPAIR_INTERVAL
from coolant.streams.repair import Repairer
from coolant.streams.routing import Mode, PartitionCheck
from coolant.topics import Topics

log = logging.getLogger(__name__)

MAX_TS_AHEAD = 60.0
"""B6 (docs/input-bounds.md): clock skew allowed to publishers; below L1's default late_after of 180 s, so a
record accepted ahead of time never makes correct records late."""
PLAIN_WITHIN = 0.005
"""The plain path's batches: up to lane.FILL events, or what arrived within this many seconds."""

MAX_POLL_RECORDS = 1000
"""Records per fetch from the consumer (Faust's default: no limit). Unbounded, a catch-up turned every record
prefetched for every partition into message objects at once: about 70 MB of a 10,000-deployment worker's peak
RSS (bench/live_bench.py). `BROKER_MAX_POLL_RECORDS` in the environment still overrides it."""

FETCH_MAX_WAIT_MS = 1500
FETCH_MIN_BYTES = 1
"""Faust's own fetch settings, kept as the defaults: a fetch is answered at its first record, or after 1.5 s with
none. A shorter wait bounds how long a partition aiokafka left out of the fetch in flight (its earlier records not
consumed yet) waits for that fetch, for more fetches when idle (100 ms: 3.5% of a core idle, against 1.6%); it was
not made the default because one SIGTERM handover test run with it stalled in recovery (cause not found).
`--fetch-min-bytes 65536 --fetch-max-wait-ms 5` makes the broker gather records: fewer fetch round trips (Python
protocol work in Faust's consumer thread, most of a lightly loaded worker's CPU), at up to 5 ms more per record
and ~14% of a core on an idle worker (see the README's figures)."""

REDIS_CHECK_INTERVAL = 5.0
"""Seconds between the PINGs that keep /healthz's view of Redis current."""

__all__ = ["Decider", "Pipeline", "WorkerOptions", "kafka_client_args"]


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    """How this worker runs (from the CLI), as opposed to what the policy decides (the config)."""

    app_id: str = "coolant"
    partitions: int = 8
    web_port: int = 6066
    web_bind: str = "127.0.0.1"
    datadir: str = ".local/worker"
    materialize: bool = True
    admin_rate: float = admin_api.WRITE_RATE
    """Admin API writes per second (bursts of `admin_api.WRITE_BURST`); beyond it they answer 429."""
    admin_token: str | None = field(default=None, repr=False)
    """Bearer token of the admin API's writes; None turns them off. Kept out of repr so it is never logged."""
    session_timeout: float = 10.0
    """Seconds without a heartbeat before the group takes a crashed worker's partitions (Faust's default, 60 s,
    leaves half a fleet's deployments undecided for a minute). The broker accepts 6 s and more by default."""
    heartbeat_interval: float = 1.0
    """How often a member heartbeats; it also learns of a rebalance this quickly."""
    rebalance_timeout: float = 20.0
    """How long the group waits for members to rejoin a rebalance before dropping the slow ones."""
    shutdown_timeout: float = 10.0
    """On SIGTERM or a rebalance, how long to let the batches being decided (and on SIGTERM the early Redis writes)
    finish before the partitions go; below `faust_adapter.STOP_WITHIN`, the bound on the whole stop."""
    keep_raw_deadletters: bool = False
    """S2 (docs/input-bounds.md): dead letters keep the raw record unredacted."""
    max_ts_ahead: float = MAX_TS_AHEAD
    """B6: input records dated more than this many seconds ahead of this host's clock are dead-lettered."""
    misrouted: Mode = "republish"
    """What to do with an input record on the wrong partition (see `routing.py`)."""
    fetch_max_wait_ms: int = FETCH_MAX_WAIT_MS
    """How long the broker may hold a fetch while it gathers `fetch_min_bytes` (see FETCH_MAX_WAIT_MS)."""
    fetch_min_bytes: int = FETCH_MIN_BYTES
    """How much a fetch waits for (up to `fetch_max_wait_ms`) before the broker answers."""


def _faust_credentials(k: KafkaSettings) -> Any:
    if k.sasl_mechanism:
        return faust.SASLCredentials(
            username=resolve_secret(k.sasl_plain_username),
            password=resolve_secret(k.sasl_plain_password),
            mechanism=k.sasl_mechanism,
            ssl_context=kafka_ssl_context(k) if k.security_protocol == "SASL_SSL" else None,
        )
    if k.security_protocol == "SSL":
        return faust.SSLCredentials(kafka_ssl_context(k))
    return None


class Decider:
    """One policy deciding on the input topics: its registry, its state tables, where its cooldowns go.

    The enforced decider feeds the cooldowns topic (and so Redis); a shadow decider (a candidate
    policy) reads the same records into its own tables and writes only `<cooldowns>.shadow`.
    """

    def __init__(self, pipeline: Pipeline, policy: Policy, *, shadow: bool) -> None:
        self.pipeline = pipeline
        self.registry = LiveRegistry(policy)
        self.shadow = shadow
        app, names, partitions = pipeline.app, pipeline.names, pipeline.opts.partitions
        label = "shadow-" if shadow else ""
        raw: dict[str, Any] = {"key_serializer": "raw", "value_serializer": "raw"}
        self.cooldowns = app.topic(names.cooldowns + (".shadow" if shadow else ""), partitions=partitions, **raw)
        self.candidates = app.topic(names.candidates + (".shadow" if shadow else ""), partitions=partitions, **raw)
        self.records_metric = metrics.SHADOW_RECORDS if shadow else metrics.RECORDS
        self.cooldowns_metric = metrics.SHADOW_COOLDOWNS if shadow else metrics.COOLDOWNS

        def table(name: str) -> Any:
            return app.Table(label + name, partitions=partitions, key_type=bytes, value_type=bytes)  # raw bytes

        def late_after() -> float:
            return self.registry.policy.options.late_after

        self.request_store = PathStore(table("request-state"), table("request-seen"), late_after)
        self.health_store = PathStore(table("health-state"), table("health-seen"), late_after)
        self.ejection_table = table("ejections")
        self.history_table = None if shadow else table("cooldown-history")
        """Enforced only: each deployment's last cooldowns (admin API), fed from the cooldowns topic itself."""
        self._ejections: dict[str, dict[str, float]] = {}
        self._paths = asyncio.Lock()
        """RC1-RC5: held by a lane deciding while probes may change request path states (see `decide`)."""
        for store in (self.request_store, self.health_store):
            store.seen_table.on_recover(self._recovered(store))
        app.agent(self.candidates, name=label + "ejection")(self._ejection_agent)
        if self.history_table is not None:
            app.agent(self.cooldowns, name="cooldown-history")(self._history_agent)
        app.task(self._follow_registry)

    def _recovered(self, store: PathStore) -> Any:
        async def on_recover() -> None:
            store.reset()
            self._ejections.clear()
            log.info("%s: state recovered", store.state_table.name)

        return on_recover

    async def _follow_registry(self) -> None:
        p = self.pipeline
        await follow(self.registry, p.names.deployments, kafka_client_args(p.cfg.runtime.kafka))

    async def decide(
        self, topic: str, items: list[tuple[Any, Outcome | Health]], arrived: float | None = None,
        taken: float | None = None,
    ) -> None:
        """`_decide`; with recovery that probes (RC1-RC5) the health lane changes request path states too, so
        the two lanes then take turns (a flush must not meet the other lane's changes mid-way)."""
        if self.registry.policy.options.recovery is None:
            await self._decide(topic, items, arrived, taken)
            return
        async with self._paths:
            await self._decide(topic, items, arrived, taken)

    async def _decide(
        self, topic: str, items: list[tuple[Any, Outcome | Health]], arrived: float | None = None,
        taken: float | None = None,
    ) -> None:
        """Decide one batch of one input topic record by record, in order, then persist the touched states once.

        Each record's cooldown is durable before the states are saved, so a crash in between re-decides the
        record rather than losing its cooldown (at-least-once; the cooldown's event id is the same either way).
        `arrived` (its lane got the batch's first message) and `taken` (the batch was taken), epoch seconds, time
        the enforced cooldowns' stages (`metrics.COOLDOWN_STAGES`).
        """
        health = topic == self.pipeline.health.get_topic_name()
        store = self.health_store if health else self.request_store
        step_fn: Callable[..., Step] = step_health if health else step_outcome
        policy = self.registry.policy
        request = self.request_store if health and policy.options.recovery is not None else None
        dispositions: Counter[str] = Counter()
        for message, rec in items:
            dep = rec.deployment_id
            ps = store.load(dep)
            try:
                if request is not None:  # RC1-RC4: probes hold or release the request path's cooldown
                    assert isinstance(rec, Health)
                    rps = request.load(dep)
                    step = step_health(policy, ps, rec, rps)
                    request.touch(dep, rps, message.partition)
                    if step.release is not None and not self.shadow:
                        await self.pipeline.released(step.release)
                else:
                    step = step_fn(policy, ps, rec)
                if step.health is not None and not self.shadow:  # H1: health-state changes, for Redis
                    value = orjson.dumps({"deployment_id": dep, **step.health.to_dict()})
                    await self.pipeline.health_state.send(key=dep.encode(), value=value)
                    if step.transition is not None:
                        await self._publish_transition(step.transition)
                if step.cooldown is not None:
                    decided = time.time()
                    await self._publish(step)
                    if not self.shadow and not step.candidate:
                        _observe_stages(message, arrived, taken, decided)
            except Exception as exc:  # P1: a bug met by one record must not stop the partition
                await self.pipeline.record_failed(message, exc, "shadow decider" if self.shadow else "decider")
                dispositions["failed"] += 1
                continue
            dispositions[step.disposition] += 1
            store.touch(dep, ps, message.partition)
        await store.flush(self.pipeline.app.producer)
        if request is not None:
            await request.flush(self.pipeline.app.producer)
        for disposition, n in dispositions.items():
            self.records_metric.labels(topic, disposition).inc(n)

    async def _publish(self, step: Step) -> None:
        """Send a step's cooldown (a candidate to the ejection stage, X3) and wait until it is durable."""
        cd = step.cooldown
        assert cd is not None
        if step.candidate:
            fut = await self.candidates.send(key=cd.model_group.encode(), value=encode(cd))
            await fut
        else:
            await self._emit(cd, encode(cd))

    async def _emit(self, cd: Cooldown, value: bytes) -> None:
        """A cooldown to the cooldowns topic, counted; once durable, the enforced decider writes it to Redis at
        once (`EarlyWrites`), ahead of the materializer that reads it back from the topic."""
        self.cooldowns_metric.labels(cd.model_group, cd.reason).inc()
        if not self.shadow:
            metrics.cooled_down(cd)
        fut = await self.cooldowns.send(key=cd.deployment_id.encode(), value=value)
        await fut
        early = self.pipeline.early
        if early is not None and not self.shadow:
            early.submit(cd)
            # let the write go out now: otherwise it would start only once the rest of the batch is decided,
            # its states flushed and acknowledged (the batch loop does not otherwise yield to the event loop)
            await asyncio.sleep(0)

    async def _publish_transition(self, ht: HealthTransition) -> None:
        """A health flip (issue 6) on the transitions topic, durable before the state that knows of it is saved."""
        metrics.HEALTH_TRANSITIONS.labels(ht.model_group, "true" if ht.healthy else "false").inc()
        fut = await self.pipeline.transitions.send(key=ht.deployment_id.encode(), value=encode(ht))
        await fut

    async def _history_agent(self, stream: Any) -> None:
        """Each deployment's last cooldowns, whatever emitted them (policy, X3 filter, manual), for the admin API.

        Written like the path states (raw value, explicit partition: the cooldowns topic is keyed and partitioned
        as the inputs are). Invalid records are the materializer's to dead-letter.
        """
        table = self.history_table
        assert table is not None
        topic = table.changelog_topic.get_topic_name()
        async for event in stream.events():
            cd = await self.pipeline.decoded(event.message, Cooldown, dead_letter=False)
            if cd is None:
                continue
            try:
                key = cd.deployment_id.encode()
                value = admin_api.history_add(table.data.get(key), cd)
                if value is not None:
                    table.data[key] = value
                    await self.pipeline.app.producer.send(topic, key, value, event.message.partition, None, None)
            except Exception as exc:  # P1
                await self.pipeline.record_failed(event.message, exc, "cooldown history")

    async def _ejection_agent(self, stream: Any) -> None:
        """X3 over candidates keyed by model group, so one group's candidates meet in one place."""
        async for event in stream.events():
            cd = await self.pipeline.decoded(event.message, Cooldown)
            if cd is None:
                continue
            try:
                await self._eject(cd, event.value)
            except Exception as exc:  # P1
                await self.pipeline.record_failed(event.message, exc, "ejection")

    async def _eject(self, cd: Cooldown, value: bytes) -> None:
        """One candidate through X3 (the group's active ejections are cached, persisted on a pass)."""
        group = cd.model_group
        active = self._ejections.get(group)
        if active is None:
            raw = self.ejection_table.get(group.encode())
            active = self._ejections[group] = {} if raw is None else orjson.loads(raw)
        if eject(self.registry.policy, active, Step(Disposition.COOLED, cd, candidate=True)).cooldown is not None:
            await self._emit(cd, value)
            self.ejection_table[group.encode()] = orjson.dumps(active)
        else:
            metrics.SUPPRESSED.labels(group, cd.reason).inc()


class CoolantApp(faust.App):  # type: ignore[misc,unused-ignore]  # faust is untyped
    """Faust's app, with the input lanes drained before Faust stops its consumer.

    On SIGTERM Faust stops the consumer, commits what was acknowledged and leaves the group (so the partitions
    move at once, not after the session timeout); the lanes' tasks are cancelled only later. Letting the batch
    in hand finish first (decided, states saved, acknowledged) means that commit covers everything this worker
    decided: the next owner neither skips nor repeats a record. `App.on_stop` is Faust's documented hook.
    """

    before_stop: Callable[[], Awaitable[None]] | None = None

    async def on_stop(self) -> None:
        if self.before_stop is not None:
            await self.before_stop()
        await super().on_stop()


class Pipeline:
    """One worker's app: the input topics, the enforced decider, an optional shadow decider, the materializer."""

    def __init__(
        self, cfg: Config, opts: WorkerOptions, sink: Any | None = None, shadow_policy: Policy | None = None
    ) -> None:
        self.cfg = cfg
        self.opts = opts
        self.names = n = Topics(cfg.runtime.topic_prefix)
        self.sink = sink
        self.early = None if sink is None else EarlyWrites(
            sink, on_result=_early_result, on_latency=metrics.STAGE["redis"].observe
        )
        """Cooldowns written to Redis by this worker as soon as they are durable (the materializer is the backstop)."""
        k = cfg.runtime.kafka
        servers = ";".join(s.strip() for s in k.bootstrap_servers.split(","))
        self.app = app = CoolantApp(
            opts.app_id,
            broker=f"kafka://{servers}",
            broker_credentials=_faust_credentials(k),
            store="memory://",
            datadir=opts.datadir,
            topic_partitions=opts.partitions,
            topic_replication_factor=1,
            web_port=opts.web_port,
            web_bind=opts.web_bind,
            web_host=opts.web_bind,
            consumer_auto_offset_reset="earliest",
            autodiscover=False,
            stream_wait_empty=False,
            producer_acks=-1,
            producer_linger=0.001,  # let changelog writes batch, without delaying cooldowns much
            producer_max_batch_size=1 << 20,
            broker_commit_every=10_000,
            broker_max_poll_records=MAX_POLL_RECORDS,
            broker_commit_interval=2.8,
            broker_session_timeout=opts.session_timeout,
            broker_heartbeat_interval=opts.heartbeat_interval,
            broker_rebalance_timeout=opts.rebalance_timeout,
        )
        app.before_stop = self._drain
        # weak: mode keeps a class-level receiver set per signal, which would keep every Pipeline of a process
        app.on_partitions_revoked.connect(self._on_partitions_revoked, weak=True)
        app.on_partitions_assigned.connect(self._on_partitions_assigned, weak=True)
        self._revoked: int | None = None
        """The consumer generation whose partitions were revoked, until a new one is assigned: while the app is
        still in it, every message in hand is stale."""
        self._stopping = False
        self._busy = 0
        """Batches being decided now (both paths)."""
        self._idle = asyncio.Event()
        self._idle.set()
        self.lanes = {n.outcomes: Lane(), n.health: Lane()}
        self._lane_tasks: dict[str, asyncio.Task[None]] = {}
        """Each lane's task (for the stall diagnosis)."""
        self.routing = PartitionCheck(lambda topic: partition_count(app, topic), self._send_to, opts.misrouted)
        # input lanes, and the failover guards faust 0.15.3 needs; else the plain path (see faust_adapter)
        fetch = FetchTuning(opts.fetch_max_wait_ms, opts.fetch_min_bytes)
        self.plain_because = install_fast_path(app, self.lanes, fetch)
        """Why this worker runs the plain Faust path (logged once it has started), or None: the fast path."""
        self.fast = self.plain_because is None
        raw: dict[str, Any] = {"key_serializer": "raw", "value_serializer": "raw"}
        self.outcomes = app.topic(n.outcomes, partitions=opts.partitions, **raw)
        self.health = app.topic(n.health, partitions=opts.partitions, **raw)
        self.deadletter = app.topic(n.deadletter, partitions=1, **raw)
        self.health_state = app.topic(n.health_state, partitions=opts.partitions, **raw)
        self.transitions = app.topic(n.health_transitions, partitions=opts.partitions, **raw)
        self.enforced = Decider(self, cfg.policy, shadow=False)
        self.shadow = None if shadow_policy is None else Decider(self, shadow_policy, shadow=True)
        self.deciders = [self.enforced] if self.shadow is None else [self.enforced, self.shadow]
        if self.fast:
            app.topics.add(self.outcomes)  # subscribed and acknowledged as an agent's topic would be; lanes read them
            app.topics.add(self.health)
            app.task(self._drive_outcomes)
            app.task(self._drive_health)
        else:
            app.agent(self.outcomes, name="decide-outcomes")(self._plain_agent(Outcome))
            app.agent(self.health, name="decide-health")(self._plain_agent(Health))
        if sink is not None:
            app.agent(self.enforced.cooldowns, name="materialize-cooldowns")(self._materialize_cooldowns)
            app.agent(self.health_state, name="materialize-health")(self._materialize_health)
        registry = self.enforced.registry
        if sink is not None:  # LiteLLM's health map holds at most UNKNOWN_MAX ids the registry does not know
            sink.health_map.known = lambda dep: registry.policy.registry.get(dep) is not None
        # Faust's /table pages would dump the raw state tables, unauthenticated; the admin API answers instead
        app.conf.web_tables_enabled = False
        self.admin = admin_api.AdminApi(
            self.enforced, redis=None if sink is None else sink.client, key_prefix=cfg.runtime.redis.key_prefix,
            token=opts.admin_token, write_rate=opts.admin_rate,
        )
        self.admin.register()
        self.stall = StallWatch(diagnose=self.diagnosis)
        inputs = (self.outcomes.get_topic_name(), self.health.get_topic_name())
        app.timer(LAG_INTERVAL, name="consumer-lag")(LagReporter(app, self.stall.waiting, inputs).run)
        if sink is not None:
            active = ActiveCooldownsReporter(sink.client, cfg.runtime.redis.key_prefix)
            app.timer(ACTIVE_INTERVAL, name="active-cooldowns")(active.run)
            history = self.enforced.history_table
            assert history is not None
            repairer = Repairer(sink, lambda: list(history.data.values()), on_reassert=_reasserted)
            app.timer(REPAIR_INTERVAL, name="redis-repair")(repairer.tick)

        self.problems: dict[str, str] = {}
        self.redis_answered = False
        """Redis has answered this worker: a connection it closes since is a restart, not a TLS mismatch."""
        """What keeps this worker from doing its job right now (e.g. "redis": why), shown by /healthz."""
        if sink is not None:
            app.timer(REDIS_CHECK_INTERVAL, name="redis-check")(self._check_redis)

        def stalled() -> dict[str, str]:
            since = self.stall.stalled_for()
            return {} if since is None else {"stalled": f"input records wait and none was decided for {since:.0f} s"}

        @app.page("/livez")
        async def livez(web: Any, request: Any) -> Any:
            """Whether a restart would help: for a stall, which a restart ends (the next start reads from the last
            commit), not for the rest of what /healthz reports (e.g. Redis down, which a restart cannot fix)."""
            problems = stalled()
            if problems:  # an orchestrator's liveness probe restarts a worker stuck this way
                return web.json({"status": "unhealthy", "problems": problems}, status=503)
            return web.json({"status": "ok"})

        @app.page("/healthz")
        async def healthz(web: Any, request: Any) -> Any:
            body: dict[str, Any] = {"status": "ok", "deployments": len(registry.policy.registry.entries)}
            problems = {**self.problems, **stalled()}
            if problems:
                body.update(status="unhealthy", problems=problems)
                return web.json(body, status=503)
            return web.json(body)

        app.monitor = metrics.Monitor(metrics=metrics.faust_metrics())

        @app.page("/metrics")
        async def prometheus(web: Any, request: Any) -> Any:
            return web.bytes(generate_latest(metrics.REGISTRY), headers={"Content-Type": CONTENT_TYPE_LATEST})

    def diagnosis(self) -> str:
        """What a stall (or an overdue stop) log line adds: the table recovery, the producer's unacknowledged
        batches, each lane's pending messages and where its task waits."""
        lanes = "; ".join(
            f"lane {topic}: {len(lane)} pending, "
            + (awaiting(task) if (task := self._lane_tasks.get(topic)) is not None else "no task")
            for topic, lane in self.lanes.items()
        )
        return f"{recovery_state(self.app)}; {producer_state(self.app)}; {lanes}"

    async def _check_redis(self) -> None:
        """A PING, so a wrong password or certificate shows on /healthz even while no cooldown is being written."""
        assert self.sink is not None
        try:
            await self.sink.client.ping()
        except (RedisError, OSError) as exc:
            self.redis_failed(exc)
        else:
            self.problems.pop("redis", None)
            self.redis_answered = True

    def redis_failed(self, exc: BaseException) -> None:
        problem = redis_problem(exc, answered=self.redis_answered)
        if self.problems.get("redis") != problem:
            log.error("redis: %s", problem)
        self.problems["redis"] = problem

    async def _drive_outcomes(self) -> None:
        await self._drive(self.outcomes.get_topic_name(), Outcome)

    async def _drive_health(self) -> None:
        await self._drive(self.health.get_topic_name(), Health)

    async def _drive(self, topic: str, expected: type[Outcome] | type[Health]) -> None:
        """One input lane: take what is pending, decode it once, let each decider decide it, then acknowledge
        (Faust commits an offset only once every message before it is acknowledged)."""
        lane = self.lanes[topic]
        self._lane_tasks[topic] = asyncio.current_task()  # type: ignore[assignment]  # (always in a task)
        while not self._stopping:
            batch = await lane.take()
            if self._stopping:
                break  # not decided, not acknowledged: the next owner reads these from the committed offset
            if isinstance(self.app.monitor, metrics.Monitor):
                self.app.monitor.lane_took(batch)  # Faust's "stream has not started processing" check reads it
            await self._decide_batch(topic, expected, batch, arrived=lane.arrived)

    def _plain_agent(self, expected: type[Outcome] | type[Health]) -> Callable[[Any], Awaitable[None]]:
        """The plain path's input agent: Faust batches the events (`take_events`) and acknowledges each batch
        once this returns from it, so a committed offset still means decided and durable.

        A batch taken once the worker is stopping is left undecided: the agent waits there until Faust cancels
        it, which comes after Faust's last commit, so the batch's acknowledgement (Faust's, on cancel) is never
        committed and the next owner reads it. Deciding it instead would write states after this worker left the
        group, after the next owner had recovered the tables: it would count those records again."""

        async def agent(stream: Any) -> None:
            async for events in stream.take_events(FILL, within=PLAIN_WITHIN):
                if self._stopping:
                    await asyncio.get_running_loop().create_future()  # until cancelled
                messages = [event.message for event in events]
                await self._decide_batch(messages[0].topic, expected, messages, ack=False)

        return agent

    async def _decide_batch(
        self, topic: str, expected: type[Outcome] | type[Health], batch: list[Any], *, ack: bool = True,
        arrived: float | None = None,
    ) -> None:
        if not batch:
            return
        generation = self.app.consumer_generation_id
        if generation == self._revoked or batch[0].generation_id != generation or batch[-1].generation_id != generation:
            # (a batch's generations only ever go one way)
            batch, stale = self._fresh(topic, batch, generation)
            if not ack:  # the plain path: Faust's take_events acknowledges the whole batch after this
                for message in stale:
                    keep_unacknowledged(message)
            if not batch:
                return
        self._busy += 1
        self._idle.clear()
        try:
            items = []
            ahead = self.opts.max_ts_ahead
            now = taken = time.time()  # B6 is an edge check: the core never reads a clock
            tombstones = 0
            partitions = self.routing.partitions(topic)  # once per batch: a metadata lookup
            placed, here = self.routing.placed, self.routing.here
            for message in batch:
                value = message.value
                if value is None:  # B1: nothing to decide or to report
                    tombstones += 1
                    continue
                try:  # the common case without a coroutine per record; `decoded` dead-letters the others
                    rec = decode(value)
                except InvalidRecord:
                    rec = None
                if type(rec) is not expected:
                    rec = await self.decoded(message, expected)
                    if rec is None:
                        continue
                if rec.ts > now + ahead:
                    await self.dead_letter(message, _ts_in_future(rec.ts, now, ahead))
                    continue
                if placed(message, rec, partitions) or await here(message, rec, partitions):
                    items.append((message, rec))
            if tombstones:
                metrics.RECORDS.labels(topic, "tombstone").inc(tombstones)
            for decider in self.deciders:
                await decider.decide(topic, items, arrived, taken)
            if ack:
                acknowledge = self.app.consumer.ack
                for message in batch:
                    acknowledge(message)
        finally:
            self._busy -= 1
            if not self._busy:
                self._idle.set()
        self.stall.progressed()

    def _fresh(self, topic: str, batch: list[Any], generation: int) -> tuple[list[Any], list[Any]]:
        """The messages fetched in the current consumer generation, and the others (stale), which are left
        undecided and unacknowledged.

        A message fetched before a rebalance may belong to a partition another worker now owns, which reads it
        again from the committed offset; deciding it here too would emit its cooldowns twice. A partition kept is
        sought back to its commit as well, so it is read again here. This is Faust's own rule for its streams
        (which skip a message whose `generation_id` is not the app's `consumer_generation_id`), applied to the
        lanes' batches and to the plain path's `take_events` buffer, which the stream filled before the
        rebalance. While the app is still in the revoked generation, nothing is fresh."""
        if generation == self._revoked:
            fresh, stale = [], batch
        else:
            fresh = [m for m in batch if m.generation_id == generation]
            stale = [m for m in batch if m.generation_id != generation]
        if stale:
            metrics.RECORDS.labels(topic, "stale").inc(len(stale))
        return fresh, stale

    async def _on_partitions_revoked(self, app: Any, /, *args: Any, **_: Any) -> None:
        """A rebalance takes partitions away: let the batches in hand finish and their writes reach Kafka before
        the group moves on (Faust awaits this signal before the consumer rejoins).

        The next owner of a partition reads it again from the last commit (Faust commits nothing at a
        revocation) and recovers the tables from their changelogs first; only writes that are durable before
        it reads the changelogs' end offsets are in what it recovers. A batch still being decided after that
        would have its records decided again by the next owner, with a state that never saw them: the same
        cooldowns twice. Batches taken from now on hold only stale messages (`_fresh`).
        Faust's `on_partitions_revoked` signal (`args`: the revoked partitions) is its documented rebalance hook."""
        self._revoked = app.consumer_generation_id
        # the group waits `rebalance_timeout` for this member to rejoin: leave room for the flush and the join
        decided = await self._wait_idle("rebalance", min(self.opts.shutdown_timeout, self.opts.rebalance_timeout / 2))
        await app.producer.flush()
        if decided and args and args[0]:
            log.info("rebalance: batches in hand decided and flushed (%d partitions revoked)", len(args[0]))

    async def _on_partitions_assigned(self, app: Any, /, *args: Any, **_: Any) -> None:
        """The new assignment is in place (the revoked generation's fence already fell when the consumer took
        the new generation; this also ends it should a group made again reuse the number)."""
        self._revoked = None

    async def _wait_idle(self, why: str, timeout: float) -> bool:
        """Wait (up to `timeout` seconds) until no batch is being decided; False if one still was."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except TimeoutError:
            log.warning("%s: a batch was still being decided after %.0f s; its records will be decided again "
                        "by the next owner", why, timeout)
            return False
        return True

    async def _drain(self) -> None:
        """Stop taking batches and wait (up to the shutdown timeout, in all) for the ones in hand to be acknowledged
        and the early Redis writes to be done: the commit and the group's leave come after, within the worker's
        bound on a stop (`faust_adapter.STOP_WITHIN`)."""
        self._stopping = True
        until = time.monotonic() + self.opts.shutdown_timeout
        for lane in self.lanes.values():
            lane.wake()
        if await self._wait_idle("shutdown", self.opts.shutdown_timeout):
            log.info("shutdown: batches in hand decided")
        if self.early is not None:  # a cooldown decided last reaches Redis now, not at the next owner's materializer
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.early.drain(), max(0.0, until - time.monotonic()))

    async def _send_to(self, topic: str, key: bytes, value: bytes, partition: int) -> None:
        """Publish to an explicit partition and wait until durable."""
        fut = await self.app.producer.send(topic, key, value, partition, None, None)
        await fut

    async def dead_letter(self, message: Any, error: str, disposition: str = "invalid") -> None:
        """B7/S2: a bounded, redacted dead letter (raw kept only on opt-in); the log line is always redacted."""
        log.warning(
            "dead letter %s[%s]@%s: %s", message.topic, message.partition, message.offset, redact(error)[:ERROR_KEEP]
        )
        metrics.DEADLETTERS.labels(message.topic).inc()
        metrics.RECORDS.labels(message.topic, disposition).inc()
        value = deadletter_value(
            error, message.topic, message.partition, message.offset, message.value,
            keep_raw=self.opts.keep_raw_deadletters,
        )
        await self.deadletter.send(key=message.key, value=value)

    async def record_failed(self, message: Any, exc: Exception, stage: str) -> None:
        """P1: one record broke a stage (a bug); it is dead-lettered with the reason and the stage goes on."""
        problem = redact(f"{type(exc).__name__}: {exc}")[:ERROR_KEEP]  # S2: the text may quote the record
        log.error("%s failed on %s[%s]@%s: %s", stage, message.topic, message.partition, message.offset, problem)
        log.debug("%s failure", stage, exc_info=exc)  # the traceback, unredacted, only at debug level
        await self.dead_letter(message, f"processing failed in {stage}: {type(exc).__name__}: {exc}", "failed")

    async def decoded(self, message: Any, expected: type[Record], *, dead_letter: bool = True) -> Any:
        """The message's record if it is valid and of the `expected` type; else None, dead-lettered with the reason."""
        try:
            rec = decode(message.value)
        except InvalidRecord as exc:
            if dead_letter:
                await self.dead_letter(message, str(exc))
            return None
        if type(rec) is not expected:
            if dead_letter:
                problem = f"schema: expected {expected.schema} on {message.topic}, got {rec.schema}"
                await self.dead_letter(message, problem)
            return None
        return rec

    async def _materialize_cooldowns(self, stream: Any) -> None:
        """Cooldown records -> LiteLLM's Redis keys. Not acknowledged until written (retries inside)."""
        assert self.sink is not None
        async for event in stream.events():
            cd = await self.decoded(event.message, Cooldown)
            if cd is None:
                continue
            if self.early is not None and self.early.written_early(cd.event_id):
                metrics.REDIS_WRITES.labels("cooldown", "written early").inc()
                continue
            try:
                written = await self.sink.write_with_retry(cd, on_error=self._redis_error)
            except Exception as exc:  # P1: Redis refused this value (transient errors are retried inside)
                await self.record_failed(event.message, exc, "materializer")
                continue
            metrics.REDIS_WRITES.labels("cooldown", "written" if written else "skipped").inc()
            if written:
                metrics.MATERIALIZE_LAG.observe(max(0.0, time.time() - cd.ts))

    async def _materialize_health(self, stream: Any) -> None:
        assert self.sink is not None
        async for event in stream.events():
            try:
                d = orjson.loads(event.value)
                state = HealthState(d["is_healthy"], d["timestamp"], d["reason"])
                written = await self.sink.write_health_with_retry(
                    d["deployment_id"], state, on_error=self._redis_error
                )
            except Exception as exc:  # P1
                await self.record_failed(event.message, exc, "health materializer")
                continue
            metrics.REDIS_WRITES.labels("health", "written" if written else "skipped").inc()

    async def released(self, release: Release) -> None:
        """RC4: probes released a cooldown; Redis and every pod's copy follow (retried until Redis answers)."""
        metrics.RELEASES.labels(release.model_group).inc()
        if self.sink is not None:
            await self.sink.release_with_retry(release.deployment_id, release.ts, on_error=self._redis_error)

    def _redis_error(self, exc: Exception, delay: float) -> None:
        metrics.REDIS_ERRORS.inc()
        self.problems["redis"] = problem = redis_problem(exc, answered=self.redis_answered)
        log.warning("redis write failed (%s); retrying in %.1f s, record not acknowledged", problem, delay)


def _ts_in_future(ts: float, now: float, ahead: float) -> str:
    return (
        f"ts_in_future: ts {ts!r} is {ts - now:.0f} s ahead of this worker's clock (at most {ahead:g} s allowed:"
        " the publisher's clock is wrong, or ts is not epoch seconds)"
    )


def _observe_stages(message: Any, arrived: float | None, taken: float | None, decided: float) -> None:
    """One enforced cooldown's stages up to durable (`metrics.COOLDOWN_STAGES`; the early write times "redis").
    The publisher's timestamp is on its clock: a negative span (clock skew) counts as 0."""
    durable = time.time()
    stage = metrics.STAGE
    published = message.timestamp
    if taken is not None:
        if arrived is None:  # the plain path: Faust's stream hands over the batch
            stage["fetched"].observe(max(0.0, taken - published))
        else:
            stage["fetched"].observe(max(0.0, arrived - published))
            stage["queued"].observe(max(0.0, taken - max(arrived, published)))
        stage["decided"].observe(max(0.0, decided - taken))
    stage["durable"].observe(durable - decided)


def _early_result(cd: Cooldown, result: str) -> None:
    metrics.EARLY_WRITES.labels(result).inc()
    if result == "written":
        metrics.MATERIALIZE_LAG.observe(max(0.0, time.time() - cd.ts))


def _reasserted(why: str, written: int, skipped: int) -> None:
    metrics.REDIS_REASSERTED.labels(why, "written").inc(written)
    metrics.REDIS_REASSERTED.labels(why, "skipped").inc(skipped)

