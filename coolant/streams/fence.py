"""The rebalance fence: which input messages may still be decided here, and waiting for the batches in hand.

A message fetched before a rebalance may belong to a partition another worker now owns, which reads it again
from the committed offset; deciding it here too would emit its cooldowns twice. A partition kept is sought back
to its commit as well, so it is read again here. So a message is stale unless it was fetched in the app's current
consumer-group generation (Faust's own rule for its streams), and while the app is still in a revoked generation
nothing is fresh. Stale messages are left undecided and unacknowledged (`coolant_records_total{disposition="stale"}`).

The next owner of a revoked partition recovers the tables from their changelogs first; only writes durable
before it reads their end offsets are in what it recovers. So a revocation waits (bounded) for the batches being
decided and flushes the producer before the group moves on; a SIGTERM waits for them before Faust's last commit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from typing import Any

from coolant.processors import Disposition
from coolant.streams import metrics
from coolant.streams.faust import current_generation, generation_of

log = logging.getLogger(__name__)


class Fence:
    """Tracks the batches being decided and the generation whose partitions were revoked."""

    def __init__(self, app: Any, *, shutdown_timeout: float, rebalance_timeout: float) -> None:
        self.app = app
        self.shutdown_timeout = shutdown_timeout
        self.rebalance_timeout = rebalance_timeout
        self.revoked: int | None = None
        """The consumer generation whose partitions were revoked, until a new one is assigned: while the app is
        still in it, every message in hand is stale."""
        self.stopping = False
        """Set on SIGTERM: batches taken from now on are left undecided (the next owner reads them)."""
        self._busy = 0
        self._idle = asyncio.Event()
        self._idle.set()
        # weak: mode keeps a class-level receiver set per signal, which would keep every fence of a process
        app.on_partitions_revoked.connect(self.on_partitions_revoked, weak=True)
        app.on_partitions_assigned.connect(self.on_partitions_assigned, weak=True)

    def split(self, topic: str, batch: list[Any]) -> tuple[list[Any], list[Any]]:
        """The batch's fresh messages (fetched in the current generation) and its stale ones (counted)."""
        generation = current_generation(self.app)
        of = generation_of
        if generation != self.revoked and of(batch[0]) == generation and of(batch[-1]) == generation:
            return batch, []  # the common case (a batch's generations only ever go one way)
        if generation == self.revoked:
            fresh, stale = [], batch
        else:
            fresh = [m for m in batch if of(m) == generation]
            stale = [m for m in batch if of(m) != generation]
        if stale:
            metrics.RECORDS.labels(topic, Disposition.STALE).inc(len(stale))
        return fresh, stale

    @contextlib.contextmanager
    def deciding(self) -> Iterator[None]:
        """Around one batch being decided (both intakes): what a revocation or a shutdown waits for."""
        self._busy += 1
        self._idle.clear()
        try:
            yield
        finally:
            self._busy -= 1
            if not self._busy:
                self._idle.set()

    async def on_partitions_revoked(self, app: Any, /, *args: Any, **_: Any) -> None:
        """A rebalance takes partitions away: let the batches in hand finish and their writes reach Kafka before
        the group moves on (Faust awaits this signal, its documented rebalance hook, before the consumer rejoins;
        `args`: the revoked partitions). Batches taken from now on hold only stale messages."""
        self.revoked = current_generation(app)
        # the group waits `rebalance_timeout` for this member to rejoin: leave room for the flush and the join
        decided = await self.wait_idle("rebalance", min(self.shutdown_timeout, self.rebalance_timeout / 2))
        await app.producer.flush()
        if decided and args and args[0]:
            log.info("rebalance: batches in hand decided and flushed (%d partitions revoked)", len(args[0]))

    async def on_partitions_assigned(self, app: Any, /, *args: Any, **_: Any) -> None:
        """The new assignment is in place (the revoked generation's fence already fell when the consumer took
        the new generation; this also ends it should a group made again reuse the number)."""
        self.revoked = None

    async def wait_idle(self, why: str, timeout: float) -> bool:
        """Wait (up to `timeout` seconds) until no batch is being decided; False if one still was."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except TimeoutError:
            log.warning("%s: a batch was still being decided after %.0f s; its records will be decided again "
                        "by the next owner", why, timeout)
            return False
        return True
