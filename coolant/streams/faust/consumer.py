"""Faust's consumer, bent in one place: the lanes' fetch loop, the failover guards and the fetch settings.

1. `Consumer._drain_messages`, Faust's fetch loop, is re-implemented (`LaneConsumer`) to hand outcome and health
   messages to the input lanes (`coolant/streams/lane.py`) directly: Faust's per-message delivery (conductor,
   stream queue, two tasks per message, a per-event ack) capped a worker near 7k records/s. The read-offset, gap
   and commit bookkeeping stays Faust's.
2. `resume_partitions`, `seek_to_committed` and `perform_seek` are overridden (`SeekSafeConsumer`) and
   `_thread.seek_to_beginning` called, and `app.flow_control.resume` and `.clear` are replaced
   (`guard_flow_control`): faust 0.15.3 loses records around a rebalance (docs/faust-boundary.md §2).
3. `AIOKafkaConsumerThread._create_worker_consumer` is extended (`_TunedThread`) to set the aiokafka consumer's
   `_fetch_max_wait_ms` and `_fetch_min_bytes` before it starts (`FetchTuning`): Faust fixes them at 1500 ms and
   1 byte. `Consumer._new_consumer_thread` is overridden to create it.
4. `Consumer._committed_offset` is read for the lag gauge and the stall watch (`committed_offsets`), and the
   aiokafka consumer is asked an input topic's partition count (`partition_count`): Faust has no public
   accessor for the one, and its `topic_partitions` reads a snapshot only the group leader keeps for the other.

Records seen again after the guards' seek (processed before a crash, not yet committed) are dropped by the
policy's event-id dedup: at-least-once, in order, nothing skipped.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from faust.transport import consumer as faust_consumer
from faust.transport.drivers import aiokafka as faust_aiokafka

from coolant.streams import metrics
from coolant.streams.lane import YIELD_EVERY, Lane
from coolant.topics import is_internal_topic

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class FetchTuning:
    """How long the broker may hold a fetch to gather data, and how much it waits for (aiokafka's
    `fetch_max_wait_ms` and `fetch_min_bytes`, which Faust fixes at 1500 ms and 1 byte)."""

    max_wait_ms: int
    min_bytes: int


class _TunedThread(faust_aiokafka.AIOKafkaConsumerThread):  # type: ignore[misc,unused-ignore]  # faust is untyped
    """Faust's consumer thread, its aiokafka consumer given the app's `FetchTuning` before it starts (the
    Fetcher reads them at start)."""

    def _create_worker_consumer(self, transport: Any) -> Any:
        consumer = super()._create_worker_consumer(transport)
        tuning: FetchTuning | None = getattr(self.consumer, "fetch_tuning", None)
        if tuning is not None:
            consumer._fetch_max_wait_ms = tuning.max_wait_ms
            consumer._fetch_min_bytes = tuning.min_bytes
        return consumer


class SeekSafeConsumer(faust_aiokafka.Consumer):  # type: ignore[misc,unused-ignore]  # faust is untyped
    """Resumes stream partitions only after they were sought to their committed offsets.

    Faust resumes stream partitions in exactly two places (after recovery), each followed by
    `perform_seek`; changelog partitions (recovery reads them) are resumed at once as before.
    """

    _coolant_held: set[Any] | None = None
    fetch_tuning: FetchTuning | None = None
    """Set on the app's subclass (`install`); None: Faust's fetch settings."""

    def _new_consumer_thread(self) -> Any:
        return _TunedThread(self, loop=self.loop, beacon=self.beacon)

    def resume_partitions(self, tps: Iterable[Any]) -> None:
        tps = set(tps)
        stream = {tp for tp in tps if self._is_stream_tp(tp)}
        if stream:
            self._coolant_held = (self._coolant_held or set()) | stream
            metrics.HELD_RESUMES.inc(len(stream))
        super().resume_partitions(tps - stream)

    async def seek_to_committed(self) -> Mapping[Any, int]:
        """Also rewind the stream partitions that have nothing committed (aiokafka leaves them where they are).

        Records fetched while flow was suspended for a rebalance are dropped and must be fetched again from the
        last commit; with no commit yet, that is the start of the partition (`auto_offset_reset=earliest`), not
        wherever the fetcher had got to. Records seen twice are dropped by the event-id dedup.
        """
        offsets: Mapping[Any, int] = await super().seek_to_committed()
        fresh = [tp for tp, offset in offsets.items() if not offset and self._is_stream_tp(tp)]
        if fresh:
            await self._thread.seek_to_beginning(*fresh)
        return offsets

    def _is_stream_tp(self, tp: Any) -> bool:
        """A partition of a topic the app processes: not a table changelog, not Faust's leader-election topic."""
        return not is_internal_topic(tp.topic)

    async def perform_seek(self) -> None:
        try:
            await super().perform_seek()
        finally:  # as Faust would, resume even if the seek failed
            held, self._coolant_held = self._coolant_held, None
            if held:
                super().resume_partitions(held & set(self.assignment()))


