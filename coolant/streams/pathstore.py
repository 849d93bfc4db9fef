"""Per-deployment path states kept in changelogged Faust tables, so a restarted worker resumes.

Two tables per path, both keyed so a deployment's entries live in its source partition:
- `<path>-state`: deployment id -> `{"state": PathState JSON without the seen ids, "buckets": [...],
  "counts": [...], "unsure": {...}}` (the buckets it knows, how many ids of each, ids not yet durable in them);
- `<path>-seen`: deployment id + "@" + bucket -> {event_id: ts} of the ids whose ts falls in that bucket
  (SEEN_BUCKET seconds of event time).
Seen ids are bucketed by event time so that what is kept is what L2 needs: about `late_after` seconds of
event time per deployment, whatever the catch-up speed, forgotten a whole bucket at a time (L3). A flush
rewrites only the buckets that got new ids (at live rates the newest one or two).

Writes are coalesced: agents `touch` what a record changed and `flush` once per batch, so a busy
deployment costs one changelog write per batch, not per record. A flush runs after the batch's
cooldowns were sent, so a crash in between re-decides those records instead of losing cooldowns.
The state and its buckets are on two changelog topics, so either can be durable without the other: see
`SeenView` for how what a new owner loads stays consistent (`counts`, `unsure`, late tombstones).
Writes name the partition explicitly (the source record's), which is what lets them happen
outside Faust's per-event iteration (`faust/tables.py`).
"""

from __future__ import annotations

import asyncio
import functools
import itertools
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any

import orjson

from coolant.processors.seen import SeenHashes
from coolant.processors.state import PathState
from coolant.streams.faust import RawTable, sized
from coolant.streams.lane import YIELD_EVERY

SEP = b"\x1f"


SEEN_BUCKET = 20.0
"""Seconds of event time per stored bucket of seen ids: about ten buckets live per deployment at the default
`late_after` (180 s); wider buckets cost less per id, but a flush rewrites a hot deployment's whole bucket."""


HOLD = 64
"""New ids of a deployment's newest bucket that its state value carries before the bucket itself is written."""


def bucket_key(key: bytes, bucket: int) -> bytes:
    return key + SEP + b"@" + str(bucket).encode()


