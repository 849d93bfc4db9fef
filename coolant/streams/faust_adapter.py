"""Every use of faust-streaming's private internals, in one module, and the version check that allows them.

The fast path (`install`) overrides, and why:
1. `Consumer._drain_messages`, Faust's fetch loop, is re-implemented (`LaneConsumer`) to hand outcome and
   health messages to the input lanes (`lane.py`) directly: Faust's per-message delivery (conductor, stream
   queue, two tasks per message, a per-event ack) capped a worker near 7k records/s. It reads and writes
   `_read_offset`, `_add_gap`, `_n_acked`, `_commit_every`, `_stopped`, `diag`, `callback`, `wait_first`,
   `suspend_flow`, `flow_active`: the bookkeeping (read offsets, gaps, commits) stays Faust's.
2. `resume_partitions`, `seek_to_committed` and `perform_seek` are overridden (`SeekSafeConsumer`) and
   `_thread.seek_to_beginning` called: faust 0.15.3 loses records around a rebalance (below).
3. `app.flow_control.resume` and `.clear` are replaced (`guard_flow_control`), for the same bug.
4. `Consumer._committed_offset` is read for the lag gauge and the stall watch (`committed_offsets`): Faust
   has no public accessor.
5. `AIOKafkaConsumerThread._create_worker_consumer` is extended (`_TunedThread`) to set the aiokafka consumer's
   `_fetch_max_wait_ms` and `_fetch_min_bytes` before it starts (`FetchTuning`, `--fetch-max-wait-ms`,
   `--fetch-min-bytes`): Faust fixes them at 1500 ms and 1 byte, so a partition left out of the fetch in flight
   waited up to 1.5 s for it, and no worker could have the broker gather records to save fetch round trips
   (Python protocol work in the consumer thread, contending for the GIL with the deciders).
   `Consumer._new_consumer_thread` is overridden to create it.
6. `Consumer._thread._consumer` (the aiokafka consumer) is asked an input topic's partition count for the
   misrouting check (`partition_count`, `routing.py`): Faust's `topic_partitions` reads aiokafka's group metadata
   snapshot, which only the group leader keeps. Both paths use it.
7. A stalled worker's log line describes Faust's table recovery (`recovery_state`): its offsets and end offsets,
   the consumer's read offsets, aiokafka's fetch positions and paused partitions. Read only, on a stall only.
8. `RecoveryWatch` rewinds a changelog partition whose records recovery never received: Faust's `getmany` drops
   a fetched batch when flow control stopped while the fetch was in flight (a rebalance), and for a changelog
   partition nothing seeks back (no committed offset), so aiokafka's position is past records recovery waits
   for, forever. Seen: recovery at -1 of 9 on a `request-state` partition, read offset none, fetch position 10.
   It reads `tables.recovery`'s `in_recovery`, `active_remaining()`, `active_offsets` and aiokafka's positions,
   and seeks with Faust's `Consumer.seek`.
9. `TrackedProducer` registers each topic with the aiokafka producer's metadata (`client.add_topic`) before its
   first send, reading the client's tracked set (`_topics`). aiokafka refreshes metadata for all topics while it
   tracks none, and only for the tracked ones after that; Faust's topic declarations refresh with nothing tracked,
   so the producer sends to topics it knows but does not track. The first topic it did track (one that was missing
   from the last refresh, e.g. a changelog topic created just before it) made the next refresh drop every other
   topic from the producer's metadata; a batch waiting for such a topic then had no partition leader, and the
   refreshes its sender asked for never brought the topic back: it waited for Faust's producer request timeout
   (20 minutes), and so did Faust's commit (`producer.flush()`) and any lane awaiting a send to that topic. Seen
   as issue 26's stall (a lane awaiting a misrouted record's re-publication, the dead letters before it never
   delivered); `producer_state` describes the producer's batches in the stall log line.
10. `BoundedStopWorker` extends mode's `Worker._schedule_shutdown` (called on SIGTERM and SIGINT) to start a
   watchdog: a process whose stop hangs (a broker that never answers, a send that never completes: Faust's stop
   commits, and its commit flushes the producer) exits STOP_WITHIN seconds after the signal anyway.
Both paths also use `Table.data` (the table's in-memory store, read and written by `pathstore.py` and the
history agent) and `Producer.send(topic, key, value, partition, ...)`, Faust's documented producer call. The
plain path sets `Message.acked` on a stale message of a `take_events` batch (`keep_unacknowledged`).

`install` refuses the fast path on a faust-streaming version not in TESTED_FAUST, with one log line, and
installs nothing; the worker then runs the plain path (`Pipeline`): agents over `stream.take_events()`
batches, Faust's own acks. It decides the same records the same way; it is slower, and has no lag gauge and
no stall watch. COOLANT_FAUST_PATH=plain runs that path on a tested version (CI runs the live tests on both),
keeping the failover guards (2, 3) that version needs and the fetch settings (5).

Why the fast path's guards (2, 3): faust-streaming 0.15.3 loses a range of a partition when a worker takes it
over (seen in `test_worker_failover`: a survivor skipped hundreds of records of the dead worker's partitions):

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
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import faust
from faust.transport import consumer as faust_consumer
from faust.transport.drivers import aiokafka as faust_aiokafka

from coolant.streams import metrics
from coolant.streams.lane import Lane
from coolant.topics import is_internal_topic

log = logging.getLogger(__name__)

TESTED_FAUST = frozenset({"0.15.3"})
"""faust-streaming versions the fast path was tested on (its fetch loop is a copy of theirs)."""
PATH_ENV = "COOLANT_FAUST_PATH"
"""`plain` forces the plain-Faust path (CI runs the live tests on both); `fast` or unset: fast if tested."""

PLAIN_NOTICE = "fast path off: "
"""How the one log line that says the plain path runs begins (the live tests check which path ran)."""


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


def faust_version() -> str:
    try:
        return version("faust-streaming")
    except PackageNotFoundError:
        return "unknown"


def untested_faust() -> str | None:
    """Why nothing here may be installed (an untested faust-streaming), or None."""
    installed = faust_version()
    if installed not in TESTED_FAUST:
        return f"faust-streaming {installed} is not a version it was tested on ({', '.join(sorted(TESTED_FAUST))})"
    return None


def lanes_wanted() -> bool:
    wanted = os.environ.get(PATH_ENV, "").strip().lower()
    if wanted not in ("", "fast", "plain"):
        raise ValueError(f"{PATH_ENV}={wanted!r}: expected 'fast' or 'plain'")
    return wanted != "plain"


def install(app: Any, lanes: Mapping[str, Lane], fetch: FetchTuning | None = None) -> str | None:
    """Use the lane-routing consumer and the failover guards for this app (before it starts), if allowed.

    On an untested faust-streaming nothing is installed. With COOLANT_FAUST_PATH=plain on a tested version the
    lanes are off but the guards stay: they fix that version's failover bug, which the plain path would hit too.
    `fetch` applies on both paths of a tested version (on an untested one Faust's fetch settings stay).
    Returns why the fast path is off (None: it is on), which the worker logs in one line once it has started
    (logging is set up by then: a line logged while the app is being built is lost).
    """
    refusal = untested_faust()
    if refusal is not None:
        why = f"{refusal}; running the plain Faust path (agents over take_events batches), slower, without the " \
              "failover guards and with Faust's fetch settings"
    else:
        fast = lanes_wanted()
        app.transport.Consumer = _tuned(consumer_class(lanes) if fast else SeekSafeConsumer, fetch)
        app.transport.Producer = TrackedProducer
        guard_flow_control(app, lanes if fast else {})
        app.timer(REWIND_AFTER, name="recovery-watch")(RecoveryWatch(app).tick)
        if fast:
            return None
        why = f"{PATH_ENV}=plain; running the plain Faust path (agents over take_events batches)"

    async def announce() -> None:
        log.warning("%s%s", PLAIN_NOTICE, why)

    app.task(announce)
    return why


class TrackedProducer(faust_aiokafka.Producer):  # type: ignore[misc,unused-ignore]  # faust is untyped
    """Faust's producer, each topic tracked by the Kafka client's metadata before its first send (see 9 above), so
    that no metadata refresh can drop a topic with batches waiting for it."""

    async def send(self, topic: str, *args: Any, **kwargs: Any) -> Any:
        client = self._ensure_producer().client
        if topic not in client._topics:
            client.add_topic(topic)  # (asks for a refresh that includes it; the send waits for one if it must)
        return await super().send(topic, *args, **kwargs)


STOP_WITHIN = 14.0
"""Seconds from SIGTERM (or SIGINT) to the worker's exit at most, whatever is stuck (a second more for the exit
itself: the documented bound is 15 s). The stop itself lets the batches
in hand finish for up to `WorkerOptions.shutdown_timeout` (10 s), then commits and leaves the group (about a
second); beyond this bound the process exits as a crash would (what was decided is durable or is decided again by
the next owner from the last commit), well before Kubernetes' grace period (deploy/kubernetes: 60 s) ends in a
SIGKILL."""
OVERDUE_EXIT = 70
"""The exit status of a stop that overran STOP_WITHIN (EX_SOFTWARE); a clean stop exits 0."""


class BoundedStopWorker(faust.Worker):  # type: ignore[misc,unused-ignore]  # faust is untyped
    """Faust's worker, its process ended at most `stop_within` seconds after the first SIGTERM or SIGINT (see 10
    above). `diagnose` says, in the overdue line, what the stop was waiting for."""

    stop_within: float = STOP_WITHIN
    diagnose: Callable[[], str] | None = None
    _watchdog: threading.Timer | None = None

    def _schedule_shutdown(self, signal: Any) -> None:
        if self._watchdog is None:
            self._watchdog = threading.Timer(self.stop_within, self._overdue, (getattr(signal, "name", signal),))
            self._watchdog.daemon = True
            self._watchdog.start()
        super()._schedule_shutdown(signal)

    def _overdue(self, signal: str) -> None:
        """In the watchdog's thread: the loop may be stuck, so say why from here and end the process."""
        try:
            why = self.diagnose() if self.diagnose is not None else ""
        except Exception as exc:  # read across threads while the loop runs: a diagnosis may fail, the exit may not
            why = f"(no diagnosis: {type(exc).__name__}: {exc})"
        log.error("shutdown: still stopping %.0f s after %s; exiting now (records not committed are decided again "
                  "by the next owner): %s", self.stop_within, signal, why)
        logging.shutdown()
        os._exit(OVERDUE_EXIT)


