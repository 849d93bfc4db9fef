"""Per-deployment path states kept in changelogged Faust tables, so a restarted worker resumes.

Two tables per path: `<path>-state` (deployment -> PathState JSON, without seen ids) and
`<path>-seen` (deployment + event_id -> ts). Seen ids live apart because a deployment holds
minutes of them and rewriting them all on every record would be quadratic. States are cached
as objects; values are serialized when saved, so the changelog holds a consistent snapshot.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from typing import Any

import orjson

from coolant.processors.state import PathState

SEP = b"\x1f"


class SeenView(MutableMapping[str, float]):
    """One deployment's seen ids: a dict mirror for lookups, table writes queued until `flush`.

    Queuing lets the agent make a cooldown durable before the id that triggered it is, so a crash
    between the two re-decides the record instead of losing its cooldown.
    """

    def __init__(self, prefix: bytes, table: Any) -> None:
        self._prefix = prefix
        self._table = table
        self._ids: dict[str, float] = {}
        self._pending: list[tuple[str, float | None]] = []

    def load(self, event_id: str, ts: float) -> None:
        self._ids[event_id] = ts

    def __getitem__(self, event_id: str) -> float:
        return self._ids[event_id]

    def __contains__(self, event_id: object) -> bool:
        return event_id in self._ids

    def __setitem__(self, event_id: str, ts: float) -> None:
        self._ids[event_id] = ts
        self._pending.append((event_id, ts))

    def __delitem__(self, event_id: str) -> None:
        del self._ids[event_id]
        self._pending.append((event_id, None))

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)

    def flush(self) -> None:
        table = self._table
        for event_id, ts in self._pending:
            key = self._prefix + event_id.encode()
            if ts is None:
                table.pop(key, None)
            else:
                table[key] = repr(ts).encode()
        self._pending.clear()


class PathStore:
    """Load and save `PathState`s by deployment id over a state table and a seen table."""

    def __init__(self, state_table: Any, seen_table: Any) -> None:
        self.state_table = state_table
        self.seen_table = seen_table
        self._states: dict[str, PathState] = {}
        self._views: dict[str, SeenView] = {}

    def _view(self, deployment_id: str) -> SeenView:
        view = self._views.get(deployment_id)
        if view is None:
            view = self._views[deployment_id] = SeenView(deployment_id.encode() + SEP, self.seen_table)
        return view

    def load(self, deployment_id: str) -> PathState:
        ps = self._states.get(deployment_id)
        if ps is None:
            raw = self.state_table.get(deployment_id.encode())
            view = self._view(deployment_id)
            ps = PathState() if raw is None else PathState.from_dict(orjson.loads(raw))
            ps.seen = view
            self._states[deployment_id] = ps
        return ps

    def save(self, deployment_id: str, ps: PathState) -> None:
        self.state_table[deployment_id.encode()] = orjson.dumps(ps.to_dict())
        view = ps.seen
        assert isinstance(view, SeenView)
        view.flush()

    def reset(self) -> None:
        """After a rebalance's recovery: forget cached objects and rebuild seen ids from the table."""
        self._states.clear()
        self._views.clear()
        for key, value in self.seen_table.items():
            dep, _, event_id = bytes(key).partition(SEP)
            self._view(dep.decode()).load(event_id.decode(), float(value))