def consumer_class(lanes: Mapping[str, Lane]) -> type[SeekSafeConsumer]:
    """The app's consumer: messages of the `lanes` topics go to their lane, the others to Faust's conductor."""

    class LaneConsumer(SeekSafeConsumer):
        async def _drain_messages(self, fetcher: Any) -> None:
            """Faust's fetch loop, with the lanes' messages handed over directly.

            Faust wraps every delivery in `wait_first(callback, flow suspended)` (two tasks per message) so
            that a rebalance can abandon a delivery blocked on a full queue; a lane never blocks through a
            rebalance (clearing it makes room), so its messages skip that and are dropped while flow is
            suspended, as Faust drops them. The read-offset, gap and commit bookkeeping is Faust's.
            """
            conductor = self.callback
            getmany = self.getmany
            read_offset = self._read_offset
            acks_enabled_for = self.app.topics.acks_enabled_for
            commit_every = self._commit_every
            consumer_stopped = self._stopped.is_set
            fetcher_stopped = fetcher._stopped.is_set
            try:
                while not (consumer_stopped() or fetcher_stopped()):
                    self.diag.set_flag(faust_consumer.CONSUMER_FETCHING)
                    batch = getmany(timeout=1.0)
                    await self.sleep(0)
                    if self.should_stop:
                        continue
                    n = 0
                    async for tp, message in batch:
                        n += 1
                        if not n % YIELD_EVERY:  # a fetch of 1,000 records is not one uninterrupted hand-over
                            await asyncio.sleep(0)
                        offset = message.offset
                        r_offset = read_offset[tp]
                        if r_offset is not None and offset < r_offset:
                            continue  # read already (fetched again after a seek)
                        if r_offset and offset - r_offset > 1 and acks_enabled_for(message.topic):
                            await self._add_gap(tp, r_offset + 1, offset)
                        if commit_every is not None and self._n_acked >= commit_every:
                            self._n_acked = 0
                            await self.commit()
                        lane = lanes.get(message.topic)
                        if lane is None:
                            await self.wait_first(conductor(message), self.suspend_flow.wait())
                        elif self.flow_active:
                            await lane.put(message)
                        read_offset[tp] = offset
                    self.diag.unset_flag(faust_consumer.CONSUMER_FETCHING)
            except self.consumer_stopped_errors:
                if not self.transport.app.should_stop:
                    raise
                log.info("Broker stopped consumer, shutting down...")
            except asyncio.CancelledError:
                if not self.transport.app.should_stop:
                    raise
                log.info("Consumer shutting down for user cancel.")
            finally:
                self.diag.unset_flag(faust_consumer.CONSUMER_FETCHING)

    return LaneConsumer


def guard_flow_control(app: Any, lanes: Mapping[str, Lane]) -> None:
    """Resuming flow that is already running must not clear the queues (see the module doc); clearing them on a
    rebalance clears the lanes too."""
    flow = app.flow_control
    resume, clear = flow.resume, flow.clear

    def resume_if_suspended() -> None:
        if not flow.is_active():
            resume()

    def clear_all() -> None:
        clear()
        for lane in lanes.values():
            lane.clear()

    flow.resume = resume_if_suspended
    flow.clear = clear_all


def tuned(cls: type[SeekSafeConsumer], fetch: FetchTuning | None) -> type[SeekSafeConsumer]:
    """`cls` for one app: its fetch settings on a subclass, not on the class another app in the process shares."""
    return type(cls.__name__, (cls,), {"fetch_tuning": fetch})


def committed_offsets(consumer: Any) -> Mapping[Any, int | None] | None:
    """The consumer's committed offset per partition (as Kafka keeps them: the next offset to read); None on the
    plain path, which reads nothing private."""
    if not isinstance(consumer, SeekSafeConsumer):
        return None
    offsets: Mapping[Any, int | None] = consumer._committed_offset
    return offsets


def partition_count(app: Any, topic: str) -> int | None:
    """The topic's partition count from this member's cluster metadata (None before there is any)."""
    client = getattr(getattr(app.consumer, "_thread", None), "_consumer", None)
    parts = None if client is None else client.partitions_for_topic(topic)
    return len(parts) if parts else None