class SeenView(MutableMapping[str, float]):
    """One deployment's seen ids (L2): their hashes in memory, the ids stored by event-time bucket, forgotten bucket
    by bucket.

    In memory a live id is only its `hash()` (a 64-bit int, this process's) in a `SeenHashes` (16 B an id, grouped
    by bucket, so forgetting a bucket reads nothing back); the ids themselves are only in the stored buckets (and
    `_new` until they are written). `ts` is kept only in the stored buckets. Two ids of one deployment's late
    window sharing a hash would make the second a false duplicate: at most n / 2**64 per record for n live ids of
    that deployment (under 1e-13 at 10^6 ids), against L2's exact dict in replay.

    The state value and the buckets are on two changelog topics, so a crash can leave either durable without the
    other. Three rules keep what a new owner loads consistent with the state it loads:
    - a bucket's stored ids keep their order (a rewrite appends), and the state records how many ids of each
      bucket it knows (`counts`): ids a bucket gained for a state that was then lost are not loaded, so their
      records are decided again instead of being dropped as duplicates;
    - the state carries the ids whose bucket writes are not acknowledged yet (`unsure`): a lost bucket write
      does not make records count twice;
    - a forgotten bucket's tombstone is sent only once the state that stopped naming it is durable.
    """

    __slots__ = ("_buckets", "_drained", "_dropping", "_ids", "_late", "_new", "_one", "_read", "_tombstones",
                 "_top", "_unsure")

    def __init__(
        self, read: Callable[[int], dict[str, float] | None] = lambda _: None,
        late_after: Callable[[], float] | None = None,
    ) -> None:
        self._read = read
        self._late = late_after
        """The policy's `late_after`, if known: each id that starts a newer bucket forgets the buckets its
        `ts - late_after` has passed (L3 a bucket at a time, not only at the engine's once-a-minute discard)."""
        self._top = -1
        """The newest bucket an id was added to."""
        """A stored bucket's {event_id: ts} (from the table), ids in the order they were stored."""
        self._ids = SeenHashes()
        """The hashes of the live ids, by bucket."""
        self._buckets: dict[int, int] = {}
        """Buckets stored and not forgotten, and how many ids each holds."""
        self._new: dict[str, float] = {}
        self._one: int | None = None
        """The bucket every id of `_new` falls in, if they share one (None: they may not): at live rates they do
        (the newest bucket's held ids), and `drain` then has no id to sort into buckets."""
        self._dropping: list[int] = []
        """Buckets forgotten since the last state was sent: the next state no longer names them."""
        self._tombstones: list[tuple[Any, list[int]]] = []
        """Forgotten buckets to delete once the state sent without them (its future) is durable."""
        self._drained: dict[int, dict[str, float]] = _NONE
        """The new ids of each bucket the last `drain` returned, until `sent` pairs them with their write."""
        self._unsure: list[tuple[Any, dict[str, float]]] = []
        """Ids in bucket writes not known to be durable yet, with each write's future (see `unsure`)."""

    def load_bucket(self, bucket: int, ids: dict[str, float]) -> None:
        self._ids.update(map(hash, ids), bucket)
        self._buckets[_shared(bucket)] = len(ids)

    def adopt(self, ids: dict[str, float]) -> None:
        """Ids stored another way (an older layout, a state's unsure ids): held as new, so the next flush stores
        them in buckets."""
        add = self._ids.add
        for event_id, ts in ids.items():
            add(hash(event_id), int(ts // SEEN_BUCKET))
        self._new.update(ids)
        self._one = None

    def forget_before(self, horizon: float) -> None:
        """Forget every stored bucket that ends at or before the horizon (all its ids are older than it). New ids
        of such a bucket, not written yet, stay until their write is forgotten in turn."""
        gone = [b for b in self._buckets if (b + 1) * SEEN_BUCKET <= horizon]
        if not gone:
            return
        for bucket in gone:
            del self._buckets[bucket]
        self._dropping += gone
        self._ids.drop(gone)
        for event_id, ts in self._new.items():
            if (bucket := int(ts // SEEN_BUCKET)) in gone:
                self._ids.add(hash(event_id), bucket)

    def __getitem__(self, event_id: str) -> float:
        """Not on the hot path (the engine only asks `in`): read back from the buckets."""
        if event_id in self._new:
            return self._new[event_id]
        if hash(event_id) in self._ids:
            for bucket in self._buckets:
                ts = (self._read(bucket) or {}).get(event_id)
                if ts is not None:
                    return ts
        raise KeyError(event_id)

    def __contains__(self, event_id: object) -> bool:
        return hash(event_id) in self._ids

    def __setitem__(self, event_id: str, ts: float) -> None:
        bucket = int(ts // SEEN_BUCKET)
        self._ids.add(hash(event_id), bucket)
        new = self._new
        if not new:
            self._one = bucket
        elif bucket != self._one:
            self._one = None
        new[event_id] = ts
        if bucket > self._top:
            self._top = bucket
            if self._late is not None:  # ts <= hw: never sooner than L3 allows
                self.forget_before(ts - self._late())

    def __delitem__(self, event_id: str) -> None:
        """Forget one id now (its stored bucket still holds it until the bucket is forgotten)."""
        h = hash(event_id)
        if h not in self._ids:
            raise KeyError(event_id)
        self._ids.discard(h)
        self._new.pop(event_id, None)

    def __iter__(self) -> Iterator[str]:
        """Not on the hot path: the live ids, read back from the buckets."""
        ids = self._ids
        found: set[str] = set()
        for bucket in list(self._buckets):
            found.update(e for e in (self._read(bucket) or ()) if hash(e) in ids)
        found.update(e for e in self._new if hash(e) in ids)
        return iter(found)

    def __len__(self) -> int:
        return len(self._ids)

    def buckets(self) -> list[int]:
        return sorted(self._buckets)

    def counts(self) -> list[int]:
        """How many ids each of `buckets()` holds, in the same order."""
        return [self._buckets[b] for b in sorted(self._buckets)]

    def sent(self, bucket: int, future: Any) -> None:
        """The write of a bucket `drain` returned was handed to the producer; `future` resolves once durable."""
        ids = self._drained.pop(bucket, None)
        if ids:
            self._unsure.append((future, ids))
            if hasattr(future, "add_done_callback"):  # forgotten once durable, not only at this view's next flush
                future.add_done_callback(self._settled)

    def _settled(self, future: Any) -> None:
        """A bucket write resolved: if durable, its ids (strings, and the future) need not wait for the next flush
        of a deployment that may be quiet for minutes."""
        if _durable(future):
            self._unsure = [(f, ids) for f, ids in self._unsure if f is not future]

    def unsure(self) -> dict[str, float]:
        """The ids not in a bucket write known to be durable (held back by `drain`, or sent and not yet
        acknowledged), in buckets not forgotten: the state value carries them, so a new owner that finds the
        state but not the bucket write still knows them."""
        self._unsure = [(f, ids) for f, ids in self._unsure if not _durable(f)]
        live = self._buckets
        out = {e: t for _, ids in self._unsure for e, t in ids.items() if int(t // SEEN_BUCKET) in live}
        out.update(self._new)
        return out

    def state_sent(self, future: Any) -> None:
        """A state value naming `buckets()` was handed to the producer: the buckets forgotten before it may be
        deleted once it is durable."""
        if self._dropping:
            self._tombstones.append((future, self._dropping))
            self._dropping = []

    def drain(self, hold: int | None = None) -> list[tuple[int, dict[str, float] | None]]:
        """Buckets to write: each bucket that got new ids with all its ids (the stored ones first, in order), and
        None for each forgotten bucket whose deletion is due (see `state_sent`).

        Up to `hold` (default HOLD) new ids of the newest bucket are held back instead: the state value carries
        them (`unsure`), so a flush costs one write per deployment, not two, until the bucket fills or a newer
        one starts."""
        hold = HOLD if hold is None else hold
        out: list[tuple[int, dict[str, float] | None]] = []
        if self._tombstones:
            due = [(f, buckets) for f, buckets in self._tombstones if _durable(f)]
            self._tombstones = [(f, buckets) for f, buckets in self._tombstones if not _durable(f)]
            out += [(b, None) for _, buckets in due for b in buckets]
        new = self._new
        grouped: dict[int, dict[str, float]] = {}
        if new and self._one is not None:  # one bucket: nothing to sort
            grouped[self._one] = new
        else:
            for event_id, ts in new.items():
                grouped.setdefault(int(ts // SEEN_BUCKET), {})[event_id] = ts
        self._new = {}
        if grouped:
            newest = max(max(grouped), max(self._buckets, default=-1))
            held = grouped.get(newest)
            if held is not None and len(held) <= hold:
                self._new = grouped.pop(newest)
                self._one = newest
        self._drained = {bucket: dict(ids) for bucket, ids in grouped.items()} if grouped else _NONE
        for bucket, ids in grouped.items():
            if bucket in self._buckets:
                ids = {**(self._read(bucket) or {}), **ids}
            self._buckets[_shared(bucket)] = len(ids)
            out.append((bucket, ids))
        return out


_SHARED: dict[int, int] = {}


def _shared(bucket: int) -> int:
    """One int object per bucket number for every deployment's `_buckets` keys (ints past 256 are not cached by
    Python: 32 B each, ~110k of them at 10,000 deployments)."""
    if len(_SHARED) > 4096:  # a few hours of event time: forget the old numbers
        _SHARED.clear()
    return _SHARED.setdefault(bucket, bucket)


_NONE: dict[Any, Any] = {}
"""The shared empty `_drained` (never written to): most flushes of a quiet deployment drain nothing, and a dict of
its own each would cost a worker at 10,000 deployments megabytes."""


def _read_bucket(data: Any, key: bytes, bucket: int) -> dict[str, float] | None:
    raw = data.get(bucket_key(key, bucket))
    return None if raw is None else orjson.loads(raw)


def _durable(future: Any) -> bool:
    """A producer send's future that resolved without error (the broker acknowledged the write)."""
    return bool(future.done()) and not future.cancelled() and future.exception() is None


class PathStore:
    """Load, mark and persist `PathState`s by deployment id over a state table and a seen table.

    A state's table value names its seen buckets, so a deployment loads with exactly its seen ids. Loaded
    states are cached as objects together with the table value they came from; a value replaced behind our back
    (changelog recovery, a standby promoted after a rebalance) is a different object, so the next load rebuilds
    from the table.
    """

    def __init__(
        self, state_table: RawTable, seen_table: RawTable, late_after: Callable[[], float] | None = None,
    ) -> None:
        self.state_table = state_table
        self.seen_table = seen_table
        self.late_after = late_after
        """The policy's `late_after` (read at each use: a registry update may change it); see `SeenView`."""
        self._states: dict[str, tuple[PathState, bytes | None]] = {}
        self._dirty: dict[str, tuple[PathState, int]] = {}
        self._legacy: dict[str, list[bytes]] = {}
        """Seen keys of the older layout (chunk numbers, `"span"` in the state) to delete at the next flush."""

    def load(self, deployment_id: str) -> PathState:
        dirty = self._dirty.get(deployment_id)
        if dirty is not None:  # changed in this batch: ours is newer than anything in the table
            return dirty[0]
        key = deployment_id.encode()
        raw = self.state_table.data.get(key)
        cached = self._states.get(deployment_id)
        if cached is not None and cached[1] is raw:
            return cached[0]
        read = self._bucket_reader(key)
        view = SeenView(read, self.late_after)
        if raw is None:
            ps = PathState()
        else:
            stored = orjson.loads(raw)
            ps = PathState.from_dict(stored["state"])
            buckets = stored.get("buckets", ())
            for bucket, count in zip(buckets, stored.get("counts") or [None] * len(buckets), strict=True):
                ids = read(bucket)
                if ids is None:
                    continue
                if count is not None and len(ids) > count:  # ids stored for a newer state, which was lost
                    ids = dict(itertools.islice(ids.items(), count))
                    self.seen_table.data[bucket_key(key, bucket)] = sized(orjson.dumps(ids))
                view.load_bucket(bucket, ids)
            if "unsure" in stored:  # their bucket writes may be lost: stored again at the next flush
                view.adopt(stored["unsure"])
            if "span" in stored:  # written before the buckets: chunks numbered first..next-1
                first, next_ = stored["span"]
                old = [key + SEP + str(chunk).encode() for chunk in range(first, next_)]
                for chunk_key in old:
                    chunk = self.seen_table.data.get(chunk_key)
                    if chunk is not None:
                        view.adopt(orjson.loads(chunk))
                self._legacy[deployment_id] = old
        ps.seen = view
        self._states[deployment_id] = (ps, raw)
        return ps

    def _bucket_reader(self, key: bytes) -> Callable[[int], dict[str, float] | None]:
        """`SeenView`'s reader of the deployment's stored buckets (a partial: a closure per deployment costs twice
        as much)."""
        return functools.partial(_read_bucket, self.seen_table.data, key)

    def peek(self, deployment_id: str) -> PathState | None:
        """A read-only look (the admin API): this batch's state, else the table's without its seen ids, else None.

        Unlike `load` it builds nothing an agent would reuse and reads no seen buckets.
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
        """Write every touched state and its changed seen buckets; returns the number of writes.

        Sent with the app's Kafka producer directly rather than through `Table.__setitem__`:
        Faust's per-message changelog path cost more than the whole decision. Faust flushes that
        producer before it commits offsets, so a committed record's state is always durable.
        A state is written after its buckets, and carries the ids of those not acknowledged yet (`unsure`).
        """
        writes = 0
        state_topic = self.state_table.changelog
        seen_topic = self.seen_table.changelog
        seen_data = self.seen_table.data
        dirty = list(self._dirty.items())
        for n, (deployment_id, (ps, partition)) in enumerate(dirty, 1):
            if not n % YIELD_EVERY:
                await asyncio.sleep(0)
            key = deployment_id.encode()
            view = ps.seen
            assert isinstance(view, SeenView)
            for bucket, ids in view.drain():
                seen_key = bucket_key(key, bucket)
                value = None if ids is None else sized(orjson.dumps(ids))
                if value is None:
                    seen_data.pop(seen_key, None)
                else:
                    seen_data[seen_key] = value
                view.sent(bucket, await producer.send(seen_topic, seen_key, value, partition, None, None))
                writes += 1
            stored: dict[str, Any] = {"state": ps.to_dict(), "buckets": view.buckets(), "counts": view.counts()}
            unsure = view.unsure()
            if unsure:
                stored["unsure"] = unsure
            state = sized(orjson.dumps(stored))
            self.state_table.data[key] = state
            self._states[deployment_id] = (ps, state)
            view.state_sent(await producer.send(state_topic, key, state, partition, None, None))
            writes += 1
            for old_key in self._legacy.pop(deployment_id, ()):  # after the state that no longer names them
                if seen_data.pop(old_key, None) is not None:
                    await producer.send(seen_topic, old_key, None, partition, None, None)
                    writes += 1
        for deployment_id, entry in dirty:  # not one touched again while the flush yielded
            if self._dirty.get(deployment_id) is entry:
                del self._dirty[deployment_id]
        return writes

    def reset(self) -> None:
        """After a rebalance's recovery: forget cached objects (the identity check would catch them too)."""
        self._states.clear()
        self._legacy.clear()
