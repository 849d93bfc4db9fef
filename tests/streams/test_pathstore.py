"""PathStore / SeenView against in-memory stand-ins for Faust's tables and producer: what is written, and that
a state reloaded from the written values is the state that was saved (the changelog round trip a new owner does)."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest

from coolant.config.loader import load_config
from coolant.processors import step_outcome
from coolant.processors.state import PathState
from coolant.schemas import Outcome, decode
from coolant.streams import pathstore
from coolant.streams.lane import YIELD_EVERY
from coolant.streams.pathstore import SEEN_BUCKET, SEP, PathStore, SeenView, bucket_key
from tests.support.records import fleet_traffic, write_config


@dataclass
class FakeTable:
    """What `PathStore` uses of a table (`faust.RawTable`): its data and its changelog topic's name."""

    name: str
    data: dict[bytes, bytes] = field(default_factory=dict)

    @property
    def changelog(self) -> str:
        return self.name + "-changelog"


@dataclass
class FakeProducer:
    """Faust's producer: `send` returns a future that resolves once the write is durable (at once here, unless
    the topic is in `lose`: those writes never are, as when a worker crashes before they reach the broker)."""

    sent: list[tuple[str, bytes, bytes | None, int]] = field(default_factory=list)
    lose: set[str] = field(default_factory=set)
    lost: list[tuple[str, bytes, bytes | None, int]] = field(default_factory=list)

    async def send(self, topic: str, key: bytes, value: bytes | None, partition: int, *_: Any) -> asyncio.Future[None]:
        future = asyncio.get_running_loop().create_future()
        if topic in self.lose:
            self.lost.append((topic, key, value, partition))
        else:
            self.sent.append((topic, key, value, partition))
            future.set_result(None)
        return future


def replayed(sent: list[tuple[str, bytes, bytes | None, int]], topic: str) -> dict[bytes, bytes]:
    """A changelog read back as Faust recovers it: the last value per key, tombstones delete."""
    data: dict[bytes, bytes] = {}
    for t, key, value, _ in sent:
        if t == topic:
            if value is None:
                data.pop(key, None)
            else:
                data[key] = value
    return data


def test_seen_view_stores_by_bucket_and_forgets_whole_buckets() -> None:
    stored: dict[int, dict[str, float]] = {}
    view = SeenView(stored.get)

    def drain() -> list[tuple[int, dict[str, float] | None]]:
        out = view.drain(hold=0)
        for bucket, ids in out:
            if ids is None:
                del stored[bucket]
            else:
                stored[bucket] = ids
        return out

    w = SEEN_BUCKET
    view["a"], view["b"] = 1.0, w + 1
    assert drain() == [(0, {"a": 1.0}), (1, {"b": w + 1})]
    view["c"] = w + 2
    assert drain() == [(1, {"b": w + 1, "c": w + 2})]  # the bucket rewritten with all its ids
    assert view.buckets() == [0, 1]
    view.forget_before(w - 0.5)
    assert "a" in view  # bucket 0 may still hold ids up to w
    view.forget_before(w)
    assert "a" not in view and set(view) == {"b", "c"}
    view["d"] = 3 * w
    view.forget_before(10 * w)  # d is not stored yet: it stays until its bucket is forgotten
    assert set(view) == {"d"}
    assert drain() == [(3, {"d": 3 * w})]  # no tombstones before a state without buckets 0 and 1 is durable
    loop = asyncio.new_event_loop()
    state_write = loop.create_future()
    view.state_sent(state_write)
    assert drain() == []
    state_write.set_result(None)
    assert drain() == [(0, None), (1, None)]
    loop.close()
    assert view.buckets() == [3] and view.counts() == [1] and view["d"] == 3 * w


def test_a_newer_bucket_forgets_what_the_late_window_passed() -> None:
    """With `late_after` known, the id that starts a newer bucket forgets every stored bucket ending at or before
    its `ts - late_after`, and none that ends after it."""
    w = SEEN_BUCKET
    stored: dict[int, dict[str, float]] = {}
    view = SeenView(stored.get, lambda: 3 * w)
    view["a"], view["b"] = 0.5 * w, 1.5 * w
    for bucket, ids in view.drain(hold=0):
        assert ids is not None
        stored[bucket] = ids
    view["c"] = 4 * w - 1  # horizon just before the end of bucket 0: nothing forgotten
    assert "a" in view and "b" in view
    view["d"] = 4 * w  # bucket 4 starts: ts - late_after = w, the end of bucket 0
    assert "a" not in view and "b" in view and "c" in view and "d" in view
    assert view.buckets() == [1]
    view["e"] = 3.5 * w  # an older bucket: forgets nothing
    assert "b" in view


