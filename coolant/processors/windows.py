"""Event-time success/failure windows (spec D1 tumbling, X1 sliding) and their discard (L3).

State is `{slot index: [successes, failures]}` where a slot is a whole 60 s window (tumbling)
or a 5 s bucket (sliding); `Options.slot_width` says which. The engine counts inline (hot path).
"""

from __future__ import annotations

from coolant.processors.policy import WINDOW_SECONDS as WINDOW
from coolant.processors.state import PathState


def counts(ps: PathState, ts: float, width: int) -> tuple[float, int, int]:
    """(window start, successes, failures) of the window the record at ts belongs to."""
    k = int(ts // width)  # floor, as §5.5 asks
    if width == WINDOW:
        s, f = ps.windows.get(k, (0, 0))
        return float(k * WINDOW), s, f
    first = k - WINDOW // width + 1
    s = f = 0
    for i in range(first, k + 1):
        cell = ps.windows.get(i)
        if cell is not None:
            s += cell[0]
            f += cell[1]
    return float(first * width), s, f


def discard(ps: PathState, late_after: float, width: int) -> None:
    """L3: drop windows, counters and seen ids no non-late record can touch. Never changes a result."""
    horizon = ps.hw - late_after
    for k in [k for k in ps.windows if (k + 1) * width <= horizon - WINDOW]:
        del ps.windows[k]
    for name in [n for n, c in ps.counters.items() if c.expires <= horizon]:
        del ps.counters[name]
    # Ids arrive roughly in ts order and a dict keeps insertion order, so the expired ones are at
    # the front: stop at the first live one. A late id behind it stays a little longer, harmlessly.
    expired = []
    for event_id, t in ps.seen.items():
        if t >= horizon:
            break
        expired.append(event_id)
    for event_id in expired:
        del ps.seen[event_id]
