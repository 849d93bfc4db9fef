"""Kafka down: publish stays non-blocking, the loop stays responsive, and publishing resumes by itself.

Uses the spare broker (conftest.spare_kafka), stopped and started here; the shared broker is untouched.
"""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest
from aiokafka import AIOKafkaProducer

from coolant.publish import Publisher, PublisherStats
from coolant.publish import publisher as publisher_module
from coolant.schemas import encode
from coolant.topics import Topics
from tests.publish.conftest import HANG_GUARD_S, consume, outcome, wait_until
from tests.support.brokers import LocalKafka

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]  # a first start downloads the broker's jars


async def test_publish_while_kafka_is_down_then_resume(
    spare_kafka: LocalKafka, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[tuple[str, float]] = []
    """("attempt" | "tick", when), in the order they happened on the event loop."""

    class Watched(AIOKafkaProducer):
        async def start(self) -> None:
            events.append(("attempt", time.monotonic()))
            await super().start()

    monkeypatch.setattr(publisher_module, "AIOKafkaProducer", Watched)

    def attempts() -> int:
        return sum(1 for kind, _ in events if kind == "attempt")

    pub = Publisher(spare_kafka.bootstrap, topic_prefix=prefix, max_buffer=600, reconnect_backoff=(0.2, 1.0))
    await pub.start()

    async def ticker() -> None:
        while True:
            events.append(("tick", time.monotonic()))
            await asyncio.sleep(0.01)

    tick_task = asyncio.create_task(ticker())
    try:
        await wait_until(lambda: attempts() >= 2, 30, "a few failed connection attempts first")
        records = [outcome(i, deployment=f"dep-{i % 7}") for i in range(1000)]
        durations = []
        t0 = time.perf_counter()
        for rec in records:
            t = time.perf_counter()
            pub.publish(rec)
            durations.append(time.perf_counter() - t)
        total = time.perf_counter() - t0
        print(
            f"\nKafka down: 1000 publish() calls took {total * 1000:.2f} ms in total "
            f"(mean {total * 1e6 / 1000:.1f} us, max {max(durations) * 1e6:.1f} us)"
        )
        assert pub.stats == PublisherStats(dropped_unavailable=400, buffered=600)
        assert not pub.connected

        # the event loop keeps running while the publisher retries in the background: the ticker runs between
        # any two connection attempts (the latency figure is printed, not asserted)
        start = len(events)
        want = attempts() + 2
        await wait_until(lambda: attempts() >= want, 30, "two more connection attempts")
        kinds = "".join("a" if kind == "attempt" else "t" for kind, _ in events[start:])
        assert "aa" not in kinds, f"connection attempts with no tick of the loop between them: {kinds}"
        ticks = [t for kind, t in events[start:] if kind == "tick"]
        gaps = [b - a for a, b in itertools.pairwise(ticks)]
        print(f"ticker: {len(ticks)} ticks over 2 connection attempts, largest gap {max(gaps) * 1000:.1f} ms")

        started_in = spare_kafka.start()
        waited = await wait_until(lambda: pub.stats.sent == 600, 60, "the buffered records to be sent")
        print(f"broker started in {started_in:.1f} s; buffer drained {waited:.1f} s after that")
        assert pub.connected
        assert pub.publish(outcome(5000))  # and new records flow again
        await pub.flush(15)
        assert pub.stats == PublisherStats(sent=601, dropped_unavailable=400)
        got = await consume(spare_kafka.bootstrap, [Topics(prefix).outcomes], 601)
    finally:
        tick_task.cancel()
        await pub.stop()
        spare_kafka.stop()
    expected = [encode(r) for r in records[:600]] + [encode(outcome(5000))]
    assert sorted(m.value for m in got) == sorted(expected)  # the first 600: the buffer kept the oldest


async def test_broker_dies_mid_stream_records_are_resent(spare_kafka: LocalKafka, prefix: str) -> None:
    spare_kafka.start()
    pub = Publisher(
        spare_kafka.bootstrap, topic_prefix=prefix, reconnect_backoff=(0.2, 1.0),
        client_args={"request_timeout_ms": 2000},
    )
    await pub.start()
    try:
        for i in range(100):
            pub.publish(outcome(i, deployment=f"dep-{i % 5}"))
        await pub.flush(15)
        assert pub.stats.sent == 100

        spare_kafka.stop()
        for i in range(100, 300):
            assert pub.publish(outcome(i, deployment=f"dep-{i % 5}"))
        lost_after = await wait_until(lambda: not pub.connected, 30, "the publisher to notice the outage")
        print(f"\noutage noticed after {lost_after:.1f} s; {pub.stats.buffered} records buffered")
        assert pub.stats.buffered == 200

        spare_kafka.start()
        resumed = await wait_until(lambda: pub.stats.sent == 300, 60, "the buffered records to be sent")
        print(f"all 300 acknowledged {resumed:.1f} s after the broker came back")
        assert pub.stats == PublisherStats(sent=300)
    finally:
        await pub.stop()
    try:
        got = await consume(spare_kafka.bootstrap, [Topics(prefix).outcomes], 300, settle=1.0)
    finally:
        spare_kafka.stop()
    ids = [m.value for m in got]
    assert set(ids) == {encode(outcome(i, deployment=f"dep-{i % 5}")) for i in range(300)}
    print(f"{len(ids) - 300} duplicates (at least once; the worker drops them by event_id)")


async def test_stop_with_kafka_down_gives_up_within_its_timeout(spare_kafka: LocalKafka, prefix: str) -> None:
    pub = Publisher(spare_kafka.bootstrap, topic_prefix=prefix)
    await pub.start()
    for i in range(50):
        pub.publish(outcome(i))
    # Kafka stays down, so a stop that ignored its timeout would never return: the hang guard catches that
    # without timing anything.
    t0 = time.monotonic()
    await asyncio.wait_for(pub.stop(1.0), HANG_GUARD_S)
    print(f"\nstop(1.0) with Kafka down returned after {time.monotonic() - t0:.2f} s")
    assert pub.stats == PublisherStats(dropped_unavailable=50)
