"""Kafka for tests (a pytest plugin, registered in tests/conftest.py): the `kafka_bootstrap` session fixture
(`KAFKA_BOOTSTRAP`, else testcontainers when a Docker engine answers, else `scripts/kafka-local start`; failing all
three the test skips, or fails under `REQUIRE_INTEGRATION=1`), and producing, reading and topic helpers."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from coolant.io import admin as kafka_admin
from coolant.io.admin import ensure_topics
from coolant.topics import Topics
from tests import containers_support as containers
from tests.support.brokers import shared_service
from tests.support.records import key_of
from tests.support.waiting import wait_for


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    yield from shared_service("kafka", "KAFKA_BOOTSTRAP", "KAFKA_TEST_IMAGE", containers.DEFAULT_KAFKA_IMAGE,
                              containers.kafka_container, "kafka-local")


async def wait_sentinels(bootstrap: str, topic: str, lines: list[bytes], timeout: float = 90.0,
                         on_timeout: Callable[[], str] | None = None) -> list[dict[str, Any]]:
    """Until the cooldowns of every sentinel among `lines` are on `topic`; returns the topic's records then."""
    want = {orjson.loads(line)["event_id"] for line in lines if b'"sentinel-' in line}
    got: list[dict[str, Any]] = []

    async def all_there() -> bool:
        nonlocal got
        try:
            got = await read_json(bootstrap, topic)
        except Exception:  # a broker coming back: poll again
            return False
        missing = want - {cd["trigger_event_id"] for cd in got}
        return not missing

    await wait_for(all_there, f"the cooldowns of {len(want)} sentinel records on {topic}", timeout, 1.0, on_timeout)
    return got


async def produce(bootstrap: str, topic: str, records: Iterable[tuple[bytes | None, bytes]]) -> list[Any]:
    """Send in order (one partition per key keeps each deployment's order) and wait until all are acked."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, max_batch_size=1 << 20,
                                enable_idempotence=True)
    await producer.start()
    try:
        futs = [await producer.send(topic, key=k, value=v) for k, v in records]
        return list(await asyncio.gather(*futs))
    finally:
        await producer.stop()


async def produce_lines(bootstrap: str, topic: str, lines: Iterable[bytes]) -> list[Any]:
    return await produce(bootstrap, topic, ((key_of(line), line) for line in lines))


async def _partitions(client: AIOKafkaConsumer, topic: str) -> list[TopicPartition]:
    cluster = await client._client.fetch_all_metadata()  # fresh metadata (partitions_for_topic may be stale)
    parts = cluster.partitions_for_topic(topic)
    return [TopicPartition(topic, p) for p in sorted(parts or ())]


async def read_topic(bootstrap: str, topic: str, timeout: float = 30.0) -> list[Any]:
    """Every message of `topic` from the beginning up to its current end offsets (a fresh, group-less reader)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                auto_offset_reset="earliest")
    await consumer.start()
    try:
        tps = await _partitions(consumer, topic)
        if not tps:
            return []
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        await consumer.seek_to_beginning(*tps)
        out: list[Any] = []
        deadline = time.monotonic() + timeout
        while True:
            pending = [tp for tp in tps if await consumer.position(tp) < ends[tp]]
            if not pending:
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"could not read {topic} to its end offsets {ends} within {timeout} s")
            batches = await consumer.getmany(*pending, timeout_ms=500)
            for msgs in batches.values():
                out.extend(m for m in msgs if m.offset < ends[TopicPartition(m.topic, m.partition)])
        out.sort(key=lambda m: (m.partition, m.offset))
        return out
    finally:
        await consumer.stop()


async def read_json(bootstrap: str, topic: str) -> list[dict[str, Any]]:
    return [orjson.loads(m.value) for m in await read_topic(bootstrap, topic)]


async def group_lag(bootstrap: str, group: str, topic: str) -> int | None:
    """Records of `topic` not yet committed by consumer group `group` (None when the topic is unknown)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await consumer.start()
    await admin.start()
    try:
        tps = await _partitions(consumer, topic)
        if not tps:
            return None
        ends = await consumer.end_offsets(tps)
        committed = await admin.list_consumer_group_offsets(group, partitions=tps)
        lag = 0
        for tp in tps:
            meta = committed.get(tp)
            done = meta.offset if meta is not None and meta.offset >= 0 else 0
            lag += max(0, ends[tp] - done)
        return lag
    finally:
        await admin.close()
        await consumer.stop()


async def wait_caught_up(bootstrap: str, group: str, topic: str, timeout: float = 90.0,
                         on_timeout: Callable[[], str] | None = None) -> None:
    """Until `group` has committed every record of `topic`. Faust commits a record's offset only once its agent
    is done with it (cooldown sent and acknowledged), so afterwards the outputs of all input are durable."""

    async def caught_up() -> bool:
        try:
            return await group_lag(bootstrap, group, topic) == 0
        except Exception:  # the broker restarting, a coordinator moving: just poll again
            return False

    await wait_for(caught_up, f"consumer group {group} to commit all of {topic}", timeout, 1.0, on_timeout)


async def create_topics(bootstrap: str, prefix: str, partitions: int, timeout: float = 30.0) -> None:
    """Create the contract's topics under `prefix` exactly as `coolant worker` does. Not used by default (the
    worker creates its own topics); `Case(precreate=True)` takes the worker's topic creation out of a test.
    """
    await asyncio.wait_for(ensure_topics(Topics(prefix), {"bootstrap_servers": bootstrap}, partitions), timeout)


async def delete_topics(bootstrap: str, prefixes: Iterable[str]) -> None:
    """Best effort: drop the topics a test created (its prefix, its app id's changelogs)."""
    with contextlib.suppress(Exception):
        await kafka_admin.delete_topics(prefixes, {"bootstrap_servers": bootstrap, "request_timeout_ms": 10000})
