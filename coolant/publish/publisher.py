"""The gateway side of the contract: put outcome, health and deployment records on Kafka (§1, §2).

A gateway must never slow down or fail a request because the cooldown pipeline is slow or gone.
So `Publisher.publish` only validates, encodes and appends to a bounded in-memory buffer (O(1),
no I/O, never raises); a background task drains the buffer into an aiokafka producer, which
batches by `linger_ms`. When Kafka cannot be reached the task reconnects with capped exponential
backoff (with jitter, so a fleet does not reconnect in lockstep) and the buffer absorbs the gap
up to `max_buffer` records; beyond that records are dropped and counted, never queued without bound.

Delivery is at least once: a record whose send failed for a transient reason (connection lost,
request timed out) goes back to the front of the buffer, in its original order, and is sent again
after the reconnect, so Kafka may hold it twice. The worker drops duplicates by `event_id`.

Accounting: every record given to `publish` ends in exactly one counter of `PublisherStats`
(or is still counted in `buffered`), so `accepted == sent + errors + buffered + dropped at stop`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaConnectionError, KafkaTimeoutError, ProducerClosed

from coolant.publish.messages import MAX_EXCEPTION_MESSAGE, Publishable, message_of, route
from coolant.publish.sparse_log import SparseLog
from coolant.topics import Topics

__all__ = ["MAX_EXCEPTION_MESSAGE", "Publishable", "Publisher", "PublisherStats", "route"]
"""`MAX_EXCEPTION_MESSAGE`, `Publishable` and `route` live in `messages`; named here too, where gateways import them."""

log = logging.getLogger(__name__)

WARN_EVERY = 10.0
"""Seconds between two warnings of the same kind (drops, connection trouble)."""
DEFAULT_REQUEST_TIMEOUT_MS = 15_000
"""aiokafka's is 40 s; a publisher should notice a dead broker sooner and start buffering."""
_YIELD_EVERY = 256
"""Records handed to the producer between two yields to the event loop (keeps the gateway responsive)."""

@dataclass(frozen=True, slots=True)
class PublisherStats:
    """A snapshot of a publisher's counters (records, not messages or bytes). All counters only grow.

    - `sent`: acknowledged by Kafka (`acks`). After a reconnect a record may have been written twice;
      it is still counted once.
    - `dropped_full`: refused by `publish` because the buffer held `max_buffer` records while Kafka
      was connected (records arrive faster than Kafka takes them, or an outage not yet detected).
    - `dropped_unavailable`: lost because Kafka could not be reached: refused by `publish` because the
      buffer was full while disconnected (never connected yet, or reconnecting), published after
      `stop`, or still unsent when `stop` gave up at its timeout.
    - `dropped_invalid`: refused by `publish` because the worker would reject it (validation), or it
      is not an outcome/health/deployment record, or it cannot be encoded.
    - `errors`: taken from the buffer but refused by Kafka for good (a non-retriable error such as
      message too large or topic authorization failed); dropped, never retried.
    - `buffered`: accepted and not yet acknowledged (waiting in the buffer or in flight); at most
      `max_buffer`. A gauge, not a counter.
    """

    sent: int = 0
    dropped_full: int = 0
    dropped_unavailable: int = 0
    dropped_invalid: int = 0
    errors: int = 0
    buffered: int = 0

    @property
    def dropped(self) -> int:
        return self.dropped_full + self.dropped_unavailable + self.dropped_invalid


class _Item(NamedTuple):
    seq: int
    topic: str
    key: bytes
    value: bytes


def _transient(exc: BaseException) -> bool:
    """Worth sending again after a reconnect (as opposed to a record Kafka will never take)."""
    if isinstance(exc, (KafkaTimeoutError, ProducerClosed, KafkaConnectionError, TimeoutError, OSError)):
        return True
    return bool(getattr(exc, "retriable", False))