def producer_state(app: Any) -> str:
    """One line on the Kafka producer, for the stall log: the partitions with batches not yet acknowledged by the
    broker (queued or in flight, the oldest's age, whether the producer knows the partition's leader), and how
    many topics its metadata tracks and knows."""
    producer = getattr(app.producer, "_producer", None)
    if producer is None:
        return "producer: not started"
    client = producer.client
    cluster = client.cluster
    accumulator = producer._message_accumulator
    now = time.monotonic()
    waiting: dict[Any, list[float]] = {}
    for tp, batches in accumulator._batches.items():
        waiting.setdefault(tp, []).extend(now - b._ctime for b in batches)
    in_flight = {b.tp for b in accumulator._pending_batches}
    for batch in accumulator._pending_batches:
        waiting.setdefault(batch.tp, []).append(now - batch._ctime)
    parts = []
    for tp, ages in sorted(waiting.items(), key=lambda item: -max(item[1]))[:8]:
        leader = cluster.leader_for_partition(tp)
        parts.append(f"{tp.topic}[{tp.partition}] {len(ages)} batch(es), oldest {max(ages):.1f} s"
                     f"{', in flight' if tp in in_flight else ''}"
                     f"{', leader unknown' if leader is None or leader == -1 else ''}"
                     f"{', topic not tracked' if tp.topic not in client._topics else ''}")
    return (f"producer: {len(waiting)} partition(s) with unacknowledged batches"
            f"{': ' + '; '.join(parts) if parts else ''}; metadata tracks {len(client._topics)} topic(s), knows "
            f"{len(cluster.topics())}")


