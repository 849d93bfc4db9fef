"""A policy deciding on the input topics (Envoy's detector): its registry, its state tables, where its cooldowns go.

The enforced decider feeds the cooldowns topic (and so Redis); a shadow decider (a candidate policy) reads the
same records into its own tables and writes only `<cooldowns>.shadow`. Each input topic's step and state store
come from a table built once (`routes`). No policy decision is made here: `step_outcome`, `step_health` and
`eject` are the same functions `coolant replay` runs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from coolant.io.materializer import EarlyWrites
from coolant.processors import Disposition, Policy, Step, eject, step_health, step_outcome
from coolant.processors.recovery import Release
from coolant.schemas import Cooldown, Health, HealthTransition, Outcome, encode
from coolant.streams import admin_views, metrics
from coolant.streams.context import RAW, Context
from coolant.streams.faust import RawTable, sized
from coolant.streams.health_state import encode_health_state
from coolant.streams.lane import YIELD_EVERY
from coolant.streams.pathstore import PathStore
from coolant.streams.registry import LiveRegistry, follow

log = logging.getLogger(__name__)

StepFn = Callable[[Policy, Any, Any], Step]


class Decider:
    """One policy over both input topics."""

    def __init__(self, ctx: Context, policy: Policy, *, shadow: bool, early: EarlyWrites | None = None) -> None:
        self.ctx = ctx
        self.registry = LiveRegistry(policy)
        self.shadow = shadow
        self.early = None if shadow else early
        """Cooldowns written to Redis by this worker as soon as they are decided (the materializer is the backstop)."""
        app, names, partitions = ctx.app, ctx.names, ctx.opts.partitions
        label = "shadow-" if shadow else ""
        suffix = ".shadow" if shadow else ""
        self.cooldowns = app.topic(names.cooldowns + suffix, partitions=partitions, **RAW)
        self.candidates = app.topic(names.candidates + suffix, partitions=partitions, **RAW)
        self.records_metric = metrics.SHADOW_RECORDS if shadow else metrics.RECORDS
        self.cooldowns_metric = metrics.SHADOW_COOLDOWNS if shadow else metrics.COOLDOWNS

        def table(name: str) -> Any:
            return app.Table(label + name, partitions=partitions, key_type=bytes, value_type=bytes)  # raw bytes

        def late_after() -> float:
            return self.registry.policy.options.late_after

        self.request_store = PathStore(RawTable(table("request-state")), RawTable(table("request-seen")), late_after)
        self.health_store = PathStore(RawTable(table("health-state")), RawTable(table("health-seen")), late_after)
        self.routes: dict[str, tuple[StepFn, type[Outcome] | type[Health], PathStore]] = {
            names.outcomes: (step_outcome, Outcome, self.request_store),
            names.health: (step_health, Health, self.health_store),
        }
        """Each input topic's step, record type and state store."""
        self.ejection_table = table("ejections")
        self.history = None if shadow else RawTable(table("cooldown-history"))
        """Enforced only: each deployment's last cooldowns (admin API, Redis repair), fed from the cooldowns
        topic itself."""
        self._ejections: dict[str, dict[str, float]] = {}
        self._paths = asyncio.Lock()
        """RC1-RC5: held by a lane deciding while probes may change request path states (see `decide`)."""
        self.release: Callable[[Release], Awaitable[None]] | None = None
        """RC4: where a release by probes goes (the sinks: Redis and every pod's copy); None without Redis."""
        for store in (self.request_store, self.health_store):
            store.seen_table.on_recover(self._recovered(store))
        app.agent(self.candidates, name=label + "ejection")(self._ejection_agent)
        if self.history is not None:
            app.agent(self.cooldowns, name="cooldown-history")(self._history_agent)
        app.task(self._follow_registry)

    def _recovered(self, store: PathStore) -> Any:
        async def on_recover() -> None:
            store.reset()
            self._ejections.clear()
            log.info("%s: state recovered", store.state_table.name)

        return on_recover

    async def _follow_registry(self) -> None:
        await follow(self.registry, self.ctx.names.deployments, self.ctx.connections.kafka_args())

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
        step_fn, expected, store = self.routes[topic]
        policy = self.registry.policy
        request = self.request_store if expected is Health and policy.options.recovery is not None else None
        dispositions: Counter[str] = Counter()
        sent: list[tuple[Any, Any, Step | None, float]] = []
        """The batch's outputs in flight: (message, delivery future, the step if it is a cooldown, decided when)."""
        for n, (message, rec) in enumerate(items, 1):
            if not n % YIELD_EVERY:
                await asyncio.sleep(0)
            dep = rec.deployment_id
            ps = store.load(dep)
            try:
                if request is not None:  # RC1-RC4: probes hold or release the request path's cooldown
                    assert isinstance(rec, Health)
                    rps = request.load(dep)
                    step = step_health(policy, ps, rec, rps)
                    request.touch(dep, rps, message.partition)
                    if step.release is not None and not self.shadow:
                        await self._released(step.release)
                else:
                    step = step_fn(policy, ps, rec)
                if step.health is not None and not self.shadow:  # H1: health-state changes, for Redis
                    value = encode_health_state(dep, step.health)
                    await self.ctx.topics.health_state.send(key=dep.encode(), value=value)
                    if step.transition is not None:
                        sent.append((message, await self._send_transition(step.transition), None, 0.0))
                if step.cooldown is not None:
                    decided = time.time()
                    sent.append((message, await self._send(step), step, decided))
                    if not step.candidate:
                        await self._early(step.cooldown)
            except Exception as exc:  # B8: a bug met by one record must not stop the partition
                await self.ctx.deadletters.failed(message, exc, self._stage)
                dispositions[Disposition.FAILED] += 1
                continue
            dispositions[step.disposition] += 1
            store.touch(dep, ps, message.partition)
        # All of the batch's outputs went out before any is awaited: one broker round trip for the batch, where
        # awaiting each in turn cost one per cooldown and transition, and held every later record of the lane.
        failed: set[int] = set()
        for message, fut, cooled, decided in sent:
            try:
                await fut
            except Exception as exc:  # B8, as above
                if id(message) not in failed:
                    failed.add(id(message))
                    await self.ctx.deadletters.failed(message, exc, self._stage)
                    dispositions[Disposition.FAILED] += 1
                continue
            if cooled is not None and not cooled.candidate and not self.shadow:
                observe_stages(message, arrived, taken, decided)
        await store.flush(self.ctx.app.producer)
        if request is not None:
            await request.flush(self.ctx.app.producer)
        for disposition, n in dispositions.items():
            self.records_metric.labels(topic, disposition).inc(n)

    async def _released(self, release: Release) -> None:
        """RC4: probes released a cooldown; Redis and every pod's copy follow (retried until Redis answers)."""
        metrics.RELEASES.labels(release.model_group).inc()
        if self.release is not None:
            await self.release(release)

    @property
    def _stage(self) -> str:
        return "shadow decider" if self.shadow else "decider"

    async def _send(self, step: Step) -> Any:
        """Send a step's cooldown (a candidate to the ejection stage, X3); its delivery future."""
        cd = step.cooldown
        assert cd is not None
        if step.candidate:
            return await self.candidates.send(key=cd.model_group.encode(), value=encode(cd))
        return await self._send_cooldown(cd, encode(cd))

    async def _send_cooldown(self, cd: Cooldown, value: bytes) -> Any:
        """A cooldown to the cooldowns topic, counted; its delivery future."""
        self.cooldowns_metric.labels(cd.model_group, cd.reason).inc()
        if not self.shadow:
            metrics.cooled_down(cd)
        return await self.cooldowns.send(key=cd.deployment_id.encode(), value=value)

    async def _early(self, cd: Cooldown) -> None:
        """A cooldown just decided (its send to the cooldowns topic under way): the enforced decider writes it to
        Redis at once (`EarlyWrites`), ahead of the materializer that reads it back from the topic.

        Not once the send is durable: that wait (the producer's linger and a broker round trip, behind the changelog
        writes in flight; p99 18-27 ms on a quiet machine at 3,000 records/s) was on every cooldown's way to the
        routers. What the durable wait protects is the acknowledgement (a record is acknowledged only once
        its cooldown is durable), not Redis: a worker that dies before the send is durable leaves the record
        unacknowledged, and whoever decides it again decides the same cooldown (same event id), which the write
        script makes harmless. A send that fails for good (B8) dead-letters the record and leaves the cooldown in
        Redis until it ends: the policy's decision, which the topic then lacks."""
        if self.early is not None:
            self.early.submit(cd)
            # let the write go out now: otherwise it would start only at the batch's next yield (YIELD_EVERY)
            await asyncio.sleep(0)

    async def _emit(self, cd: Cooldown, value: bytes) -> None:
        """A cooldown (one the X3 stage passed) to the cooldowns topic and, at once, to Redis (`_early`); returns
        once the send is durable."""
        sending = await self._send_cooldown(cd, value)
        await self._early(cd)
        await sending

    async def _send_transition(self, ht: HealthTransition) -> Any:
        """A health flip (issue 6) on the transitions topic; durable before the state that knows of it is saved
        (the batch awaits its delivery future)."""
        metrics.HEALTH_TRANSITIONS.labels(ht.model_group, "true" if ht.healthy else "false").inc()
        return await self.ctx.topics.transitions.send(key=ht.deployment_id.encode(), value=encode(ht))

    async def _history_agent(self, stream: Any) -> None:
        """Each deployment's last cooldowns, whatever emitted them (policy, X3 filter, manual), for the admin API.

        Written like the path states (raw value, explicit partition: the cooldowns topic is keyed and partitioned
        as the inputs are). Invalid records are the materializer's to dead-letter.
        """
        history = self.history
        assert history is not None
        deadletters = self.ctx.deadletters
        async for message, cd in deadletters.records(stream, Cooldown, dead_letter=False):
            try:
                key = cd.deployment_id.encode()
                value = admin_views.history_add(history.data.get(key), cd)
                if value is not None:
                    await history.write(self.ctx.app.producer, key, value, message.partition)
            except Exception as exc:  # B8
                await deadletters.failed(message, exc, "cooldown history")

    async def _ejection_agent(self, stream: Any) -> None:
        """X3 over candidates keyed by model group, so one group's candidates meet in one place."""
        deadletters = self.ctx.deadletters
        async for message, cd in deadletters.records(stream, Cooldown):
            try:
                await self._eject(cd, message.value)
            except Exception as exc:  # B8
                await deadletters.failed(message, exc, "ejection")

    async def _eject(self, cd: Cooldown, value: bytes) -> None:
        """One candidate through X3 (the group's active ejections are cached, persisted on a pass)."""
        group = cd.model_group
        active = self._ejections.get(group)
        if active is None:
            raw = self.ejection_table.get(group.encode())
            active = self._ejections[group] = {} if raw is None else orjson.loads(raw)
        if eject(self.registry.policy, active, Step(Disposition.COOLED, cd, candidate=True)).cooldown is not None:
            await self._emit(cd, value)
            self.ejection_table[group.encode()] = sized(orjson.dumps(active))  # kept as long as the group
        else:
            metrics.SUPPRESSED.labels(group, cd.reason).inc()


def observe_stages(message: Any, arrived: float | None, taken: float | None, decided: float) -> None:
    """One enforced cooldown's stages up to durable (`metrics.COOLDOWN_STAGES`; the early write times "redis").
    The publisher's timestamp is on its clock: a negative span (clock skew) counts as 0."""
    durable = time.time()
    stage = metrics.STAGE
    published = message.timestamp
    if taken is not None:
        if arrived is None:  # Faust's agents: the stream hands over the batch
            stage["fetched"].observe(max(0.0, taken - published))
        else:
            stage["fetched"].observe(max(0.0, arrived - published))
            stage["queued"].observe(max(0.0, taken - max(arrived, published)))
        stage["decided"].observe(max(0.0, decided - taken))
    stage["durable"].observe(durable - decided)
