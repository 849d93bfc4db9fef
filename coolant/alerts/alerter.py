"""The `coolant alerts` loop: read the alert topics as a consumer group, announce, commit what is done.

Records are handled one at a time and a record's offset is marked done only after every notice it caused
was delivered or given up on (the sender returns either way), so a commit never passes an alert still in
flight; commits happen before each webhook post, after each poll, on rebalance and on shutdown. A restart
therefore resumes after the last finished record and does not alert again. What lives only in memory and
is lost on restart: pending recovery notices (a cooldown read before the restart gets no "cooldown over")
and the flap suppression counts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiokafka import TopicPartition
from aiokafka.errors import CommitFailedError, KafkaError

from coolant.alerts import feed
from coolant.alerts.notices import AlertState, Notice, on_record, on_tick
from coolant.alerts.recovery import next_due
from coolant.alerts.slack import Payload

log = logging.getLogger(__name__)

Send = Callable[[Payload, str], Awaitable[bool]]
"""Post one payload (described by the str, for logs); True when delivered, False when given up on."""

POLL_MS = 1000
BATCH = 100


@dataclass(slots=True)
class AlertStats:
    records: int = 0
    invalid: int = 0
    sent: int = 0
    suppressed: int = 0
    failed: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AlertOptions:
    client_args: dict[str, Any]
    topics: list[str]
    prefix: str
    group: str = "coolant-alerts"
    suppress_period: float = 300.0
    from_beginning: bool = False
    commit: bool = True
    """False for --dry-run: a trial run must not move the group past records it never really announced."""


class Alerter:
    def __init__(self, opts: AlertOptions, send: Send, clock: Callable[[], float] = time.time) -> None:
        self.opts = opts
        self.send = send
        self.clock = clock
        self.state = AlertState()
        self.stats = AlertStats()
        self.assigned = asyncio.Event()
        """Set once the group has given this member its partitions (tests wait for it)."""
        self._done: dict[TopicPartition, int] = {}
        self._committed: dict[TopicPartition, int] = {}
        self._consumer: Any = None

    async def open(self) -> None:
        """Create missing topics and join the group (the caller bounds how long this may take)."""
        await feed.ensure(self.opts.prefix, self.opts.topics, self.opts.client_args)
        self._consumer = await feed.open_group(
            self.opts.client_args, self.opts.topics, self.opts.group, self.opts.from_beginning,
            self._on_revoked, self._on_assigned,
        )

    async def serve(self) -> AlertStats:
        """Announce until cancelled; commits what is done and leaves the group on the way out."""
        if self._consumer is None:
            await self.open()
        try:
            while True:
                await self._poll_once()
        finally:
            with contextlib.suppress(Exception):
                await self._commit()
            await self._consumer.stop()

    async def _poll_once(self) -> None:
        wait_ms = POLL_MS
        due = next_due(self.state.recoveries)
        if due is not None:
            wait_ms = int(min(POLL_MS, max(0.0, due - self.clock()) * 1000))
        batches = await self._consumer.getmany(timeout_ms=wait_ms, max_records=BATCH)
        for tp, messages in batches.items():
            for msg in messages:
                await self._handle(feed.decode_message(msg.topic, msg.partition, msg.offset, msg.value))
                self._done[tp] = msg.offset + 1
        await self._commit()
        self.state, notices = on_tick(self.state, self.clock(), self.opts.suppress_period)
        for notice in notices:
            await self._announce(notice)

    async def _handle(self, msg: feed.Decoded) -> None:
        self.stats.records += 1
        if msg.record is None:
            self.stats.invalid += 1
            log.warning("%s: skipped, not a valid record: %s", msg.where, msg.invalid)
            return
        self.state, notices = on_record(self.state, msg.record, self.clock(), self.opts.suppress_period)
        for notice in notices:
            await self._announce(notice)

    async def _announce(self, notice: Notice) -> None:
        what = f"{notice.kind} alert for {notice.deployment_id}"
        if notice.payload is None:
            self.stats.suppressed += 1
            log.info("%s suppressed (flapping)", what)
            return
        await self._commit()  # what is finished is committed before waiting on the network (and maybe retries)
        if await self.send(notice.payload, what):
            self.stats.sent += 1
            self.stats.by_kind[notice.kind] = self.stats.by_kind.get(notice.kind, 0) + 1
        else:
            self.stats.failed += 1

    async def _commit(self, only: set[TopicPartition] | None = None) -> None:
        if not self.opts.commit or self._consumer is None:
            return
        todo = {tp: o for tp, o in self._done.items() if self._committed.get(tp) != o and (only is None or tp in only)}
        if not todo:
            return
        try:
            await self._consumer.commit(todo)
        except (CommitFailedError, KafkaError) as exc:  # rebalanced away: the new owner re-reads these records
            log.warning("commit failed (%s): records after the last commit may be announced again", exc)
            return
        self._committed.update(todo)

    async def _on_revoked(self, revoked: set[TopicPartition]) -> None:
        await self._commit(revoked)
        for tp in revoked:
            self._done.pop(tp, None)
            self._committed.pop(tp, None)

    async def _on_assigned(self, assigned: set[TopicPartition]) -> None:
        if assigned:
            log.info("assigned %d partitions of %s", len(assigned), ", ".join(self.opts.topics))
            self.assigned.set()