class Publisher:
    """Publishes records to Kafka from an asyncio application without ever blocking or raising.

    ```
    pub = Publisher("kafka:9092")
    await pub.start()                # returns at once; connects in the background
    pub.publish(Outcome(...))        # False = dropped (and counted in pub.stats)
    await pub.stop()                 # flushes for up to 5 s, then closes
    ```

    Records go to `<topic_prefix>outcomes`, `health` or `deployments` by type, keyed by
    `deployment_id` (UTF-8), valued `encode(record)`. `publish` may be called before `start`
    (records wait in the buffer) and from any thread (it is thread-safe; `SyncPublisher` relies on it).

    `client_args` are extra `AIOKafkaProducer` arguments (e.g. `kafka_client_args(settings)` for
    SASL/SSL; its `bootstrap_servers` and `linger_ms`, if any, yield to the arguments above). Defaults:
    `acks=1` and `request_timeout_ms=15000`. acks=1: outcome records are statistical telemetry
    (windows of counts) and duplicates are dropped by `event_id`, so losing the rare record on an
    unclean leader change costs nothing, while `acks="all"` would stop the feed whenever the ISR
    shrinks below `min.insync.replicas`; availability wins. Pass `{"acks": "all"}` to prefer
    durability. `validate=False` skips the decode check (the record is still encoded and routed).
    `reconnect_backoff` is (first, max) seconds between reconnect attempts; each failure doubles it.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        topic_prefix: str = "coolant.",
        max_buffer: int = 10_000,
        linger_ms: int = 20,
        client_args: Mapping[str, Any] | None = None,
        validate: bool = True,
        reconnect_backoff: tuple[float, float] = (0.5, 30.0),
    ) -> None:
        if max_buffer < 1:
            raise ValueError("max_buffer must be >= 1")
        first, cap = reconnect_backoff
        if not 0 < first <= cap:
            raise ValueError("reconnect_backoff must be (first, max) with 0 < first <= max")
        self.topics = Topics(topic_prefix)
        self.max_buffer = max_buffer
        self.validate = validate
        self._producer_args: dict[str, Any] = {
            "acks": 1,
            "request_timeout_ms": DEFAULT_REQUEST_TIMEOUT_MS,
            **dict(client_args or {}),
            "bootstrap_servers": bootstrap_servers,
            "linger_ms": linger_ms,
        }
        self._backoff_first, self._backoff_max = first, cap
        self._delay = first

        # Shared with publishing threads: guarded by _lock.
        self._lock = threading.Lock()
        self._buffer: deque[_Item] = deque()
        self._seq = 0
        self._pending = 0  # accepted, not yet resolved: the buffer, the retry list and in flight
        self._closed = False  # stop() began: publish refuses
        self._idle = False  # the sender waits for records: the next publish must wake it
        self._connected = False
        self._sent = self._dropped_full = self._dropped_unavailable = self._dropped_invalid = self._errors = 0

        # Owned by the event loop thread.
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._producer: AIOKafkaProducer | None = None
        self._retry: list[_Item] = []
        self._broken = False
        self._resolved = 0  # records that reached a final counter (sent, errors, dropped at stop)
        self._flush_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._warn_drop = SparseLog(log, logging.WARNING, WARN_EVERY)
        self._warn_kafka = SparseLog(log, logging.WARNING, WARN_EVERY)

    # -- the caller's side -------------------------------------------------------------------

    @property
    def stats(self) -> PublisherStats:
        with self._lock:
            return PublisherStats(
                sent=self._sent,
                dropped_full=self._dropped_full,
                dropped_unavailable=self._dropped_unavailable,
                dropped_invalid=self._dropped_invalid,
                errors=self._errors,
                buffered=self._pending,
            )

    @property
    def connected(self) -> bool:
        """Whether the last thing heard from Kafka was good (a connect or an acknowledgement)."""
        return self._connected

    def publish(self, record: Publishable) -> bool:
        """Queue one record for Kafka; True if accepted, False if dropped (see `PublisherStats`).

        Never blocks (no I/O, no waiting for space) and never raises, whatever it is given.
        """
        try:
            return self._publish(record)
        except Exception:  # a bug here must not reach the gateway's request path
            log.exception("coolant publisher: publish failed")
            return False

    def _publish(self, record: Publishable) -> bool:
        try:
            topic, key, value = message_of(record, self.topics, validate=self.validate)
        except Exception as exc:
            with self._lock:
                self._dropped_invalid += 1
                total = self._dropped_invalid
            self._warn_drop("coolant publisher: dropped an invalid record (%s); %d invalid so far", exc, total)
            return False
        with self._lock:
            accepted = not self._closed and self._pending < self.max_buffer
            if accepted:
                self._seq += 1
                self._buffer.append(_Item(self._seq, topic, key, value))
                self._pending += 1
                wake, self._idle = self._idle, False
        if accepted:
            if wake:
                self._wake_sender()
            return True
        with self._lock:
            if self._closed or not self._connected:
                self._dropped_unavailable += 1
                why = "the publisher is stopped" if self._closed else "Kafka is unavailable and the buffer is full"
            else:
                self._dropped_full += 1
                why = "the buffer is full"
            full, unavailable = self._dropped_full, self._dropped_unavailable
        self._warn_drop(
            "coolant publisher: dropping records: %s (max_buffer %d); dropped so far: %d buffer full, "
            "%d Kafka unavailable",
            why, self.max_buffer, full, unavailable,
        )
        return False

    def _wake_sender(self) -> None:
        loop = self._loop
        if loop is None:
            return  # not started: start() drains what is buffered
        if threading.get_ident() == self._loop_thread:
            self._wake.set()
        else:
            with contextlib.suppress(RuntimeError):  # the loop is closed: stop() already accounted for it
                loop.call_soon_threadsafe(self._wake.set)

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the background sender. Returns at once; never raises because Kafka is unreachable."""
        if self._task is not None or self._closed:
            return
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._task = self._loop.create_task(self._run(), name="coolant-publisher")

    async def flush(self, timeout: float = 5.0) -> None:
        """Wait until the records published before this call are acknowledged or given up on.

        Returns after at most `timeout` seconds, delivered or not (never raises). While Kafka is
        down, it also cuts the current reconnect delay short.
        """
        if self._task is None or self._task.done():
            return
        with self._lock:
            target = self._resolved + self._pending
        if self._resolved >= target:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (target, waiter)
        self._flush_waiters.append(entry)
        self._wake.set()
        try:
            await asyncio.wait_for(waiter, timeout)
        except TimeoutError:
            pass
        finally:
            if entry in self._flush_waiters:
                self._flush_waiters.remove(entry)

    async def stop(self, timeout: float = 5.0) -> None:
        """Flush for up to `timeout` seconds, then close; unsent records count as `dropped_unavailable`."""
        deadline = time.monotonic() + timeout
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._task is not None:
            await self.flush(timeout)
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        producer, self._producer = self._producer, None
        if producer is not None:
            await self._close_producer(producer, max(0.0, deadline - time.monotonic()))
            await asyncio.sleep(0)  # let the failed futures' callbacks run
        self._give_up()

    def _give_up(self) -> None:
        """After stop: whatever is still buffered will never be sent."""
        with self._lock:
            self._closed = True
            left = len(self._buffer) + len(self._retry)
            self._buffer.clear()
            self._retry = []
            self._pending -= left
            self._dropped_unavailable += left
            self._connected = False
        self._resolve(left)
        if left:
            log.warning("coolant publisher: stopped with %d records unsent (Kafka unavailable)", left)

    async def __aenter__(self) -> Publisher:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- the sender task -----------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            try:
                await self._cycle()
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug must not end publishing for the life of the gateway
                log.exception("coolant publisher: sender failed; restarting")
                self._broken = self._producer is not None  # start over with a fresh connection
                await self._backoff()

    async def _cycle(self) -> None:
        """One step: connect, recover from a failed send, wait for records, or send what is buffered."""
        if self._producer is None:
            await self._connect()
            return
        if self._broken:
            await self._reconnect_after_failure()
            return
        with self._lock:
            idle = self._idle = not self._buffer
            if idle:
                self._wake.clear()
        if idle:
            await self._wake.wait()
            with self._lock:
                self._idle = False
            self._wake.clear()
            return
        await self._drain(self._producer)

    async def _connect(self) -> None:
        producer: AIOKafkaProducer | None = None
        try:
            producer = self._producer = AIOKafkaProducer(**self._producer_args)
            await producer.start()
        except Exception as exc:
            self._producer = None
            if producer is not None:
                await self._close_producer(producer, 1.0)
            self._connected = False
            self._warn_kafka(
                "coolant publisher: cannot connect to Kafka at %s (%s); retrying in %.1f s, %d records buffered",
                self._producer_args["bootstrap_servers"], exc, self._delay, self._pending,
            )
            await self._backoff()
            return
        self._connected = True
        self._broken = False
        log.info("coolant publisher: connected to Kafka at %s", self._producer_args["bootstrap_servers"])

    async def _reconnect_after_failure(self) -> None:
        """A send failed for a transient reason: drop the connection, put the failed records back, wait."""
        producer, self._producer = self._producer, None
        self._connected = False
        if producer is not None:
            await self._close_producer(producer, 0.0)  # fails what is in flight: it comes back via _retry
            await asyncio.sleep(0)
        with self._lock:
            retry = sorted(self._retry)  # by seq: the original order
            self._retry = []
            self._buffer.extendleft(reversed(retry))
        self._broken = False
        self._warn_kafka(
            "coolant publisher: sending to Kafka failed; reconnecting in %.1f s, %d records buffered",
            self._delay, self._pending,
        )
        await self._backoff()

    async def _drain(self, producer: AIOKafkaProducer) -> None:
        n = 0
        buffer = self._buffer
        while buffer and not self._broken:
            item = buffer.popleft()
            try:
                fut = await producer.send(item.topic, item.value, key=item.key)
            except asyncio.CancelledError:
                buffer.appendleft(item)
                raise
            except Exception as exc:
                self._failed(item, exc)
                continue
            fut.add_done_callback(partial(self._delivered, item))
            n += 1
            if n % _YIELD_EVERY == 0:
                await asyncio.sleep(0)

    def _delivered(self, item: _Item, fut: asyncio.Future[Any]) -> None:
        exc = fut.exception() if not fut.cancelled() else ProducerClosed()
        if exc is None:
            with self._lock:
                self._sent += 1
                self._pending -= 1
                self._connected = True
            self._delay = self._backoff_first
            self._resolve(1)
        else:
            self._failed(item, exc)

    def _failed(self, item: _Item, exc: BaseException) -> None:
        if self._closed and (self._task is None or self._task.done()):
            with self._lock:  # stop() is closing the producer: nothing will send it again
                self._pending -= 1
                self._dropped_unavailable += 1
            self._resolve(1)
        elif _transient(exc):
            self._retry.append(item)
            if not self._broken:
                self._broken = True
                self._wake.set()
        else:
            with self._lock:
                self._errors += 1
                self._pending -= 1
                errors = self._errors
            self._resolve(1)
            self._warn_drop("coolant publisher: Kafka refused a record for %s (%r); %d errors so far",
                            item.topic, exc, errors)

    def _resolve(self, n: int) -> None:
        self._resolved += n
        if self._flush_waiters:
            for target, waiter in self._flush_waiters:
                if self._resolved >= target and not waiter.done():
                    waiter.set_result(None)

    async def _backoff(self) -> None:
        """Sleep the current reconnect delay (with ±20% jitter), then double it up to the cap.

        A flush or stop cuts the sleep short (they set the wake event).
        """
        delay = self._delay * random.uniform(0.8, 1.2)
        self._delay = min(self._delay * 2, self._backoff_max)
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), delay)
        self._wake.clear()

    @staticmethod
    async def _close_producer(producer: AIOKafkaProducer, timeout: float) -> None:
        """Close within `timeout`: if batches are still waiting for a dead broker, fail them instead."""
        closing = asyncio.ensure_future(producer.stop())
        done, _ = await asyncio.wait({closing}, timeout=timeout)
        if not done:
            accumulator = getattr(producer, "_message_accumulator", None)
            fail_all: Callable[[BaseException], None] | None = getattr(accumulator, "fail_all", None)
            if fail_all is not None:
                fail_all(KafkaConnectionError("coolant publisher closed the connection"))
            done, _ = await asyncio.wait({closing}, timeout=2.0)
        if not done:
            closing.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await closing
        elif closing.exception() is not None:
            log.debug("coolant publisher: closing the producer failed: %r", closing.exception())