def _tuned(cls: type[SeekSafeConsumer], fetch: FetchTuning | None) -> type[SeekSafeConsumer]:
    """`cls` for one app: its fetch settings on a subclass, not on the class another app in the process shares."""
    return type(cls.__name__, (cls,), {"fetch_tuning": fetch})


def committed_offsets(consumer: Any) -> Mapping[Any, int | None] | None:
    """The consumer's committed offset per partition (as Kafka keeps them: the next offset to read); None on the
    plain path, which reads nothing private."""
    if not isinstance(consumer, SeekSafeConsumer):
        return None
    offsets: Mapping[Any, int | None] = consumer._committed_offset
    return offsets


def keep_unacknowledged(message: Any) -> None:
    """A stale message of a `take_events` batch (fetched before a rebalance: `Pipeline._fresh`) that Faust will
    acknowledge with the rest of the batch must not count: its partition is read again from the last commit, and
    an acknowledgement recorded after the revocation could let a commit pass it undecided. Marked acknowledged
    already, `Message.ack` and `Consumer.ack` record nothing for it, as for a message Faust's own streams skip."""
    message.acked = True


def recovery_state(app: Any) -> str:
    """One line on Faust's table recovery, for the stall log: whether it runs and, for each changelog partition
    it still waits on, its offset / end there, the consumer's read offset, aiokafka's fetch position and whether
    aiokafka has it paused. (Seen: a survivor waited minutes for changelog records that never came.)"""
    recovery = app.tables.recovery
    if not recovery.in_recovery:
        return "table recovery: not running"
    consumer = app.consumer
    client = consumer._thread._consumer
    paused = set(client.paused())
    parts = []
    for tp, remaining in sorted(recovery.active_remaining().items()):
        if remaining <= 0:
            continue
        position = _fetch_position(client, tp)
        parts.append(f"{tp.topic}[{tp.partition}] at {recovery.active_offsets.get(tp)} of "
                     f"{recovery.active_highwaters.get(tp)}, read {consumer._read_offset.get(tp)}, "
                     f"fetch position {position}{', paused' if tp in paused else ''}")
    return "table recovery waits on " + ("; ".join(parts) or "nothing")


