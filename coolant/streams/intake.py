"""The intake (Envoy's monitor): input messages in, checked, handed to every decider in batches, acknowledged.

Per batch: the fence drops stale messages; each message is decoded once (dead letter if invalid or of the wrong
type for its topic), dated no further ahead than B6 allows, and checked for its partition (`routing.py`); every
decider decides the batch; then it is acknowledged (Faust commits an offset only once every message before it is
acknowledged, so a committed offset means decided and durable).

Two ways in, chosen by `--intake`: the lanes (the boundary's fetch loop hands messages to a `Lane` per topic and
one task per lane takes what is pending) or Faust's agents over `take_events` batches (Faust acknowledges each
batch once the agent returns from it).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from coolant.processors import Disposition
from coolant.schemas import Health, InvalidRecord, Outcome, decode
from coolant.streams import metrics
from coolant.streams.context import Context
from coolant.streams.decider import Decider
from coolant.streams.faust import keep_unacknowledged, partition_count
from coolant.streams.fence import Fence
from coolant.streams.lane import FILL, YIELD_EVERY, Lane
from coolant.streams.monitor import StallWatch, awaiting
from coolant.streams.routing import PartitionCheck

AGENTS_WITHIN = 0.005
"""The agents' batches: up to lane.FILL events, or what arrived within this many seconds."""


class Intake:
    """Both input topics into the deciders, on either way in."""

    def __init__(self, ctx: Context, fence: Fence, deciders: Sequence[Decider], stall: StallWatch) -> None:
        self.ctx = ctx
        self.fence = fence
        self.deciders = deciders
        self.stall = stall
        names = ctx.names
        self.expected: dict[str, type[Outcome] | type[Health]] = {names.outcomes: Outcome, names.health: Health}
        """Each input topic's record type (built once: a batch's type is a lookup, not a name compare)."""
        self.lanes = {topic: Lane() for topic in self.expected}
        self._tasks: dict[str, asyncio.Task[Any]] = {}
        """Each lane's task (for the stall diagnosis)."""
        self.routing = PartitionCheck(lambda topic: partition_count(ctx.app, topic), self._send_to, ctx.opts.misrouted)

    def start(self, use_lanes: bool) -> None:
        """Subscribe to the input topics: a task per lane, or an agent per topic."""
        app, topics = self.ctx.app, self.ctx.topics
        if use_lanes:
            for topic in (topics.outcomes, topics.health):
                app.topics.add(topic)  # subscribed and acknowledged as an agent's topic would be; lanes read them
                app.task(self._driver(topic.get_topic_name()))
        else:
            app.agent(topics.outcomes, name="decide-outcomes")(self._agent)
            app.agent(topics.health, name="decide-health")(self._agent)

    def _driver(self, topic: str) -> Callable[[], Awaitable[None]]:
        async def drive() -> None:
            await self.drive(topic)

        return drive

    async def drive(self, topic: str) -> None:
        """One input lane: take what is pending, decide it, acknowledge it, until the worker stops."""
        lane = self.lanes[topic]
        task = asyncio.current_task()
        if task is not None:
            self._tasks[topic] = task
        fence = self.fence
        while not fence.stopping:
            batch = await lane.take()
            if fence.stopping:
                break  # not decided, not acknowledged: the next owner reads these from the committed offset
            if isinstance(self.ctx.app.monitor, metrics.Monitor):
                self.ctx.app.monitor.lane_took(batch)  # Faust's "stream has not started processing" check reads it
            await self.decide_batch(topic, batch, arrived=lane.arrived)

    async def _agent(self, stream: Any) -> None:
        """Faust's agents' way in: Faust batches the events (`take_events`) and acknowledges each batch once this
        returns from it, so a committed offset still means decided and durable.

        A batch taken once the worker is stopping is left undecided: the agent waits there until Faust cancels
        it, which comes after Faust's last commit, so the batch's acknowledgement (Faust's, on cancel) is never
        committed and the next owner reads it. Deciding it instead would write states after this worker left the
        group, after the next owner had recovered the tables: it would count those records again."""
        async for events in stream.take_events(FILL, within=AGENTS_WITHIN):
            if self.fence.stopping:
                await asyncio.get_running_loop().create_future()  # until cancelled
            messages = [event.message for event in events]
            await self.decide_batch(messages[0].topic, messages, ack=False)

    async def decide_batch(
        self, topic: str, batch: list[Any], *, ack: bool = True, arrived: float | None = None,
    ) -> None:
        if not batch:
            return
        batch, stale = self.fence.split(topic, batch)
        if stale and not ack:  # Faust's take_events acknowledges the whole batch after this
            for message in stale:
                keep_unacknowledged(message)
        if not batch:
            return
        with self.fence.deciding():
            items, taken = await self._checked(topic, batch)
            for decider in self.deciders:
                await decider.decide(topic, items, arrived, taken)
            if ack:
                acknowledge = self.ctx.app.consumer.ack
                for n, message in enumerate(batch, 1):
                    acknowledge(message)
                    if not n % YIELD_EVERY:
                        await asyncio.sleep(0)
        self.stall.progressed()

    async def _checked(self, topic: str, batch: list[Any]) -> tuple[list[tuple[Any, Outcome | Health]], float]:
        """The batch's records to decide (B1 tombstones counted, invalid ones and B6 dead-lettered, misrouted ones
        re-published), and when it was taken (epoch seconds)."""
        expected = self.expected[topic]
        items = []
        ahead = self.ctx.opts.max_ts_ahead
        now = taken = time.time()  # B6 is an edge check: the core never reads a clock
        tombstones = 0
        partitions = self.routing.partitions(topic)  # once per batch: a metadata lookup
        placed, here = self.routing.placed, self.routing.here
        deadletters = self.ctx.deadletters
        for n, message in enumerate(batch, 1):
            if not n % YIELD_EVERY:
                await asyncio.sleep(0)
            value = message.value
            if value is None:  # B1: nothing to decide or to report
                tombstones += 1
                continue
            rec: Any
            try:  # the common case without a coroutine per record; `decoded` dead-letters the others
                rec = decode(value)
            except InvalidRecord:
                rec = None
            if type(rec) is not expected:
                rec = await deadletters.decoded(message, expected)
                if rec is None:
                    continue
            if rec.ts > now + ahead:
                await deadletters.send(message, ts_in_future(rec.ts, now, ahead))
                continue
            if placed(message, rec, partitions) or await here(message, rec, partitions):
                items.append((message, rec))
        if tombstones:
            metrics.RECORDS.labels(topic, Disposition.TOMBSTONE).inc(tombstones)
        return items, taken

    async def _send_to(self, topic: str, key: bytes, value: bytes, partition: int) -> None:
        """Publish to an explicit partition and wait until durable (a misrouted record's copy)."""
        fut = await self.ctx.app.producer.send(topic, key, value, partition, None, None)
        await fut

    def lanes_state(self) -> str:
        """Each lane's pending messages and where its task waits, for the stall log line."""
        return "; ".join(
            f"lane {topic}: {len(lane)} pending, "
            + (awaiting(task) if (task := self._tasks.get(topic)) is not None else "no task")
            for topic, lane in self.lanes.items()
        )

    def wake(self) -> None:
        """Let every lane's waiting `take` return: the worker is stopping."""
        for lane in self.lanes.values():
            lane.wake()


def ts_in_future(ts: float, now: float, ahead: float) -> str:
    return (
        f"ts_in_future: ts {ts!r} is {ts - now:.0f} s ahead of this worker's clock (at most {ahead:g} s allowed:"
        " the publisher's clock is wrong, or ts is not epoch seconds)"
    )