@pytest.mark.parametrize("eager", [False, True], ids=["engine-discard", "bucket-at-a-time"])
def test_seen_view_decides_as_a_dict_does(tmp_path: Path, eager: bool) -> None:
    """Replay keeps seen ids in a dict swept id by id; the bucketed view must give every record the same step,
    whether it forgets at the engine's discard only or also as each newer bucket starts (`late_after` given)."""
    policy = load_config(write_config(tmp_path / "c.yaml")).policy
    lines = fleet_traffic(4000, seed=11)
    rng = random.Random(3)
    lines += [rng.choice(lines) for _ in range(400)]  # copies, some of them long expired
    plain: dict[str, PathState] = {}
    late = policy.options.late_after
    store = PathStore(FakeTable("state"), FakeTable("seen"), (lambda: late) if eager else None)
    producer = FakeProducer()
    for i, line in enumerate(lines):
        rec = decode(line)
        assert isinstance(rec, Outcome)
        want = step_outcome(policy, plain.setdefault(rec.deployment_id, PathState()), rec)
        ps = store.load(rec.deployment_id)
        got = step_outcome(policy, ps, rec)
        store.touch(rec.deployment_id, ps, 0)
        if i % 7 == 0:
            asyncio.run(store.flush(producer))
        assert (got.disposition, got.cooldown) == (want.disposition, want.cooldown), (i, line)
    assert any(value is None for _, _, value, _ in producer.sent), "chunks should have been forgotten on the way"


def test_flush_then_reload_from_the_changelog(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pathstore, "HOLD", 0)  # every bucket written at each flush (holding: the test below)
    state, seen = FakeTable("state"), FakeTable("seen")
    store = PathStore(state, seen)
    producer = FakeProducer()
    ps = store.load("dep-1")
    w = SEEN_BUCKET
    for i in range(3):
        ps.seen[f"e{i}"] = i * w
        store.touch("dep-1", ps, partition=5)
        asyncio.run(store.flush(producer))
    ps.seen.forget_before(w)  # type: ignore[attr-defined]
    store.touch("dep-1", ps, partition=5)
    asyncio.run(store.flush(producer))
    assert orjson.loads(state.data[b"dep-1"])["buckets"] == [1, 2]
    assert orjson.loads(state.data[b"dep-1"])["counts"] == [1, 1]
    store.touch("dep-1", ps, partition=5)  # the tombstone goes with the flush after the state without bucket 0
    asyncio.run(store.flush(producer))
    assert {p for *_, p in producer.sent} == {5}
    assert bucket_key(b"dep-1", 0) not in seen.data  # deleted, and a tombstone was sent
    # a new owner recovering the changelogs loads the same seen ids
    fresh = PathStore(FakeTable("state", replayed(producer.sent, "state-changelog")),
                      FakeTable("seen", replayed(producer.sent, "seen-changelog")))
    again = fresh.load("dep-1")
    assert dict(again.seen) == {"e1": w, "e2": 2 * w}


def test_a_state_durable_without_its_bucket_writes_still_knows_their_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """The state and the seen buckets are on two changelog topics: a crash can leave the state durable and its
    bucket writes lost. The state carries the unacknowledged ids, so the new owner still drops the copies."""
    monkeypatch.setattr(pathstore, "HOLD", 0)
    store = PathStore(FakeTable("state"), FakeTable("seen"))
    producer = FakeProducer(lose={"seen-changelog"})

    async def run() -> None:
        for i in range(3):
            ps = store.load("dep-1")
            ps.seen[f"e{i}"] = i * 0.5
            store.touch("dep-1", ps, partition=0)
            await store.flush(producer)

    asyncio.run(run())
    assert producer.lost, "the bucket writes were lost"
    fresh = PathStore(FakeTable("state", replayed(producer.sent, "state-changelog")), FakeTable("seen"))
    again = fresh.load("dep-1")
    assert {"e0", "e1", "e2"} <= set(again.seen)  # the records before the crash are duplicates for the new owner
    # once its bucket writes are durable, a state stops carrying them
    producer.lose.clear()
    asyncio.run(fresh.flush(producer))  # nothing touched: nothing written
    again.seen["e3"] = 1.0
    fresh.touch("dep-1", again, partition=0)
    asyncio.run(fresh.flush(producer))
    last = orjson.loads(replayed(producer.sent, "state-changelog")[b"dep-1"])
    assert "unsure" not in last
    assert set(orjson.loads(replayed(producer.sent, "seen-changelog")[bucket_key(b"dep-1", 0)])) == \
        {"e0", "e1", "e2", "e3"}


