"""Per-deployment path states kept in changelogged Faust tables, so a restarted worker resumes.

Two tables per path, both keyed so a deployment's entries live in its source partition:
- `<path>-state`: deployment id -> PathState JSON (everything but the seen ids);
- `<path>-seen`: deployment id + chunk number -> {event_id: ts} of the ids one flush added.
Seen ids are chunked because a deployment holds minutes of them: rewriting them all would cost
more the hotter the deployment; a chunk is written once and deleted when its newest id expired.

Writes are coalesced: agents `touch` what a record changed and `flush` once per batch, so a busy
deployment costs one changelog write per batch, not per record. A flush runs after the batch's
cooldowns were sent, so a crash in between re-decides those records instead of losing cooldowns.
Writes name the partition explicitly (the source record's), which is what lets them happen
outside Faust's per-event iteration.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping
from typing import Any

import orjson

from coolant.processors.state import PathState

SEP = b"\x1f"


def sized(value: bytes) -> bytes:
    """A copy of `value` in an allocation of its own size: orjson (3.x) returns each result in a buffer of about
    4 KB however short it is, and a table holds hundreds of thousands of them (645 MB in one profile)."""
    return bytes(memoryview(value))


class SeenView(MutableMapping[str, float]):
    """One deployment's seen ids, stored as append-only chunks and forgotten chunk by chunk (L3).

    Each flush writes the ids added since the previous flush as one new chunk (so a write costs what it adds,
    however hot the deployment). In memory a view keeps a set of the ids and each chunk's newest ts; a chunk is
    forgotten (its ids dropped, its table entry deleted) once its newest id is past the horizon, reading the
    chunk's ids back from the table then. So a live id costs its string and a set slot, and the table holds
    about `late_after` seconds of event time of ids: at the live rate, whatever the catch-up speed.
    """

    def __init__(self, chunk_ids: Callable[[int], dict[str, float] | None] = lambda _: None) -> None:
        self._chunk_ids = chunk_ids
        """Reads a stored chunk's {event_id: ts} back (from the table), to forget its ids."""
        self._ids: set[str] = set()
        self._newest: dict[int, float] = {}
        """chunk number -> newest ts among its ids, for the chunks not forgotten yet."""
        self._new: dict[str, float] = {}
        self._emptied: list[int] = []
        self._first = 0
        """No chunk below this number is live: the state records the span [first, next), not a growing list."""
        self._next = 0

    def load_chunk(self, chunk: int, ids: dict[str, float]) -> None:
        self._ids.update(ids)
        self._newest[chunk] = max(ids.values(), default=float("-inf"))
        self._next = max(self._next, chunk + 1)

    def loaded(self, next_: int) -> None:
        """After `load_chunk` of the chunks found in a stored span: numbering resumes at the span's end."""
        self._next = max(self._next, next_)
        self._first = min(self._newest, default=self._next)

    def forget_before(self, horizon: float) -> None:
        """Forget the oldest chunks whose every id has `ts < horizon`, up to the first one still live (ids arrive
        roughly in ts order; a late id in a later chunk stays a little longer, harmlessly)."""
        while self._first < self._next:
            newest = self._newest.get(self._first)
            if newest is not None:
                if newest >= horizon:
                    return
                del self._newest[self._first]
                self._ids.difference_update(self._chunk_ids(self._first) or ())
                self._emptied.append(self._first)
            self._first += 1

    def __getitem__(self, event_id: str) -> float:
        """Not on the hot path (the engine only asks `in`): read back from the chunks."""
        if event_id in self._new:
            return self._new[event_id]
        if event_id in self._ids:
            for chunk in self._newest:
                ts = (self._chunk_ids(chunk) or {}).get(event_id)
                if ts is not None:
                    return ts
        raise KeyError(event_id)

    def __contains__(self, event_id: object) -> bool:
        return event_id in self._ids

    def __setitem__(self, event_id: str, ts: float) -> None:
        self._ids.add(event_id)
        self._new[event_id] = ts

    def __delitem__(self, event_id: str) -> None:
        """Forget one id now (its chunk, if flushed, still holds it until the chunk is forgotten)."""
        self._ids.remove(event_id)
        self._new.pop(event_id, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)

    def span(self) -> list[int]:
        """`[first, next)`: every live chunk's number is in it (ids expire roughly in order, so it stays short)."""
        return [self._first, self._next]

    def drain(self) -> list[tuple[int, dict[str, float] | None]]:
        """Chunks to write: the new ids as one chunk, and None for each chunk forgotten."""
        out: list[tuple[int, dict[str, float] | None]] = [(c, None) for c in self._emptied]
        self._emptied.clear()
        if self._new:
            chunk, self._next = self._next, self._next + 1
            self._newest[chunk] = max(self._new.values())
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
        view = SeenView(self._chunk_reader(key))
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

    def _chunk_reader(self, key: bytes) -> Callable[[int], dict[str, float] | None]:
        data = self.seen_table.data

        def read(chunk: int) -> dict[str, float] | None:
            raw = data.get(key + SEP + str(chunk).encode())
            return None if raw is None else orjson.loads(raw)

        return read

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
                    chunk_value = sized(orjson.dumps(ids))
                    self.seen_table.data[chunk_key] = chunk_value
                    await producer.send(seen_topic, chunk_key, chunk_value, partition, None, None)
                writes += 1
            value = sized(orjson.dumps({"state": ps.to_dict(), "span": view.span()}))
            self.state_table.data[key] = value
            self._states[deployment_id] = (ps, value)
            await producer.send(state_topic, key, value, partition, None, None)
            writes += 1
        self._dirty.clear()
        return writes

    def reset(self) -> None:
        """After a rebalance's recovery: forget cached objects (the identity check would catch them too)."""
        self._states.clear()
