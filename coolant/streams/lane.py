"""Input records handed from the Faust consumer to the deciders in batches, not event by event.

Faust delivers each message through its conductor, a stream queue, the stream's processors and
a per-event ack: on these machines that machinery alone tops out near 7k records/s, well below
what the policy core decides. The outcome and health topics bypass it: the consumer's callback
appends their messages to a `Lane`, and one task per lane takes everything pending at once,
decides it, persists the touched states, and only then acknowledges the messages, so a committed
offset still means "decided and durable". Everything else (subscription, partition assignment,
table recovery, offset commits, seeks) stays Faust's.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

MAX_PENDING = 10_000
"""Back-pressure: the consumer waits while this many messages are pending (a few hundred ms of work)."""
FILL = 1000
FILL_WITHIN = 0.001
"""A batch smaller than FILL waits up to FILL_WITHIN seconds for more: the consumer hands over one message at a
time, and a decider woken by the first would otherwise decide (and persist state) for batches of one or two."""
YIELD_EVERY = 64
"""Records (or states) a batch's loops go through between yields to the event loop (`if not n % YIELD_EVERY:
await asyncio.sleep(0)`, inline: an async generator would cost more per record than the check). A batch is CPU
work with no wait inside (a send does not wait for the broker), and a worker that fell behind takes thousands at
once: without a yield, the fetch loop's hand-over, the replies of the early Redis writes and every other task
waited for the whole batch, so every record's latency carried the batch's size."""


class Lane:
    """A batch hand-off: `put` one message (from the consumer), `take` all pending ones (the decider's task)."""

    def __init__(self, max_pending: int = MAX_PENDING, fill: int = FILL, fill_within: float = FILL_WITHIN) -> None:
        self.max_pending = max_pending
        self.fill = fill
        self.fill_within = fill_within
        self._pending: list[Any] = []
        self._ready = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self._first_put = 0.0
        self.arrived = 0.0
        """When the first message of the batch `take` returned last was put (epoch seconds): a stage of
        `metrics.COOLDOWN_STAGES`, read once per batch."""

    async def put(self, message: Any) -> None:
        if not self._pending:
            self._first_put = time.time()
        self._pending.append(message)
        self._ready.set()
        if len(self._pending) >= self.max_pending:
            self._room.clear()
            await self._room.wait()

    async def take(self) -> list[Any]:
        """Everything pending, once there is something (and a moment to gather more when there is little)."""
        await self._ready.wait()
        if len(self._pending) < self.fill:
            await asyncio.sleep(self.fill_within)
        batch, self._pending = self._pending, []
        self.arrived = self._first_put
        self._ready.clear()
        self._room.set()
        return batch

    def clear(self) -> None:
        """A rebalance revoked partitions: drop what is pending (the new owners read it from the committed offsets,
        and partitions kept are sought back to them too)."""
        self._pending = []
        self._ready.clear()
        self._room.set()

    def wake(self) -> None:
        """Let a waiting `take` return (with nothing, if nothing is pending): the worker is stopping."""
        self._ready.set()

    def __len__(self) -> int:
        return len(self._pending)