def test_ids_stored_for_a_state_that_was_lost_are_not_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bucket write can be durable while the state of the same flush is lost: the new owner loads the older
    state, whose counts say which of the bucket's ids it knows; the others' records are decided again."""
    monkeypatch.setattr(pathstore, "HOLD", 0)
    store = PathStore(FakeTable("state"), FakeTable("seen"))
    producer = FakeProducer()

    async def flush_ids(*ids: str) -> None:
        ps = store.load("dep-1")
        for event_id in ids:
            ps.seen[event_id] = 1.0
        store.touch("dep-1", ps, partition=0)
        await store.flush(producer)

    asyncio.run(flush_ids("e0", "e1"))
    producer.lose.add("state-changelog")
    asyncio.run(flush_ids("e2"))  # its bucket write is durable, its state is not
    assert producer.lost and producer.lost[0][0] == "state-changelog"
    seen = FakeTable("seen", replayed(producer.sent, "seen-changelog"))
    assert set(orjson.loads(seen.data[bucket_key(b"dep-1", 0)])) == {"e0", "e1", "e2"}
    fresh = PathStore(FakeTable("state", replayed(producer.sent, "state-changelog")), seen)
    again = fresh.load("dep-1")
    assert set(again.seen) == {"e0", "e1"}  # e2's record is not a duplicate for a state that never counted it
    again.seen["e3"] = 2.0
    fresh.touch("dep-1", again, partition=0)
    producer.lose.clear()
    asyncio.run(fresh.flush(producer))
    assert list(orjson.loads(replayed(producer.sent, "seen-changelog")[bucket_key(b"dep-1", 0)])) == ["e0", "e1", "e3"]


def test_the_newest_bucket_rides_in_the_state_until_it_fills_or_a_newer_one_starts() -> None:
    """One changelog write per deployment per flush: new ids of the newest bucket (up to HOLD) go in the state
    value; the bucket is written when a newer bucket starts or it fills. A new owner loads them from either."""
    store = PathStore(FakeTable("state"), FakeTable("seen"))
    producer = FakeProducer()
    w = SEEN_BUCKET

    async def flush_ids(*ids: tuple[str, float]) -> None:
        ps = store.load("dep-1")
        for event_id, ts in ids:
            ps.seen[event_id] = ts
        store.touch("dep-1", ps, partition=0)
        await store.flush(producer)

    asyncio.run(flush_ids(("e0", 1.0), ("e1", 2.0)))
    assert [topic for topic, *_ in producer.sent] == ["state-changelog"]
    state = orjson.loads(store.state_table.data[b"dep-1"])
    assert state["buckets"] == [] and state["unsure"] == {"e0": 1.0, "e1": 2.0}
    asyncio.run(flush_ids(("e2", w + 1)))  # a newer bucket: bucket 0 is written, e2 rides in the state
    assert [topic for topic, *_ in producer.sent] == ["state-changelog", "seen-changelog", "state-changelog"]
    state = orjson.loads(store.state_table.data[b"dep-1"])
    assert state["buckets"] == [0] and state["counts"] == [2] and state["unsure"] == {"e2": w + 1}
    asyncio.run(flush_ids(*[(f"f{i}", w + 2) for i in range(pathstore.HOLD)]))  # bucket 1 overflows: written
    state = orjson.loads(store.state_table.data[b"dep-1"])
    assert state["buckets"] == [0, 1] and state["counts"] == [2, pathstore.HOLD + 1] and "unsure" not in state
    fresh = PathStore(FakeTable("state", replayed(producer.sent, "state-changelog")),
                      FakeTable("seen", replayed(producer.sent, "seen-changelog")))
    assert set(fresh.load("dep-1").seen) == {"e0", "e1", "e2", *(f"f{i}" for i in range(pathstore.HOLD))}


def test_the_older_chunked_layout_is_read_and_moved_to_buckets() -> None:
    """States written before the buckets (`"span"` and numbered chunks) load with their ids; the next flush
    stores those ids the new way and deletes the old chunks."""
    state = FakeTable("state", {b"dep-1": orjson.dumps({"state": PathState().to_dict(), "span": [1, 3]})})
    seen = FakeTable("seen", {b"dep-1" + SEP + b"1": orjson.dumps({"e1": 1.0}),
                              b"dep-1" + SEP + b"2": orjson.dumps({"e2": 2.0})})
    store = PathStore(state, seen)
    ps = store.load("dep-1")
    assert "e1" in ps.seen and "e2" in ps.seen
    store.touch("dep-1", ps, partition=0)
    producer = FakeProducer()
    asyncio.run(store.flush(producer))
    assert set(seen.data) == set()  # the ids ride in the state until their bucket is written (HOLD)
    assert orjson.loads(state.data[b"dep-1"])["unsure"] == {"e1": 1.0, "e2": 2.0}
    assert [k for _, k, v, _ in producer.sent if v is None] == [b"dep-1" + SEP + b"1", b"dep-1" + SEP + b"2"]
    assert "e1" in PathStore(state, seen).load("dep-1").seen


def test_unknown_deployment_loads_empty() -> None:
    store = PathStore(FakeTable("state"), FakeTable("seen"))
    ps = store.load("nobody")
    assert isinstance(ps, PathState)
    assert len(ps.seen) == 0


def test_a_large_flush_lets_other_tasks_run_and_keeps_what_they_touch() -> None:
    """A flush of thousands of states (a worker that fell behind) yields to the event loop every YIELD_EVERY of
    them, so the fetch loop and the early Redis writes' replies do not wait for all of it; a state touched while
    it yielded (the other lane, with recovery) stays marked for the next flush, not cleared with the rest."""
    store = PathStore(FakeTable("state"), FakeTable("seen"))
    producer = FakeProducer()
    n = 10 * YIELD_EVERY
    for i in range(n):
        ps = store.load(f"dep-{i}")
        ps.seen[f"e{i}"] = 1.0
        store.touch(f"dep-{i}", ps, partition=0)

    async def run() -> int:
        turns = 0

        async def meanwhile() -> None:
            nonlocal turns
            while True:
                turns += 1
                if turns == 2:  # mid-flush: the first deployment's state changes again
                    ps = store.load("dep-0")
                    ps.seen["again"] = 2.0
                    store.touch("dep-0", ps, partition=0)
                await asyncio.sleep(0)

        other = asyncio.get_running_loop().create_task(meanwhile())
        await asyncio.sleep(0)
        before = turns
        assert await store.flush(producer) == n
        other.cancel()
        return turns - before

    assert asyncio.run(run()) >= n // YIELD_EVERY - 1
    assert len(producer.sent) == n
    ps = store.load("dep-0")
    assert "again" in ps.seen
    assert asyncio.run(store.flush(producer)) == 1, "dep-0 was touched after its write: flushed again"
    assert "again" in orjson.loads(store.state_table.data[b"dep-0"])["unsure"]


def test_a_raw_table_keeps_each_value_in_an_allocation_of_its_own_size() -> None:
    """orjson returns every result in a buffer of about 4 KB: a table that kept it as given (the cooldown history
    did) cost 4 KB per key however short its value."""
    import tracemalloc

    from coolant.streams.faust import RawTable

    class Topic:
        @staticmethod
        def get_topic_name() -> str:
            return "cooldown-history-changelog"

    class Table:  # what RawTable reads of a Faust table
        def __init__(self) -> None:
            self.name = "cooldown-history"
            self.data: dict[bytes, bytes] = {}
            self.changelog_topic = Topic()

    table, producer = RawTable(Table()), FakeProducer()

    async def write_all() -> None:
        for i in range(200):
            await table.write(producer, f"dep-{i}".encode(), orjson.dumps([{"event_id": f"e{i}", "until": 1.0}]), 0)

    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        asyncio.run(write_all())
        producer.sent.clear()  # the producer's copies are not the table's
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(table.data) == 200
    assert kept < 200 * 1024, f"{kept / 200:.0f} B per short value kept"
