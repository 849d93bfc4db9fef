"""The live shell in memory: the worker's real `Pipeline` over a fake consumer and producer, no broker.

In the spirit of h11's `ConnectionPair` (tests wire a client and a server together in memory): what runs is the
production code from the fetch loop on (the lane consumer, lanes, batching, decoding and dead letters, the
partition check, both deciders, the path stores and their flushes, acknowledgements, draining, the X3 ejection
agent), through Faust's own `Topic.send`. Only the two objects that talk to a broker are replaced, at the seams
Faust itself defines:
- `MemoryProducer` stands for `app.producer`: `send(topic, key, value, partition, timestamp, headers)` returns
  the future of the broker's acknowledgement. Every send is kept in order; `hold()` keeps the acknowledgements
  back until `release()`, so a test can see what waits for durability.
- `MemoryConsumer` stands for `app.consumer`: `ack(message)` is recorded and can be waited for.

`MemoryWorker.deliver` hands records (on the partition murmur2 gives their key, with increasing offsets) to the
lanes' own fetch loop, `faust.consumer.LaneConsumer._drain_messages`, as if `getmany` had returned them; it
puts them on their lanes (`fetch` takes messages as they are). `pump` delivers what the worker re-published to an
input topic. `stage` runs the X3 ejection agent over the candidates sent so far, as a Faust stream hands them (the
stream's current event set, so its table writes work). `recover` fills a new worker's tables from another's
changelog sends, as Faust's recovery does. One event log (sends and acks, in order) is kept to assert on.

What needs a broker (rebalances, commits, recovery itself, the plain path's `take_events`, the materializer's
Redis) stays in the broker tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import weakref
from collections import defaultdict
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from typing import Any

import orjson
from faust import streams as faust_streams
from faust.types import TP

from coolant.config.loader import Config
from coolant.processors import Policy
from coolant.streams.app import Pipeline, WorkerOptions
from coolant.streams.faust import RawTable
from coolant.topics import Topics, partition_of

WAIT = 10.0
"""Seconds any wait of the harness may take before it fails the test (each returns on an event, far sooner)."""


@dataclass(frozen=True, slots=True)
class Sent:
    topic: str
    key: bytes | None
    value: bytes | None
    partition: int | None


@dataclass(slots=True, eq=False)
class Message:
    """What the consumer hands a lane: the fields of Faust's `Message` the shell reads (compared by identity,
    as Faust's)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: float = 0.0
    """Its Kafka timestamp (epoch seconds; the publisher's clock): `deliver` stamps the time it hands it over."""
    generation_id: int = 0
    """The consumer group generation it was fetched in (Faust stamps every message; `deliver` stamps the app's,
    0 until an assignment as in Faust)."""
    acked: bool = False
    """Faust's flag: set, its acknowledgement records nothing (`faust.messages.keep_unacknowledged`)."""


Event = tuple[str, str, bytes | None, int | None]
"""("send", topic, key, partition) or ("ack", topic, key, partition), in the order they happened."""


