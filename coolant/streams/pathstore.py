"""Per-deployment path states kept in changelogged Faust tables, so a restarted worker resumes.

Two tables per path, both keyed so a deployment's entries live in its source partition:
- `<path>-state`: deployment id -> PathState JSON (everything but the seen ids);
- `<path>-seen`: deployment id + chunk number -> {event_id: ts} of the ids one flush added.
Seen ids are chunked because a deployment holds minutes of them: rewriting them all would cost
more the hotter the deployment; a chunk is written once and deleted when all its ids expired.

Writes are coalesced: agents `touch` what a record changed and `flush` once per batch, so a busy
deployment costs one changelog write per batch, not per record. A flush runs after the batch's
cooldowns were sent, so a crash in between re-decides those records instead of losing cooldowns.
Writes name the partition explicitly (the source record's), which is what lets them happen
outside Faust's per-event iteration.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from typing import Any

import orjson

from coolant.processors.state import PathState

SEP = b"\x1f"


class SeenView(MutableMapping[str, float]):
    """One deployment's seen ids (event_id -> ts), stored as append-only chunks.

    Each flush writes the ids added since the previous flush as one new chunk (so a write costs
    what it adds, however hot the deployment), and a chunk is deleted once all its ids were
    discarded (L3), so the table holds about `late_after` seconds of ids.
    """

    def __init__(self) -> None:
        self._ids: dict[str, float] = {}
        self._chunk_of: dict[str, int] = {}
        self._live: dict[int, int] = {}
        """chunk number -> ids of it still held."""
        self._new: dict[str, float] = {}
        self._emptied: list[int] = []
        self._first = 0
        """No chunk below this number is live: the state records the span [first, next), not a growing list."""
        self._next = 0

    def load_chunk(self, chunk: int, ids: dict[str, float]) -> None:
        self._ids.update(ids)
        for event_id in ids:
            self._chunk_of[event_id] = chunk
        self._live[chunk] = len(ids)
        self._next = max(self._next, chunk + 1)

    def loaded(self, next_: int) -> None:
        """After `load_chunk` of the chunks found in a stored span: numbering resumes at the span's end."""
        self._next = max(self._next, next_)
        self._first = min(self._live, default=self._next)

    def __getitem__(self, event_id: str) -> float:
        return self._ids[event_id]

    def __contains__(self, event_id: object) -> bool:
        return event_id in self._ids

    def __setitem__(self, event_id: str, ts: float) -> None:
        self._ids[event_id] = ts
        self._new[event_id] = ts

    def __delitem__(self, event_id: str) -> None:
        del self._ids[event_id]
        chunk = self._chunk_of.pop(event_id, None)
        if chunk is None:  # not flushed yet
            del self._new[event_id]
            return
        self._live[chunk] -= 1
        if not self._live[chunk]:
            del self._live[chunk]
            self._emptied.append(chunk)
            while self._first < self._next and self._first not in self._live:
                self._first += 1

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)

    def span(self) -> list[int]:
        """`[first, next)`: every live chunk's number is in it (ids expire roughly in order, so it stays short)."""
        return [self._first, self._next]

    def drain(self) -> list[tuple[int, dict[str, float] | None]]:
        """Chunks to write: the new ids as one chunk, and None for each chunk now empty."""
        out: list[tuple[int, dict[str, float] | None]] = [(c, None) for c in self._emptied]
        self._emptied.clear()
        if self._new:
            chunk, self._next = self._next, self._next + 1
            self.load_chunk(chunk, self._new)
            out.append((chunk, self._new))
            self._new = {}
        return out


class PathStore:
    """Load, mark and persist `PathState`s by deployment id over a state table and a seen table.

    A state's table value is `{"state": …, "span": [first, next)}` (the numbers its seen chunks may
    have), so a deployment loads with exactly its seen ids. Loaded states are cached as objects
    together with the table value they came from; a value replaced behind our back (changelog
    recovery, a standby promoted after a rebalance) is a different object, so the next load
    rebuilds from the table.
    """

    def __init__(self, state_table: Any, seen_table: Any) -> None:
        self.state_table = state_table
        self.seen_table = seen_table
        self._states: dict[str, tuple[PathState, bytes | None]] = {}
        self._dirty: dict[str, tuple[PathState, int]] = {}

    def load(self, deployment_id: str) -> PathState:
        dirty = self._dirty.get(deployment_id)
        if dirty is not None:  # changed in this batch: ours is newer than anything in the table
            return dirty[0]
        key = deployment_id.encode()
        raw = self.state_table.data.get(key)
        cached = self._states.get(deployment_id)
        if cached is not None and cached[1] is raw:
            return cached[0]
        view = SeenView()
        if raw is None:
            ps = PathState()
        else:
            stored = orjson.loads(raw)
            ps = PathState.from_dict(stored["state"])
            first, next_ = stored["span"]
            for chunk in range(first, next_):
                ids = self.seen_table.data.get(key + SEP + str(chunk).encode())
                if ids is not None:
                    view.load_chunk(chunk, orjson.loads(ids))
            view.loaded(next_)
        ps.seen = view
        self._states[deployment_id] = (ps, raw)
        return ps

    def peek(self, deployment_id: str) -> PathState | None:
        """A read-only look (the admin API): this batch's state, else the table's without its seen ids, else None.

        Unlike `load` it builds nothing an agent would reuse and reads no seen chunks.
        """
        dirty = self._dirty.get(deployment_id)
        if dirty is not None:
            return dirty[0]
        raw = self.state_table.data.get(deployment_id.encode())
        return None if raw is None else PathState.from_dict(orjson.loads(raw)["state"])

    def touch(self, deployment_id: str, ps: PathState, partition: int) -> None:
        """Mark the deployment's state changed by a record from `partition`."""
        self._dirty[deployment_id] = (ps, partition)

    async def flush(self, producer: Any) -> int:
        """Write every touched state and its changed seen chunks; returns the number of writes.

        Sent with the app's Kafka producer directly rather than through `Table.__setitem__`:
        Faust's per-message changelog path cost more than the whole decision. Faust flushes that
        producer before it commits offsets, so a committed record's state is always durable.
        """
        writes = 0
        state_topic = self.state_table.changelog_topic.get_topic_name()
        seen_topic = self.seen_table.changelog_topic.get_topic_name()
        for deployment_id, (ps, partition) in self._dirty.items():
            key = deployment_id.encode()
            view = ps.seen
            assert isinstance(view, SeenView)
            for chunk, ids in view.drain():
                chunk_key = key + SEP + str(chunk).encode()
                if ids is None:
                    self.seen_table.data.pop(chunk_key, None)
                    await producer.send(seen_topic, chunk_key, None, partition, None, None)
                else:
                    chunk_value = orjson.dumps(ids)
                    self.seen_table.data[chunk_key] = chunk_value
                    await producer.send(seen_topic, chunk_key, chunk_value, partition, None, None)
                writes += 1
            value = orjson.dumps({"state": ps.to_dict(), "span": view.span()})
            self.state_table.data[key] = value
            self._states[deployment_id] = (ps, value)
            await producer.send(state_topic, key, value, partition, None, None)
            writes += 1
        self._dirty.clear()
        return writes

    def reset(self) -> None:
        """After a rebalance's recovery: forget cached objects (the identity check would catch them too)."""
        self._states.clear()
