"""Per-deployment decision state (spec §2.5), as plain mutable data.

The engine receives a state object explicitly and updates it in place; it holds no state of
its own. Replay keeps states in a dict; the live agent persists them in Faust tables.
`seen` is any mutable mapping so the live shell can back it with its own store.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

NEG_INF = float("-inf")


@runtime_checkable
class ForgetsExpired(Protocol):
    """A `seen` store that forgets expired ids itself (L3), in whatever units it keeps them.

    It may keep an id longer than `hw - late_after` (harmless: L1 drops any later copy as late) but never
    forget one sooner; replay's plain dict is swept id by id instead.
    """

    def forget_before(self, horizon: float) -> None: ...


@dataclass(slots=True)
class Counter:
    """A V1 allowed-fails counter (C1-C2): anchored at its first failure, never refreshed."""

    anchor: float
    expires: float
    count: int


@dataclass(frozen=True, slots=True)
class HealthState:
    """H1: the latest probe's verdict, in LiteLLM's health-state map format."""

    is_healthy: bool
    timestamp: float
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"is_healthy": self.is_healthy, "timestamp": self.timestamp, "reason": self.reason}


@dataclass(slots=True)
class Hold:
    """RC1-RC4 (docs/probe.md, recovery that probes): a cooled deployment's probe evidence, request path only."""

    since: float | None = None
    """The first failing probe of the hold in force (RC3's bound counts from it); None: no hold."""
    good: int = 0
    """Healthy probes in a row while cooled (RC4)."""

    def to_list(self) -> list[Any]:
        return [self.since, self.good]


@dataclass(slots=True)
class PodCounters:
    """LiteLLM's `<id>:successes` and `<id>:fails` in one process (D7): each anchored at its first increment."""

    s_anchor: float = NEG_INF
    s_count: int = 0
    f_anchor: float = NEG_INF
    f_count: int = 0


@dataclass(slots=True)
class PathState:
    """One of a deployment's two independent state sets: request path or health path (D6)."""

    hw: float = NEG_INF
    windows: dict[int, list[int]] = field(default_factory=dict)
    """Window (tumbling) or bucket (sliding) index -> [successes, failures]."""
    counters: dict[str, Counter] = field(default_factory=dict)
    end: float | None = None
    streak: int = 0
    seen: MutableMapping[str, float] = field(default_factory=dict)
    """event_id -> ts, for duplicate detection (L2)."""
    gc_next: float = NEG_INF
    """When the next discard pass (L3) is due: the start of the event-time minute after the last one."""
    probe: HealthState | None = None
    """Health path only: the latest probe's verdict (H1)."""
    probation: bool = False
    """X7: a backed-off cooldown was emitted and no success has been seen since."""
    litellm: dict[str, PodCounters] = field(default_factory=dict)
    """Request path only: per publisher (`gateway`), the counters that LiteLLM process keeps (D7, LC1-LC3)."""
    hold: Hold | None = None
    """Request path only, recovery that probes (RC1-RC4): None until a probe of a cooled deployment arrives."""
    in_row: int = 0
    """Outlier profile (X10): the deployment's counted failures since its last answer no older than the first of
    them (X10.4), in partition order."""
    in_row_since: float = NEG_INF
    """X10: the ts of the first of those failures (the cooldown's `window.start`)."""
    in_row_began: float = NEG_INF
    """X10.5: when the first of those failures' attempt began (its ts less its latency)."""
    recent: dict[int, list[int]] = field(default_factory=dict)
    """Outlier profile (X11): one-second bucket index -> [other outcomes, counted failures]."""

    def to_dict(self) -> dict[str, Any]:
        """Everything but `seen`, which the live shell stores separately, as JSON-able data. `hold` is written
        only when set, so a state without probe recovery is stored exactly as before it existed."""
        out = {
            "hw": None if self.hw == NEG_INF else self.hw,
            "windows": [[k, v[0], v[1]] for k, v in self.windows.items()],
            "counters": {k: [c.anchor, c.expires, c.count] for k, c in self.counters.items()},
            "end": self.end,
            "streak": self.streak,
            "gc_next": None if self.gc_next == NEG_INF else self.gc_next,
            "probe": None if self.probe is None else self.probe.to_dict(),
            "probation": self.probation,
            "litellm": {
                gw: [_opt(c.s_anchor), c.s_count, _opt(c.f_anchor), c.f_count] for gw, c in self.litellm.items()
            },
        }
        if self.hold is not None:
            out["hold"] = self.hold.to_list()
        if self.in_row or self.recent:  # the outlier profile's, likewise only when it holds something
            outlier: dict[str, Any] = {"in_row": self.in_row, "since": _opt(self.in_row_since),
                                       "recent": [[k, v[0], v[1]] for k, v in self.recent.items()]}
            if self.in_row_began != NEG_INF:  # X10.5's, written only when known: older states read the same
                outlier["began"] = self.in_row_began
            out["outlier"] = outlier
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any], seen: MutableMapping[str, float] | None = None) -> PathState:
        """The inverse of `to_dict`. A state stored before D7 has no "litellm" entry: its counters start empty,
        so the first record after an upgrade anchors them (LC1), as a restarted LiteLLM process would. One stored
        by the first D7 version holds a single list: the counters of every publisher together."""
        pods = d.get("litellm") or {}
        if isinstance(pods, list):
            pods = {"": pods}
        outlier = d.get("outlier") or {}
        return cls(
            NEG_INF if d["hw"] is None else d["hw"],
            {int(k): [s, f] for k, s, f in d["windows"]},
            {k: Counter(a, e, c) for k, (a, e, c) in d["counters"].items()},
            d["end"],
            d["streak"],
            {} if seen is None else seen,
            NEG_INF if d["gc_next"] is None else d["gc_next"],
            None if (p := d.get("probe")) is None else HealthState(p["is_healthy"], p["timestamp"], p["reason"]),
            bool(d.get("probation", False)),
            {gw: PodCounters(NEG_INF if sa is None else sa, sc, NEG_INF if fa is None else fa, fc)
             for gw, (sa, sc, fa, fc) in pods.items()},
            None if (h := d.get("hold")) is None else Hold(h[0], h[1]),
            in_row=outlier.get("in_row", 0),
            in_row_since=NEG_INF if outlier.get("since") is None else outlier["since"],
            in_row_began=outlier.get("began", NEG_INF),
            recent={int(k): [n, f] for k, n, f in outlier.get("recent", ())},
        )


def _opt(t: float) -> float | None:
    return None if t == NEG_INF else t


@dataclass(slots=True)
class DeploymentState:
    """Both paths of one deployment, as the offline engine keeps them."""

    request: PathState = field(default_factory=PathState)
    health: PathState = field(default_factory=PathState)
    counted: int = 0
    """Records whose step only counted them, which `Engine.feed_all` yields no step for (FP1)."""