class Changed:
    """An event that tests wait on until a condition over the harness's records holds."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def notify(self) -> None:
        self._event.set()

    async def until(self, condition: Any, what: str, timeout: float = WAIT) -> None:
        async def wait() -> None:
            while not condition():
                self._event.clear()
                await self._event.wait()

        try:
            await asyncio.wait_for(wait(), timeout)
        except TimeoutError:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}") from None


class MemoryProducer:
    def __init__(self, log: list[Event], changed: Changed) -> None:
        self.log = log
        self.changed = changed
        self.sent: list[Sent] = []
        self._held: list[asyncio.Future[None]] | None = None
        self.flushes = 0
        """`flush` calls that returned (each waits until every send so far is durable)."""

    async def maybe_start(self) -> None:
        """Faust starts the producer on first use; there is nothing to start."""

    async def send(self, topic: str, key: bytes | None, value: bytes | None, partition: int | None = None,
                   timestamp: float | None = None, headers: Any = None) -> asyncio.Future[None]:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.sent.append(Sent(topic, key, value, partition))
        self.log.append(("send", topic, key, partition))
        if self._held is None:
            fut.set_result(None)
        else:
            self._held.append(fut)
        self.changed.notify()
        return fut

    async def flush(self) -> None:
        await self.changed.until(lambda: not self.held, "every send to be acknowledged (a producer flush)")
        self.flushes += 1

    def send_soon(self, fut: Any) -> None:
        """Faust's buffered send (a table's changelog write inside an agent): kept like `send`, at once."""
        m = fut.message
        topic = m.channel.get_topic_name()
        self.sent.append(Sent(topic, m.key, m.value, m.partition))
        self.log.append(("send", topic, m.key, m.partition))
        self.changed.notify()

    def hold(self) -> None:
        """From now on, sends stay unacknowledged (not durable) until `release`."""
        self._held = []

    def release(self) -> None:
        held, self._held = self._held or [], None
        for fut in held:
            fut.set_result(None)
        self.changed.notify()

    @property
    def held(self) -> int:
        return len(self._held or ())

    def on(self, topic: str) -> list[Sent]:
        return [s for s in self.sent if s.topic == topic]


class MemoryConsumer:
    def __init__(self, log: list[Event], changed: Changed) -> None:
        self.log = log
        self.changed = changed
        self.acked: list[Message] = []

    def topic_partitions(self, topic: str) -> int | None:
        """Unknown (Faust then skips its check that a table's changelog matches its source topic)."""
        return None

    def ack(self, message: Message) -> bool:
        self.acked.append(message)
        self.log.append(("ack", message.topic, message.key, message.partition))
        self.changed.notify()
        return True


class MemoryWorker:
    """One worker's `Pipeline` (intake: the lanes) wired to a `MemoryProducer` and a `MemoryConsumer`."""

    def __init__(self, cfg: Config, *, app_id: str = "memory", partitions: int = 4, shadow: Policy | None = None,
                 **options: Any) -> None:
        opts = WorkerOptions(app_id=app_id, partitions=partitions, max_ts_ahead=1e9, **options)
        self.pipeline = p = Pipeline(cfg, opts, sink=None, shadow_policy=shadow)
        assert p.lanes_on, "the in-memory worker drives the lanes"
        self.partitions = partitions
        self.names = Topics(cfg.runtime.topic_prefix)
        self.log: list[Event] = []
        self.changed = Changed()
        self.producer = p.app.producer = MemoryProducer(self.log, self.changed)
        self.consumer = p.app.consumer = MemoryConsumer(self.log, self.changed)
        p.intake.routing.partitions = lambda topic: partitions  # what the consumer's cluster metadata would say
        self.conducted: list[Any] = []
        """Messages the fetch loop handed to Faust's conductor (topics no lane reads)."""

        async def conductor(message: Any) -> None:
            self.conducted.append(message)

        self.fetcher = p.app.transport.create_consumer(
            callback=conductor, on_partitions_revoked=None, on_partitions_assigned=None)
        """The lanes' consumer (`faust.consumer.LaneConsumer`), never started: only its fetch loop runs."""
        self._offsets: defaultdict[tuple[str, int], int] = defaultdict(int)
        self._pumped: defaultdict[str, int] = defaultdict(int)
        self._tasks: list[asyncio.Task[None]] = []
        self.delivered = 0
        """Messages handed to a lane so far (each is acknowledged once its batch is decided and durable)."""
        for lane in p.intake.lanes.values():
            lane.put = self._counting(lane.put)  # type: ignore[method-assign]

    def _counting(self, put: Any) -> Any:
        async def counted(message: Any) -> None:
            self.delivered += 1
            await put(message)

        return counted

    async def __aenter__(self) -> MemoryWorker:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def start(self) -> None:
        """The lanes' decider tasks, as `coolant worker` starts them (`app.task`)."""
        p = self.pipeline
        self._tasks = [asyncio.create_task(p.intake.drive(topic)) for topic in p.intake.lanes]

    async def stop(self) -> None:
        """As on SIGTERM: let the batches in hand finish (`before_stop`), then end the tasks."""
        await self.pipeline.drain()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []

    async def deliver(self, topic: str, records: Iterable[bytes | tuple[bytes | None, bytes | None]],
                      partition: int | None = None) -> list[Message]:
        """Hand records to the topic's lane as the consumer's fetch loop does. A record is its value (keyed by its
        deployment id, as publishers key them) or (key, value); it lands on murmur2's partition for its key unless
        `partition` says otherwise."""
        out = []
        for rec in records:
            key, value = rec if isinstance(rec, tuple) else (_deployment_key(rec), rec)
            part = partition if partition is not None else partition_of((key or b"").decode(), self.partitions)
            offset = self._offsets[topic, part]
            self._offsets[topic, part] = offset + 1
            out.append(Message(topic, part, offset, key, value, time.time(), self.pipeline.app.consumer_generation_id))
        await self.fetch(out)
        return out

    async def fetch(self, messages: list[Message]) -> None:
        """One batch through the lanes' fetch loop (`LaneConsumer._drain_messages`), as if `getmany` had
        returned `messages`: input messages go to their lane (unless read already), others to the conductor."""
        done = asyncio.Event()

        async def getmany(timeout: float) -> AsyncIterator[tuple[TP, Message]]:
            for message in messages:
                yield TP(message.topic, message.partition), message
            done.set()

        self.fetcher.getmany = getmany
        await self.fetcher._drain_messages(_Fetcher(done))

    async def pump(self, topic: str) -> list[Message]:
        """Deliver what this worker itself sent to an input topic (re-published records), as the broker would."""
        fresh = self.producer.on(topic)[self._pumped[topic]:]
        self._pumped[topic] += len(fresh)
        out = []
        for s in fresh:
            out += await self.deliver(topic, [(s.key, s.value)], partition=s.partition)
        return out

    async def stage(self, topic: str) -> int:
        """Run the enforced decider's agent of an internal topic (the X3 ejection stage on the candidates topic)
        over what was sent to it since the last call, as Faust's agent would receive it; returns how many."""
        agents = {self.names.candidates: self.pipeline.enforced._ejection_agent}
        fresh = self.producer.on(topic)[self._pumped[topic]:]
        self._pumped[topic] += len(fresh)
        offsets = iter(range(len(fresh)))

        async def events() -> AsyncIterator[Any]:
            for s in fresh:
                event = _Event(Message(topic, s.partition or 0, next(offsets), s.key, s.value), s.value)
                faust_streams._current_event.set(weakref.ref(event))  # what Faust's stream iteration sets
                yield event
            faust_streams._current_event.set(None)

        await agents[topic](_Stream(events))
        return len(fresh)

    async def settled(self, what: str = "every delivered record acknowledged") -> None:
        """Until every record delivered so far is acknowledged (the batches holding them decided and durable)."""
        await self.changed.until(lambda: len(self.consumer.acked) >= self.delivered, what)

    def recover(self, other: MemoryWorker) -> None:
        """Fill this worker's tables from the changelog records `other` sent (Faust's recovery, in memory)."""
        for table in self.pipeline.app.tables.values():
            raw = RawTable(table)
            for s in other.producer.on(raw.changelog):
                if s.value is None:
                    raw.data.pop(s.key, None)
                else:
                    raw.data[s.key] = s.value

    @property
    def state_changelog(self) -> str:
        """The changelog topic of the enforced decider's request-path states."""
        return self.pipeline.enforced.request_store.state_table.changelog

    def partition(self, deployment_id: str) -> int:
        """The input partition a deployment's records belong on (murmur2, as the publishers' partitioner)."""
        return partition_of(deployment_id, self.partitions)

    def records(self, topic: str) -> list[dict[str, Any]]:
        """The decoded values this worker sent to `topic`, in order."""
        return [orjson.loads(s.value) for s in self.producer.on(topic) if s.value is not None]

    def index(self, kind: str, topic: str, key: bytes | None = None) -> list[int]:
        """Positions in the event log of the sends or acks (`kind`) on `topic` (for `key`, if given)."""
        return [i for i, (k, t, ky, _) in enumerate(self.log) if k == kind and t == topic and key in (None, ky)]


@dataclass(frozen=True, slots=True)
class _Fetcher:
    """The fetch loop stops once its fetcher has: after the one batch."""

    _stopped: asyncio.Event


@dataclass(frozen=True, slots=True, weakref_slot=True)
class _Event:
    message: Message
    value: bytes | None


@dataclass(frozen=True, slots=True)
class _Stream:
    """What an agent iterates: `stream.events()`."""

    events: Any


def _deployment_key(value: bytes) -> bytes | None:
    try:
        d = orjson.loads(value)
    except orjson.JSONDecodeError:
        return None
    dep = d.get("deployment_id") if isinstance(d, dict) else None
    return dep.encode() if isinstance(dep, str) else None
