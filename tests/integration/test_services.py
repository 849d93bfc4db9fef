"""Integration smoke tests: prove the ``kafka_bootstrap`` / ``redis_url`` fixtures reach real services."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from redis.asyncio import Redis

from tests.support.brokers import LocalKafka


async def test_redis_set_pxat_expires(redis_url: str) -> None:
    r = Redis.from_url(redis_url)
    key = f"test:pxat:{uuid.uuid4().hex}"
    try:
        until_ms = int(time.time() * 1000) + 1000
        assert await r.set(key, "val", pxat=until_ms)
        assert await r.get(key) == b"val"
        pttl = await r.pttl(key)
        assert 0 < pttl <= 1000 + 50, pttl  # small allowance for client/server clock skew
        deadline = time.monotonic() + 5
        while await r.exists(key) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert await r.exists(key) == 0
        assert await r.pttl(key) == -2  # -2: no such key
    finally:
        await r.delete(key)
        await r.aclose()


async def test_kafka_produce_consume_roundtrip(kafka_bootstrap: str) -> None:
    topic = f"test-services-{uuid.uuid4().hex[:12]}"
    payloads = [f"payload-{i}".encode() for i in range(10)]
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        resp = await admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
        assert [err[1] for err in resp.topic_errors] == [0], resp.topic_errors

        producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
        await producer.start()
        try:
            assert await producer.partitions_for(topic) == {0, 1, 2}
            for i, value in enumerate(payloads):
                await producer.send_and_wait(topic, value, key=str(i).encode(), partition=i % 3)
        finally:
            await producer.stop()

        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=kafka_bootstrap,
            group_id=f"test-services-{uuid.uuid4().hex}",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await consumer.start()
        got: list[bytes] = []
        partitions: set[int] = set()
        try:
            deadline = time.monotonic() + 30
            while len(got) < len(payloads) and time.monotonic() < deadline:
                for tp, msgs in (await consumer.getmany(timeout_ms=1000)).items():
                    partitions.add(tp.partition)
                    got.extend(m.value for m in msgs if m.value is not None)
        finally:
            await consumer.stop()
        assert sorted(got) == sorted(payloads)
        assert partitions == {0, 1, 2}
    finally:
        await admin.delete_topics([topic])
        await admin.close()


def broker_processes(broker: LocalKafka) -> list[int]:
    """Live processes running this broker (its own properties file on their command line), whatever the pidfile
    says."""
    mark = str(broker.node / "server.properties").encode()
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError):
                cmdline = (proc / "cmdline").read_bytes()
                if mark in cmdline and b"kafka.Kafka" in cmdline and (proc / "stat").read_text().split()[2] != "Z":
                    found.append(int(proc.name))
    return found


def test_a_broker_start_that_times_out_leaves_no_broker(tmp_path: Path, kafka_bootstrap: str) -> None:
    """The broker is launched, then `scripts/kafka-local start` gives up waiting for it: the broker, a daemon of
    its own session, is killed rather than left running after the test (kafka_bootstrap: its jars exist)."""
    broker = LocalKafka(tmp_path)
    broker.env["KAFKA_START_TIMEOUT"] = "1"  # the broker cannot answer within 1 s
    with pytest.raises(RuntimeError, match="failed"):
        broker.start()
    assert (broker.node / "kafka.pid").exists(), "the script's own timeout leaves its pidfile (the case reaped)"
    assert broker_processes(broker) == []


def test_a_broker_start_past_the_callers_timeout_leaves_no_broker(tmp_path: Path, kafka_bootstrap: str) -> None:
    """The caller's timeout kills the script mid-start (`subprocess.run`'s timeout kills the script, not the
    broker it launched): the broker is killed too."""
    broker = LocalKafka(tmp_path)
    broker.env["PYTHON"] = "false"  # the script's readiness probe never succeeds: it waits out its own 90 s
    with pytest.raises(RuntimeError, match="timed out after 30 s"):
        broker.start(timeout=30)
    assert (broker.node / "kafka.pid").exists(), "the broker was launched before the caller gave up"
    assert broker_processes(broker) == []
