"""Event-time success/failure windows (spec D1 tumbling, X1 sliding) and their discard (L3)."""

from __future__ import annotations

from coolant.processors.state import PathState

WINDOW = 60
BUCKET = 5
"""X1 bucket width b: divides 60 and is <= 5, as the spec requires."""
_BUCKETS_PER_WINDOW = WINDOW // BUCKET


def slot(ts: float, sliding: bool) -> int:
    """Index of the window (tumbling) or bucket (sliding) holding ts; floor, as §5.5 asks."""
    return int(ts // BUCKET) if sliding else int(ts // WINDOW)


def add(ps: PathState, ts: float, ok: bool, sliding: bool) -> None:
    """O5: count one record in its window."""
    k = slot(ts, sliding)
    cell = ps.windows.get(k)
    if cell is None:
        ps.windows[k] = [1, 0] if ok else [0, 1]
    else:
        cell[0 if ok else 1] += 1


def counts(ps: PathState, ts: float, sliding: bool) -> tuple[float, int, int]:
    """(window start, successes, failures) of the window the record at ts belongs to."""
    k = slot(ts, sliding)
    if not sliding:
        s, f = ps.windows.get(k, (0, 0))
        return float(k * WINDOW), s, f
    first = k - _BUCKETS_PER_WINDOW + 1
    s = f = 0
    for i in range(first, k + 1):
        cell = ps.windows.get(i)
        if cell is not None:
            s += cell[0]
            f += cell[1]
    return float(first * BUCKET), s, f


def discard(ps: PathState, late_after: float, sliding: bool) -> None:
    """L3: drop windows, counters and seen ids no non-late record can touch. Never changes a result."""
    horizon = ps.hw - late_after
    width = BUCKET if sliding else WINDOW
    for k in [k for k in ps.windows if (k + 1) * width <= horizon - WINDOW]:
        del ps.windows[k]
    for name in [n for n, c in ps.counters.items() if c.expires <= horizon]:
        del ps.counters[name]
    for event_id in [e for e, t in ps.seen.items() if t < horizon]:
        del ps.seen[event_id]
