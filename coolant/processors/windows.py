"""Event-time success/failure windows (spec D1 tumbling, X1 sliding), LiteLLM's counters (D7) and their discard (L3).

State is `{slot index: [successes, failures]}` where a slot is a whole 60 s window (tumbling)
or a 5 s bucket (sliding); `Options.slot_width` says which. The D7 counters are one `PodCounters`
per publishing gateway (`PathState.litellm`), counted by `bump` (LC2) in the engine and in the pod (PF, prefetch).
"""

from __future__ import annotations

from functools import partial
from itertools import islice, takewhile
from operator import gt
from typing import cast

from coolant.processors.outlier import discard as outlier_discard
from coolant.processors.policy import COUNTER_TTL
from coolant.processors.policy import WINDOW_SECONDS as WINDOW
from coolant.processors.state import ForgetsExpired, PathState, PodCounters
from coolant.schemas import Window


def slot(ts: float, width: int) -> int:
    """O5: the index of the slot (window or bucket) a record at ts counts in: the floor, as §5.5 asks."""
    return int(ts // width)


def counts(ps: PathState, ts: float, width: int) -> tuple[float, int, int]:
    """(window start, successes, failures) of the window the record at ts belongs to."""
    k = slot(ts, width)
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


def bump(pod: PodCounters, ts: float, ok: bool) -> None:
    """LC2: one counted record into a publisher's counters."""
    if ok:
        if ts >= pod.s_anchor + COUNTER_TTL:
            pod.s_anchor = ts
            pod.s_count = 1
        else:
            pod.s_count += 1
    elif ts >= pod.f_anchor + COUNTER_TTL:
        pod.f_anchor = ts
        pod.f_count = 1
    else:
        pod.f_count += 1


def spent(pod: PodCounters, horizon: float) -> bool:
    """LC5: both anchors are 60 s or more before `horizon`, so every record still in time re-anchors them."""
    return max(pod.s_anchor, pod.f_anchor) + COUNTER_TTL <= horizon


def litellm_counts(pod: PodCounters, ts: float) -> Window:
    """LC3: the counts the publisher's LiteLLM process reads at ts when it decides on its failure.

    Each counter is read as 0 once ts is 60 s or more past its anchor (LiteLLM evicts the key). The failure
    counter was just incremented by the record being decided, so it is live. `start` is the earlier anchor.
    """
    live_s = ts < pod.s_anchor + COUNTER_TTL
    return Window(min(pod.s_anchor, pod.f_anchor) if live_s else pod.f_anchor, pod.s_count if live_s else 0,
                  pod.f_count)


_FORGETS: dict[type, bool] = {}
"""Per `seen` store type: is it `ForgetsExpired`? (A runtime Protocol check costs microseconds; L3 runs per
deployment-minute.)"""


def _forgets(store: type) -> bool:
    known = _FORGETS.get(store)
    if known is None:
        known = _FORGETS[store] = issubclass(store, ForgetsExpired)
    return known


def expire_counters(ps: PathState, horizon: float) -> None:
    """L3 on the allowed-fails counters: drop those expired at `horizon`."""
    counters = ps.counters
    if counters:
        for name in [n for n, c in counters.items() if c.expires <= horizon]:
            del counters[name]


def discard(ps: PathState, late_after: float, width: int, hw: float | None = None) -> None:
    """L3: drop windows, counters and seen ids no non-late record can touch. Never changes a result. `hw`: as of
    that high-water mark instead of the state's own (the native success path ran an L3 at an earlier mark)."""
    horizon = (ps.hw if hw is None else hw) - late_after
    wins = ps.windows
    oldest = horizon - WINDOW
    for k in [k for k in wins if (k + 1) * width <= oldest]:
        del wins[k]
    expire_counters(ps, horizon)
    if ps.recent:  # the outlier profile's one-second buckets (X11)
        outlier_discard(ps, horizon)
    # D7 counters that no non-late record can read any more (the next increment re-anchors them anyway): `spent`,
    # inlined (L3 runs once per deployment-minute over every publisher; max(a, b) + t <= h is a + t <= h and
    # b + t <= h exactly, a rounded sum being monotonic in a)
    pods = ps.litellm
    for gateway in [
        g for g, c in pods.items() if c.s_anchor + COUNTER_TTL <= horizon and c.f_anchor + COUNTER_TTL <= horizon
    ]:
        del pods[gateway]
    seen = ps.seen
    if type(seen) is not dict and _forgets(type(seen)):
        cast(ForgetsExpired, seen).forget_before(horizon)
        return
    # Ids arrive roughly in ts order and a dict keeps insertion order, so the expired ones are at
    # the front: stop at the first live one. A late id behind it stays a little longer, harmlessly.
    # (`takewhile` over `horizon > t` and `islice`: the same ids as a loop that breaks at `t >= horizon`, in C.)
    expired = len(list(takewhile(partial(gt, horizon), seen.values())))
    if expired:
        for event_id in list(islice(seen, expired)):
            del seen[event_id]
