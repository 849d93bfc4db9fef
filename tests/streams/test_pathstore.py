"""PathStore / SeenView against in-memory stand-ins for Faust's tables and producer: what is written, and that
a state reloaded from the written values is the state that was saved (the changelog round trip a new owner does)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import orjson

from coolant.processors.state import PathState
from coolant.streams.pathstore import SEP, PathStore, SeenView


@dataclass
class FakeTopic:
    name: str

    def get_topic_name(self) -> str:
        return self.name


@dataclass
class FakeTable:
    name: str
    data: dict[bytes, bytes] = field(default_factory=dict)

    @property
    def changelog_topic(self) -> FakeTopic:
        return FakeTopic(self.name + "-changelog")


@dataclass
class FakeProducer:
    sent: list[tuple[str, bytes, bytes | None, int]] = field(default_factory=list)

    async def send(self, topic: str, key: bytes, value: bytes | None, partition: int, *_: Any) -> None:
        self.sent.append((topic, key, value, partition))


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


def test_seen_view_span_follows_expiry() -> None:
    view = SeenView()
    view["a"], view["b"] = 1.0, 2.0
    assert [c for c, ids in view.drain()] == [0]
    view["c"] = 3.0
    assert [c for c, ids in view.drain()] == [1]
    assert view.span() == [0, 2]
    del view["a"]
    assert view.span() == [0, 2]  # chunk 0 still holds b
    del view["b"]
    assert view.drain() == [(0, None)]  # emptied chunk 0 -> a tombstone
    assert view.span() == [1, 2]
    del view["c"]
    assert view.span() == [2, 2]
    view["d"] = 4.0
    assert view.drain() == [(1, None), (2, {"d": 4.0})]
    assert view.span() == [2, 3]


def test_flush_then_reload_from_the_changelog() -> None:
    state, seen = FakeTable("state"), FakeTable("seen")
    store = PathStore(state, seen)
    producer = FakeProducer()
    ps = store.load("dep-1")
    for i in range(3):
        ps.seen[f"e{i}"] = float(i)
        store.touch("dep-1", ps, partition=5)
        asyncio.run(store.flush(producer))
    del ps.seen["e0"]
    store.touch("dep-1", ps, partition=5)
    asyncio.run(store.flush(producer))
    assert {p for *_, p in producer.sent} == {5}
    stored = orjson.loads(state.data[b"dep-1"])
    assert stored["span"] == [1, 3]
    assert (b"dep-1" + SEP + b"0") not in seen.data  # deleted, and a tombstone was sent
    # a new owner recovering the changelogs loads the same seen ids
    fresh = PathStore(FakeTable("state", replayed(producer.sent, "state-changelog")),
                      FakeTable("seen", replayed(producer.sent, "seen-changelog")))
    again = fresh.load("dep-1")
    assert dict(again.seen) == {"e1": 1.0, "e2": 2.0}
    again.seen["e3"] = 3.0
    fresh.touch("dep-1", again, partition=5)
    asyncio.run(fresh.flush(FakeProducer()))
    assert orjson.loads(fresh.state_table.data[b"dep-1"])["span"] == [1, 4]  # numbering resumes after the span


def test_unknown_deployment_loads_empty() -> None:
    store = PathStore(FakeTable("state"), FakeTable("seen"))
    ps = store.load("nobody")
    assert isinstance(ps, PathState)
    assert len(ps.seen) == 0
