"""The misrouting check (coolant/streams/routing.py) on its own: which partition decides, what is counted and said."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import pytest

from coolant.schemas import Health, Outcome
from coolant.streams import metrics
from coolant.streams.routing import PartitionCheck
from coolant.topics import partition_of

TOPIC = "rt-test.outcomes"
PARTITIONS = 8


@dataclass
class Message:
    topic: str
    partition: int
    value: bytes


def outcome(dep: str, gateway: str | None = "pod-1") -> Outcome:
    return Outcome(event_id="e", ts=1.0, deployment_id=dep, model_group="g", ok=True, gateway=gateway)


class Sent(list[tuple[str, bytes, bytes, int]]):
    async def __call__(self, topic: str, key: bytes, value: bytes, partition: int) -> None:
        self.append((topic, key, value, partition))


def misrouted(topic: str, gateway: str) -> float:
    value = metrics.REGISTRY.get_sample_value("coolant_misrouted_total", {"topic": topic, "gateway": gateway})
    return value or 0.0


def check(mode: Any = "republish", partitions: int | None = PARTITIONS, now: list[float] | None = None) -> tuple[
        PartitionCheck, Sent]:
    sent = Sent()
    clock = now or [0.0]
    return PartitionCheck(lambda topic: partitions, sent, mode, clock=lambda: clock[0]), sent


async def test_a_record_on_its_murmur2_partition_is_decided_there() -> None:
    pc, sent = check()
    right = partition_of("dep-a", PARTITIONS)
    assert await pc.here(Message(TOPIC, right, b"raw"), outcome("dep-a"))
    assert sent == []


async def test_a_misrouted_record_is_counted_and_republished_unchanged(caplog: pytest.LogCaptureFixture) -> None:
    pc, sent = check()
    right = partition_of("dep-a", PARTITIONS)
    wrong = (right + 1) % PARTITIONS
    before = misrouted(TOPIC, "pod-x")
    with caplog.at_level(logging.WARNING, "coolant.streams.routing"):
        assert not await pc.here(Message(TOPIC, wrong, b"raw-1"), outcome("dep-a", "pod-x"))
    assert sent == [(TOPIC, b"dep-a", b"raw-1", right)]
    assert misrouted(TOPIC, "pod-x") == before + 1
    assert "partitioner=murmur2_random" in caplog.text and "'pod-x'" in caplog.text


async def test_the_warning_is_rate_limited_per_publisher(caplog: pytest.LogCaptureFixture) -> None:
    now = [100.0]
    pc, _ = check(now=now)
    wrong = (partition_of("dep-a", PARTITIONS) + 1) % PARTITIONS
    msg = Message(TOPIC, wrong, b"raw")
    with caplog.at_level(logging.WARNING, "coolant.streams.routing"):
        for _ in range(5):
            await pc.here(msg, outcome("dep-a", "pod-r"))
        await pc.here(msg, outcome("dep-a", "pod-s"))
        assert len(caplog.records) == 2
        now[0] += 61
        await pc.here(msg, outcome("dep-a", "pod-r"))
    assert len(caplog.records) == 3
    assert caplog.records[-1].getMessage().startswith("5 record(s) from publisher 'pod-r'")  # 4 held back + this


async def test_count_mode_decides_where_it_landed_and_health_uses_the_prober() -> None:
    pc, sent = check("count")
    wrong = (partition_of("dep-h", PARTITIONS) + 1) % PARTITIONS
    probe = Health(event_id="h", ts=1.0, deployment_id="dep-h", model_group="g", healthy=True, prober="prober-2")
    before = misrouted("rt-test.health", "prober-2")
    assert await pc.here(Message("rt-test.health", wrong, b"raw"), probe)
    assert sent == []
    assert misrouted("rt-test.health", "prober-2") == before + 1


async def test_without_metadata_the_record_is_decided_where_it_is() -> None:
    pc, sent = check(partitions=None)
    assert await pc.here(Message(TOPIC, 3, b"raw"), outcome("dep-a"))
    assert sent == []
