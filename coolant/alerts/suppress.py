"""Flap suppression: at most one alert per deployment per period, as a pure state machine.

The state is an immutable mapping from deployment id to `Entry`; `decide` returns the next state and a
`Verdict` without side effects, and the caller passes the clock in (`now`, epoch seconds), so tests drive
time by hand. Held-back alerts are counted and the next alert that goes out reports the count.

One exception keeps the channel truthful: a recovery (cooldown over, health back) that answers a trouble
alert which went out is always sent and does not start a new period. Without it a flapping deployment
would be left showing "cooled" in the channel after it came back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Literal

Feed = Literal["cooldown", "health"]
"""Which topic an alert comes from; a recovery answers the trouble alert of the same feed."""


@dataclass(frozen=True, slots=True)
class Entry:
    last_sent: float
    """When the last alert for this deployment that started a period went out (epoch seconds)."""
    suppressed: int = 0
    """Alerts held back since the last one that went out."""
    open: frozenset[Feed] = frozenset()
    """Feeds whose trouble alert went out and has not been answered by a recovery yet."""


State = Mapping[str, Entry]


@dataclass(frozen=True, slots=True)
class Verdict:
    send: bool
    suppressed: int
    """When `send`: how many similar alerts were held back before this one (to say so in it)."""


def decide(
    state: State, deployment_id: str, feed: Feed, recovery: bool, now: float, period: float
) -> tuple[dict[str, Entry], Verdict]:
    """Whether an alert for `deployment_id` goes out now, and the state after it (assuming it goes out)."""
    out = dict(state)
    entry = state.get(deployment_id)
    if recovery and entry is not None and feed in entry.open:
        out[deployment_id] = replace(entry, suppressed=0, open=entry.open - {feed})
        return out, Verdict(True, entry.suppressed)
    if entry is None or now - entry.last_sent >= period or now < entry.last_sent:
        held = entry.suppressed if entry is not None else 0
        still_open = entry.open if entry is not None else frozenset[Feed]()
        opened = still_open - {feed} if recovery else still_open | {feed}
        out[deployment_id] = Entry(last_sent=now, suppressed=0, open=opened)
        return out, Verdict(True, held)
    out[deployment_id] = replace(entry, suppressed=entry.suppressed + 1)
    return out, Verdict(False, 0)


def prune(state: State, now: float, period: float) -> dict[str, Entry]:
    """Drop entries that no longer change any decision (period over, nothing held back, nothing open)."""
    return {
        k: e for k, e in state.items() if e.suppressed or e.open or (0 <= now - e.last_sent < period)
    }
