"""A mixed fleet of partitioners (issue 17): Java/aiokafka-default murmur2 publishers next to librdkafka-default
(CRC32) publishers still give every cooldown, each record decided once (coolant/streams/routing.py).

The librdkafka publisher is emulated by producing to the partition its default partitioner (`consistent_random`,
CRC32 of the key) picks. Two workers share the partitions, so a deployment whose records were split over two
partitions would be decided by two workers with half the failures each, and not cooled.
"""

from __future__ import annotations

import zlib
from typing import Any

import orjson
import pytest

from coolant.topics import partition_of
from tests.support.kafka import read_json, wait_caught_up
from tests.support.records import DEPLOYMENTS, T0, outcome
from tests.support.worker import Case, wait_assigned

pytestmark = pytest.mark.integration

PARTITIONS = 4
FAILURES = 6
"""Per deployment, alternating publishers: 3 of them misrouted when CRC32 and murmur2 disagree."""


def crc32_partition(key: bytes, partitions: int) -> int:
    """librdkafka's default partitioner for a keyed message."""
    return (zlib.crc32(key) & 0xFFFFFFFF) % partitions


def traffic() -> tuple[list[tuple[bytes, bytes, int | None]], list[str]]:
    """(key, value, explicit partition or None for the producer's murmur2) per record, and the deployments."""
    deps = [d for d in DEPLOYMENTS if crc32_partition(d.encode(), PARTITIONS) != partition_of(d, PARTITIONS)][:6]
    records: list[tuple[bytes, bytes, int | None]] = []
    for i in range(FAILURES):
        for j, dep in enumerate(deps):
            rdkafka = i % 2 == 1
            value = outcome(f"mx-{dep}-{i}", T0 + i + j / 10, dep, False, status_code=500,
                            exception_type="InternalServerError", gateway="rdkafka-pod" if rdkafka else "java-pod")
            key = dep.encode()
            records.append((key, value, crc32_partition(key, PARTITIONS) if rdkafka else None))
    return records, deps


async def produce_mixed(bootstrap: str, topic: str, records: list[tuple[bytes, bytes, int | None]]) -> None:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        futs = [await producer.send(topic, key=k, value=v, partition=p) for k, v, p in records]
        for fut in futs:
            await fut
    finally:
        await producer.stop()


async def decided(workers: list[Any], topic: str) -> dict[str, float]:
    """Records the workers decided, by disposition (the probes of `wait_assigned` are successes: `counted`)."""
    out: dict[str, float] = {}
    for w in workers:
        for name, labels, value in await w.metrics():
            if name == "coolant_records_total" and labels.get("topic") == topic:
                out[labels["disposition"]] = out.get(labels["disposition"], 0.0) + value
    return out


async def test_a_mixed_partitioner_fleet_gives_every_cooldown(case: Case, kafka_bootstrap: str) -> None:
    records, deps = traffic()
    assert len(deps) == 6
    workers = [await case.worker(name, kafka_bootstrap, partitions=PARTITIONS) for name in ("a", "b")]
    for w in workers:
        await w.wait_healthy()
    await wait_assigned(workers)
    owners = {w.name: await w.metric("coolant_records_total", topic=case.outcomes) for w in workers}
    case.log(f"both workers assigned ({owners})")

    await produce_mixed(kafka_bootstrap, case.outcomes, records)
    await wait_caught_up(kafka_bootstrap, case.app_id, case.outcomes, on_timeout=case.logs)
    dispositions = await decided(workers, case.outcomes)
    # Each failure decided once as new (a redelivered copy after a rebalance is a `duplicate`, dropped by L2).
    failures = sum(v for k, v in dispositions.items() if k not in ("counted", "duplicate"))
    assert failures == len(records), f"a record lost, or decided as new twice: {dispositions}"

    got = await read_json(kafka_bootstrap, case.cooldowns)
    cooled = {cd["deployment_id"] for cd in got if cd["reason"] == "failure_rate"}
    assert cooled == set(deps), f"not cooled: {sorted(set(deps) - cooled)}"
    misrouted = 0.0
    for w in workers:
        misrouted += await w.metric("coolant_misrouted_total", topic=case.outcomes, gateway="rdkafka-pod")
        assert await w.metric("coolant_misrouted_total", topic=case.outcomes, gateway="java-pod") == 0
    assert misrouted == len(deps) * FAILURES // 2
    warned = "".join(w.log_tail(400) for w in workers)
    assert "partitioner=murmur2_random" in warned
    case.log(f"{len(cooled)} deployments cooled, {misrouted:.0f} records re-published: {orjson.dumps(sorted(cooled))}")