def _fetch_position(client: Any, tp: Any) -> int | None:
    """aiokafka's fetch position of `tp` (the next offset it will hand out), None before it has one."""
    assignment = client._subscription.subscription.assignment
    state = assignment.state_value(tp) if assignment is not None else None
    position: int | None = getattr(state, "position", None)
    return position


REWIND_AFTER = 5.0
"""Seconds a changelog partition's recovery may stand still, its records fetched past it, before it is rewound."""


class RecoveryWatch:
    """Every tick during a table recovery: a changelog partition whose recovery offset has not moved since the last
    tick although aiokafka's fetch position is past it lost its records (see 8 above); seek it back to the next
    offset recovery needs. Recovery ignores records it has already applied, so a needless rewind costs a re-read."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self._last: dict[Any, int | None] = {}

    async def tick(self) -> None:
        try:
            await self._check()
        except Exception as exc:  # a watch must never stop the worker (e.g. a Faust whose internals moved)
            log.warning("table recovery watch: %s: %s", type(exc).__name__, exc)

    async def _check(self) -> None:
        recovery = self.app.tables.recovery
        if not recovery.in_recovery:
            self._last.clear()
            return
        client = self.app.consumer._thread._consumer
        last, self._last = self._last, {}
        for tp, remaining in recovery.active_remaining().items():
            if remaining <= 0:
                continue
            offset = recovery.active_offsets.get(tp)
            self._last[tp] = offset
            position = _fetch_position(client, tp)
            start = 0 if offset is None or offset < 0 else offset + 1
            if tp in last and last[tp] == offset and position is not None and position > start:
                log.warning("table recovery: %s[%s] stood still at %s of %s with the fetch at %s; reading it again "
                            "from %s", tp.topic, tp.partition, offset, recovery.active_highwaters.get(tp), position,
                            start)
                metrics.RECOVERY_REWINDS.inc()
                await self.app.consumer.seek(tp, start)


def partition_count(app: Any, topic: str) -> int | None:
    """The topic's partition count from this member's cluster metadata (None before there is any)."""
    client = getattr(getattr(app.consumer, "_thread", None), "_consumer", None)
    parts = None if client is None else client.partitions_for_topic(topic)
    return len(parts) if parts else None
