"""A Faust consumer that never skips records around a seek: the fix for worker failover losing records.

faust-streaming 0.15.3 loses a range of a partition when a worker takes it over (seen in
`test_worker_failover`: a survivor skipped hundreds of records of the dead worker's partitions):

1. After recovery it resumes the stream partitions, then seeks them to the committed offsets, then
   resumes flow control. Records fetched in between are delivered to the agents' queues, and the
   flow-control resume *clears those queues* although flow was already running, so the records
   are dropped after Faust has counted them as read.
2. The rest of a batch fetched before the seek is still delivered after it. That pushes the
   partition's read offset back up, so the records re-fetched from the committed offset are dropped
   as "already read", and the jump in offsets is recorded as a gap that gets committed.

Both are closed here, at the edge, without changing Faust:
- `SeekSafeConsumer` holds back the resume of stream (non-changelog) partitions until the seek that
  follows it has completed, so nothing is fetched from a position that is about to change.
- After that seek, stream partitions with nothing committed yet are rewound to their start, where
  aiokafka would leave them wherever the fetcher had got to (past records dropped during the rebalance).
- `guard_flow_control` makes a resume of already-running flow a no-op. A resume after a
  real suspension (a rebalance revokes partitions) still clears the queues, as Faust intends.
Records seen again after the seek (processed before the crash, not yet committed) are dropped by the
policy's event-id dedup: at-least-once, in order, nothing skipped.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from faust.transport import consumer as faust_consumer
from faust.transport.drivers import aiokafka as faust_aiokafka

from coolant.streams import metrics
from coolant.streams.lane import Lane

log = logging.getLogger(__name__)

INTERNAL_SUFFIXES = ("-changelog", "__assignor-__leader")
"""Faust's own topics: table changelogs (recovery, standbys) and the leader-election topic."""


def is_internal_topic(topic: str) -> bool:
    """Faust's own topic, not one the app processes: nothing commits it, no lane reads it."""
    return topic.endswith(INTERNAL_SUFFIXES)


class SeekSafeConsumer(faust_aiokafka.Consumer):  # type: ignore[misc,unused-ignore]  # faust is untyped
    """Resumes stream partitions only after they were sought to their committed offsets.

    Faust resumes stream partitions in exactly two places (after recovery), each followed by
    `perform_seek`; changelog partitions (recovery reads them) are resumed at once as before.
    """

    _coolant_held: set[Any] | None = None

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
                    async for tp, message in batch:
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


def install(app: Any, lanes: Mapping[str, Lane]) -> None:
    """Use the guarded, lane-routing consumer and flow control for this app (before it starts)."""
    app.transport.Consumer = consumer_class(lanes)
    guard_flow_control(app, lanes)
