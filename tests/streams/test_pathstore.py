"""PathStore / SeenView against in-memory stand-ins for Faust's tables and producer: what is written, and that
a state reloaded from the written values is the state that was saved (the changelog round trip a new owner does)."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from coolant.config import load_config
from coolant.processors import step_outcome
from coolant.processors.state import PathState
from coolant.schemas import Outcome, decode
from coolant.streams.pathstore import SEP, PathStore, SeenView
from tests.integration.harness import fleet_traffic, write_config


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


def test_seen_view_forgets_whole_chunks_past_the_horizon() -> None:
    chunks: dict[int, dict[str, float]] = {}
    view = SeenView(chunks.get)

    def drain() -> list[tuple[int, dict[str, float] | None]]:
        out = view.drain()
        chunks.update({c: ids for c, ids in out if ids is not None})
        return out

    view["a"], view["b"] = 1.0, 2.0
    assert [c for c, ids in drain()] == [0]
    view["c"] = 3.0
    assert [c for c, ids in drain()] == [1]
    assert view.span() == [0, 2]
    view.forget_before(2.0)
    assert "a" in view and view.span() == [0, 2]  # chunk 0 still holds b (ts 2.0 is not before the horizon)
    view.forget_before(2.5)
    assert drain() == [(0, None)]  # forgotten chunk 0 -> a tombstone
    assert set(view) == {"c"} and view.span() == [1, 2]
    view["d"] = 4.0
    view.forget_before(10.0)  # d is not flushed yet: it stays until its chunk is forgotten
    assert set(view) == {"d"} and view.span() == [2, 2]
    assert drain() == [(1, None), (2, {"d": 4.0})]
    assert view.span() == [2, 3] and view["d"] == 4.0


def test_seen_view_decides_as_a_dict_does(tmp_path: Path) -> None:
    """Replay keeps seen ids in a dict swept id by id; the chunked view must give every record the same step."""
    policy = load_config(write_config(tmp_path / "c.yaml")).policy
    lines = fleet_traffic(4000, seed=11)
    rng = random.Random(3)
    lines += [rng.choice(lines) for _ in range(400)]  # copies, some of them long expired
    plain: dict[str, PathState] = {}
    store = PathStore(FakeTable("state"), FakeTable("seen"))
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


def test_flush_then_reload_from_the_changelog() -> None:
    state, seen = FakeTable("state"), FakeTable("seen")
    store = PathStore(state, seen)
    producer = FakeProducer()
    ps = store.load("dep-1")
    for i in range(3):
        ps.seen[f"e{i}"] = float(i)
        store.touch("dep-1", ps, partition=5)
        asyncio.run(store.flush(producer))
    ps.seen.forget_before(0.5)  # type: ignore[attr-defined]
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
