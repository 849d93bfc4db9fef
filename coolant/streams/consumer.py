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
- `keep_queues_on_redundant_resume` makes a resume of already-running flow a no-op. A resume after a
  real suspension (a rebalance revokes partitions) still clears the queues, as Faust intends.
Records seen again after the seek (processed before the crash, not yet committed) are dropped by the
policy's event-id dedup: at-least-once, in order, nothing skipped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from faust.transport.drivers import aiokafka as faust_aiokafka

from coolant.streams import metrics
from coolant.streams.lane import Lane


class SeekSafeConsumer(faust_aiokafka.Consumer):  # type: ignore[misc,unused-ignore]  # faust is untyped
    """Resumes stream partitions only after they were sought to their committed offsets.

    Faust resumes stream partitions in exactly two places (after recovery), each followed by
    `perform_seek`; changelog partitions (recovery reads them) are resumed at once as before.
    """

    _coolant_held: set[Any] | None = None

    def resume_partitions(self, tps: Iterable[Any]) -> None:
        tps = set(tps)
        stream = {tp for tp in tps if not self._is_changelog_tp(tp)}
        if stream:
            self._coolant_held = (self._coolant_held or set()) | stream
            metrics.HELD_RESUMES.inc(len(stream))
        super().resume_partitions(tps - stream)

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
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            conductor = self.callback

            async def route(message: Any) -> None:
                lane = lanes.get(message.topic)
                if lane is None:
                    await conductor(message)
                else:
                    await lane.put(message)

            self.callback = route

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
