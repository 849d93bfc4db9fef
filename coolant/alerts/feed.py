"""The Kafka side of `tail` and `alerts`: opening a consumer on the alert topics and decoding what it reads.

`tail` reads without a consumer group (every partition assigned, positioned at the end, the beginning or a
time); `alerts` reads as a consumer group with manual commits, so the loop commits only what it has
finished alerting on. Both create the topics when missing, as `coolant worker` would (a reader started
before the first worker would otherwise meet an auto-created topic with the broker's defaults, or none).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition

from coolant.io.admin import create_missing
from coolant.schemas import InvalidRecord, Record, decode
from coolant.topics import Topics

log = logging.getLogger(__name__)

_DURATION = re.compile(r"\s*([0-9]*\.?[0-9]+)\s*(s|m|h|d)?\s*")
_UNIT = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}


def parse_duration(text: str) -> float:
    """`90`, `90s`, `10m`, `2h`, `1d` -> seconds (> 0); ValueError otherwise."""
    m = _DURATION.fullmatch(text)
    if m is None or float(m.group(1)) <= 0:
        raise ValueError(f"expected a duration like 90s, 10m, 2h or 1d, got {text!r}")
    return float(m.group(1)) * _UNIT[m.group(2)]


def topic_names(prefix: str, cooldowns: bool, transitions: bool) -> list[str]:
    names = Topics(prefix)
    return [t for t, on in ((names.cooldowns, cooldowns), (names.health_transitions, transitions)) if on]


async def ensure(prefix: str, topics: Iterable[str], client_args: dict[str, Any]) -> dict[str, int]:
    """Create the missing topics with the worker's settings; topic -> partition count."""
    wanted = set(topics)
    specs = [s for s in Topics(prefix).specs() if s.name in wanted]
    return await create_missing(specs, client_args)


@dataclass(frozen=True, slots=True)
class Decoded:
    """One message: its record, or why it is not one."""

    topic: str
    partition: int
    offset: int
    value: bytes | None
    record: Record | None
    invalid: str | None

    @property
    def where(self) -> str:
        return f"{self.topic}[{self.partition}]@{self.offset}"


def decode_message(topic: str, partition: int, offset: int, value: bytes | None) -> Decoded:
    if value is None:
        return Decoded(topic, partition, offset, value, None, "empty message (no value)")
    try:
        return Decoded(topic, partition, offset, value, decode(value), None)
    except InvalidRecord as exc:
        return Decoded(topic, partition, offset, value, None, str(exc))


async def open_reader(
    client_args: dict[str, Any], partitions: dict[str, int], start: str | float
) -> AIOKafkaConsumer:
    """A group-less consumer on every partition, positioned at `start`: "end", "beginning" or epoch seconds.

    Positions are resolved before returning, so a record produced after this returns is read.
    """
    consumer = AIOKafkaConsumer(**client_args, group_id=None, enable_auto_commit=False, auto_offset_reset="latest")
    await consumer.start()
    try:
        tps = [TopicPartition(t, p) for t, n in sorted(partitions.items()) for p in range(n)]
        consumer.assign(tps)
        if start == "beginning":
            await consumer.seek_to_beginning(*tps)
        elif start == "end":
            await consumer.seek_to_end(*tps)
        else:
            found = await consumer.offsets_for_times({tp: int(float(start) * 1000) for tp in tps})
            for tp in tps:
                hit = found.get(tp)
                if hit is None:
                    await consumer.seek_to_end(tp)
                else:
                    consumer.seek(tp, hit.offset)
        for tp in tps:
            await consumer.position(tp)
    except BaseException:
        await consumer.stop()
        raise
    return consumer


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]  # aiokafka ships no type hints
    def __init__(
        self,
        on_revoked: Callable[[set[TopicPartition]], Awaitable[None]],
        on_assigned: Callable[[set[TopicPartition]], Awaitable[None]],
    ) -> None:
        self._revoked = on_revoked
        self._assigned = on_assigned

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        await self._revoked(set(revoked))

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        await self._assigned(set(assigned))


async def open_group(
    client_args: dict[str, Any],
    topics: list[str],
    group: str,
    from_beginning: bool,
    on_revoked: Callable[[set[TopicPartition]], Awaitable[None]],
    on_assigned: Callable[[set[TopicPartition]], Awaitable[None]],
) -> AIOKafkaConsumer:
    """A consumer-group member with manual commits: a restart resumes after the last committed record.

    A group without committed offsets starts at the end (only new records) unless `from_beginning`.
    The poll interval is long because one alert may spend minutes in webhook retries between polls.
    """
    consumer = AIOKafkaConsumer(
        **client_args,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest" if from_beginning else "latest",
        max_poll_interval_ms=900_000,
    )
    await consumer.start()
    consumer.subscribe(topics, listener=_Listener(on_revoked, on_assigned))
    return consumer
