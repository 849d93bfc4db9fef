"""Faust's table recovery, watched: a one-line state for the stall log, and the rewind of a changelog partition
whose records recovery never received.

Faust's `getmany` drops a fetched batch when flow control stopped while the fetch was in flight (a rebalance), and
for a changelog partition nothing seeks back (it has no committed offset), so aiokafka's position can be past
records recovery waits for, forever. Seen: recovery at -1 of 9 on a `request-state` partition, read offset none,
fetch position 10 (docs/faust-boundary.md §3). Reads `tables.recovery`'s `in_recovery`, `active_remaining()`,
`active_offsets`, `active_highwaters`, the consumer's `_read_offset` and aiokafka's positions and paused
partitions; seeks with Faust's `Consumer.seek`.
"""

from __future__ import annotations

import logging
from typing import Any

from coolant.streams import metrics

log = logging.getLogger(__name__)


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
