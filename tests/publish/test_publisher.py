"""`Publisher` against a real broker: routing, keys, bytes, drop accounting, validation at the edge."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import Counter, defaultdict
from typing import Any

import pytest

from coolant.publish import Publisher, PublisherStats
from coolant.schemas import Cooldown, DeploymentRecord, Health, Outcome, Window, decode, encode
from coolant.topics import Topics
from tests.publish.conftest import HANG_GUARD_S, consume, outcome, wait_until


def test_stats_defaults_and_total() -> None:
    s = PublisherStats(dropped_full=1, dropped_unavailable=2, dropped_invalid=3)
    assert s.dropped == 6
    assert PublisherStats() == PublisherStats(0, 0, 0, 0, 0, 0)


async def test_records_arrive_byte_exact_on_their_topics_keyed_by_deployment(kafka_bootstrap: str, prefix: str) -> None:
    topics = Topics(prefix)
    records: list[Any] = []
    for i in range(60):
        records.append(outcome(i, deployment=f"dep-{i % 4}"))
        if i % 10 == 0:
            records.append(Health(event_id=f"h-{i}", ts=1_767_225_600.0 + i, deployment_id=f"dep-{i % 4}",
                                  model_group="group-1", healthy=i % 20 == 0, status_code=None, prober="p1"))
    records.append(DeploymentRecord(deployment_id="dep-0", model_group="group-1", cooldown_time=30.0,
                                    allowed_fails_policy={"RateLimitErrorAllowedFails": 3}))
    pub = Publisher(kafka_bootstrap, topic_prefix=prefix)
    await pub.start()
    assert all(pub.publish(r) for r in records)
    await pub.flush(15)
    assert pub.stats == PublisherStats(sent=len(records))
    await pub.stop()

    got = await consume(kafka_bootstrap, [topics.outcomes, topics.health, topics.deployments], len(records))
    where: dict[type, str] = {Outcome: topics.outcomes, Health: topics.health, DeploymentRecord: topics.deployments}
    expected = Counter((where[type(r)], r.deployment_id.encode(), encode(r)) for r in records)
    assert Counter((m.topic, m.key, m.value) for m in got) == expected
    # per deployment, records keep their publish order (one partition per key)
    by_key: dict[bytes, list[bytes]] = defaultdict(list)
    for m in sorted((m for m in got if m.topic == topics.outcomes), key=lambda m: (m.partition, m.offset)):
        by_key[m.key].append(m.value)
    for key, values in by_key.items():
        assert values == [encode(r) for r in records if type(r) is Outcome and r.deployment_id.encode() == key]


async def test_full_buffer_drops_and_counts_while_connected(kafka_bootstrap: str, prefix: str) -> None:
    pub = Publisher(kafka_bootstrap, topic_prefix=prefix, max_buffer=10)
    await pub.start()
    assert pub.publish(outcome(0))
    await pub.flush(15)
    assert pub.connected and pub.stats.sent == 1
    # 100 publishes in one go: the sender cannot run in between, so the buffer holds 10 of them
    results = [pub.publish(outcome(i)) for i in range(1, 101)]
    assert results.count(True) == 10 and results[:10] == [True] * 10
    assert pub.stats.dropped_full == 90 and pub.stats.dropped_unavailable == 0 and pub.stats.buffered == 10
    await pub.flush(15)
    await pub.stop()
    assert pub.stats == PublisherStats(sent=11, dropped_full=90)
    got = await consume(kafka_bootstrap, [Topics(prefix).outcomes], 11)
    assert sorted(m.value for m in got) == sorted(encode(outcome(i)) for i in range(11))


async def test_publish_before_start_buffers_then_sends(kafka_bootstrap: str, prefix: str) -> None:
    pub = Publisher(kafka_bootstrap, topic_prefix=prefix, max_buffer=5)
    results = [pub.publish(outcome(i)) for i in range(8)]
    assert results == [True] * 5 + [False] * 3
    # not connected (never started): a full buffer is an availability drop
    assert pub.stats == PublisherStats(dropped_unavailable=3, buffered=5)
    await pub.start()
    await pub.flush(15)
    await pub.stop()
    assert pub.stats == PublisherStats(sent=5, dropped_unavailable=3)


class NotARecord:
    deployment_id = "dep-a"


@pytest.mark.parametrize("validate", [True, False])
async def test_invalid_records_are_dropped_counted_and_never_raise(
    kafka_bootstrap: str, prefix: str, validate: bool, caplog: pytest.LogCaptureFixture
) -> None:
    # msgspec Structs do not check types on construction: these are what a buggy gateway could build
    invalid_by_schema: list[Any] = [
        outcome(1, event_id=""),  # min_length 1
        outcome(2, event_id="x" * 129),  # max_length 128
        outcome(3, ts="yesterday"),  # wrong type
        outcome(4, ts=math.nan),  # encodes as null: ts is required
        outcome(5, attempt=-1),  # ge=0
        outcome(6, ok="yes"),
        DeploymentRecord(deployment_id="d", model_group="g", allowed_fails_policy={"RateLimitErrorAllowedFails": -2}),
    ]
    never_publishable: list[Any] = [
        Cooldown(event_id="c", deployment_id="d", model_group="g", ts=1.0, until=2.0, cooldown_time=1,
                 reason="manual", status_code=None, exception_type=None, exception_received="",
                 trigger_event_id="t", window=Window(0.0, 0, 0)),
        {"schema": "coolant.outcome/1"},
        None,
        NotARecord(),
        outcome(7, deployment_id=None),  # no key
        outcome(8, latency_ms=object()),  # cannot be encoded
    ]
    pub = Publisher(kafka_bootstrap, topic_prefix=prefix, validate=validate)
    await pub.start()
    with caplog.at_level(logging.WARNING, logger="coolant.publish.publisher"):
        for _ in range(3):
            for rec in never_publishable:
                assert pub.publish(rec) is False
            for rec in invalid_by_schema:
                assert pub.publish(rec) is (not validate)
    assert pub.publish(outcome(9))
    await pub.flush(15)
    await pub.stop()
    n_invalid = 3 * (len(never_publishable) + (len(invalid_by_schema) if validate else 0))
    sent = 1 + (0 if validate else 3 * len(invalid_by_schema))
    assert pub.stats == PublisherStats(sent=sent, dropped_invalid=n_invalid)
    drop_warnings = [r for r in caplog.records if "invalid record" in r.getMessage()]
    assert len(drop_warnings) == 1  # rate limited: at most one per 10 s
    if validate:
        got = await consume(kafka_bootstrap, [Topics(prefix).outcomes], 1)
        assert [m.value for m in got] == [encode(outcome(9))]


async def test_exception_message_is_truncated_to_1024(kafka_bootstrap: str, prefix: str) -> None:
    pub = Publisher(kafka_bootstrap, topic_prefix=prefix)
    await pub.start()
    assert pub.publish(outcome(3, exception_message="é" * 5000))
    await pub.stop()
    [msg] = await consume(kafka_bootstrap, [Topics(prefix).outcomes], 1)
    rec = decode(msg.value)
    assert isinstance(rec, Outcome) and rec.exception_message == "é" * 1024


async def test_publish_after_stop_is_an_availability_drop(kafka_bootstrap: str, prefix: str) -> None:
    pub = Publisher(kafka_bootstrap, topic_prefix=prefix)
    async with pub:
        assert pub.publish(outcome(1))
    assert pub.publish(outcome(2)) is False
    assert pub.stats == PublisherStats(sent=1, dropped_unavailable=1)
    await pub.stop()  # idempotent


async def test_unreachable_broker_start_never_raises_and_stop_is_bounded() -> None:
    pub = Publisher("127.0.0.1:1", reconnect_backoff=(0.05, 0.2))
    await pub.start()
    assert all(pub.publish(outcome(i)) for i in range(50))
    await wait_until(lambda: pub.stats.buffered == 50, 1, "buffering")
    # The broker never comes up, so a flush or stop that ignored its timeout would never return: the hang
    # guard catches that without timing anything.
    t0 = time.monotonic()
    await asyncio.wait_for(pub.flush(0.3), HANG_GUARD_S)
    await asyncio.wait_for(pub.stop(0.5), HANG_GUARD_S)
    print(f"\nflush(0.3) + stop(0.5) with no broker returned after {time.monotonic() - t0:.2f} s")
    assert pub.stats == PublisherStats(dropped_unavailable=50)
    assert not pub.connected


def test_bad_arguments_fail_at_construction() -> None:
    with pytest.raises(ValueError):
        Publisher("x:1", max_buffer=0)
    with pytest.raises(ValueError):
        Publisher("x:1", reconnect_backoff=(2.0, 1.0))
