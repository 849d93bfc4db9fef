"""Issue 26's hostile mix, built once for the live test (`test_hardening.py`) and the soak (`bench/hostile_soak.py`).

On one worker, in this order: 50 hostile outcome records and 12 hostile health records of the kinds
docs/input-bounds.md covers (tombstones, empty values, invalid UTF-8, 10,000-deep JSON, a 2 MB record, NaN, `ts`
in milliseconds, wrong types, unknown schema versions, ids with glob characters and newlines, a key that does not
match the record); then a flood of health records for distinct unregistered ids, each on another partition
than its id's (misrouted, so each is re-published); then valid outcome traffic. The report's flood had 1 KB ids;
B10 (docs/input-bounds.md) now dead-letters ids longer than `NAME_MAX` characters, so the flood's ids are of that
length, the longest that is still decided (and re-published), and 1 KB ids are among the hostile records.
In the adversarial run that found issue 26 this mix stalled the health lane and Faust's commit; no part of it
did alone.

Every record is labelled: `bad` ones must be dead-lettered with a reason, tombstones counted, the others decided
(so `coolant replay` of the decided ones must give what the worker gave).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import orjson
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from coolant.schemas.types import NAME_MAX
from coolant.topics import Topics, partition_of
from tests.support.records import fleet_traffic, outcome

Kind = Literal["bad", "tombstone", "decided"]
BIG = 2 * 1024 * 1024
"""The oversized record: twice the decoder's 1 MiB bound (B1), so its topic must accept it (`allow_big_records`)."""
LONG_ID = 1024
"""A 1 KB deployment id, as the report's flood had: beyond B10 (`NAME_MAX`), so such a record is dead-lettered."""


@dataclass(frozen=True, slots=True)
class Sent:
    """One record of the mix: where it goes and what must become of it."""

    topic: Literal["outcomes", "health"]
    what: str
    key: bytes | None
    value: bytes | None
    kind: Kind
    partition: int | None = None
    """Explicit partition (None: the key's murmur2 partition, as Kafka's default partitioner puts it)."""


def _deep(n: int) -> bytes:
    return b"[" * n + b"]" * n


def _health(eid: str, ts: float, dep: str, healthy: bool = False, **fields: Any) -> bytes:
    rec: dict[str, Any] = {"schema": "coolant.health/1", "event_id": eid, "ts": ts, "deployment_id": dep,
                           "model_group": "probed-group", "healthy": healthy, "prober": "soak-prober"}
    rec.update(fields)
    return orjson.dumps(rec)


def _hostile_outcomes(now: float, tag: str) -> list[Sent]:
    """About 50 outcome records: most invalid (dead-lettered), some odd but valid (decided)."""
    def rec(eid: str, **fields: Any) -> bytes:
        fields.setdefault("status_code", 500)
        fields.setdefault("exception_type", "InternalServerError")
        return outcome(f"{tag}-{eid}", fields.pop("ts", now), fields.pop("dep", "dep-03"), False, **fields)

    good = rec("base")
    bad: list[tuple[str, bytes]] = [
        ("empty value", b""),
        ("one space", b" "),
        ("not json", b"not json"),
        ("json null", b"null"),
        ("json string", b'"coolant.outcome/1"'),
        ("json array", b"[]"),
        ("empty object", b"{}"),
        ("invalid utf-8 in a value", good.replace(b"InternalServerError", b"Internal\xff\xfeError")),
        ("invalid utf-8 everywhere", b"\xff\xfe\xfd" * 100),
        ("10k deep array", _deep(10_000)),
        ("10k deep in an unknown field", good[:-1] + b',"x":' + _deep(10_000) + b"}"),
        ("10k deep objects", b'{"a":' * 10_000 + b"1" + b"}" * 10_000),
        ("2 MB record", good[:-1] + b',"pad":"' + b"x" * BIG + b'"}'),
        ("NaN ts", rec("nan").replace(f'"ts":{orjson.dumps(now).decode()}'.encode(), b'"ts":NaN')),
        ("NaN latency", rec("nanl", latency_ms=1.5).replace(b'"latency_ms":1.5', b'"latency_ms":NaN')),
        ("Infinity status", rec("inf").replace(b'"status_code":500', b'"status_code":Infinity')),
        ("ts in ms", rec("ms", ts=now * 1000)),
        ("ts in us", rec("us", ts=now * 1_000_000)),
        ("ts 1e300", rec("e300", ts=1e300)),
        ("negative ts", rec("neg", ts=-1.0)),
        ("ts 10 years ahead", rec("future", ts=now + 10 * 365 * 86400)),
        ("ts a string", rec("tss").replace(f'"ts":{orjson.dumps(now).decode()}'.encode(), b'"ts":"yesterday"')),
        ("ok a string", rec("okstr").replace(b'"ok":false', b'"ok":"no"')),
        ("ok missing", rec("okmiss").replace(b',"ok":false', b"")),
        ("deployment_id a number", rec("depnum").replace(b'"deployment_id":"dep-03"', b'"deployment_id":3')),
        ("deployment_id null", rec("depnull").replace(b'"deployment_id":"dep-03"', b'"deployment_id":null')),
        ("event_id an object", rec("eidobj").replace(f'"event_id":"{tag}-eidobj"'.encode(), b'"event_id":{}')),
        ("status_code a string", rec("scstr").replace(b'"status_code":500', b'"status_code":"500"')),
        ("status_code 10**25", rec("sc25").replace(b'"status_code":500', b'"status_code":' + b"1" + b"0" * 25)),
        ("status_code 99", rec("sc99", status_code=99)),
        ("attempt negative", rec("att", attempt=-1)),
        ("cooldown_time 1e308", rec("ct", cooldown_time=1e308)),
        ("schema outcome/2", rec("v2").replace(b"coolant.outcome/1", b"coolant.outcome/2")),
        ("schema outcome/0", rec("v0").replace(b"coolant.outcome/1", b"coolant.outcome/0")),
        ("schema missing", rec("nos").replace(b'"schema":"coolant.outcome/1",', b"")),
        ("schema a number", rec("snum").replace(b'"coolant.outcome/1"', b"1")),
        ("a health record on outcomes", _health(f"{tag}-hon", now, "dep-03")),
        ("a cooldown on outcomes", orjson.dumps({"schema": "coolant.cooldown/1", "event_id": f"{tag}-cd"})),
        ("a 1 KB id", rec("long", dep="x" * LONG_ID)),
    ]
    odd: list[tuple[str, bytes, bytes]] = [  # valid: decided (unregistered ids are counted, never cooled)
        ("id with a glob star", b"dep-*", rec("glob1", dep="dep-*")),
        ("id with glob classes", b"dep-?[0-9]", rec("glob2", dep="dep-?[0-9]")),
        ("id of one star", b"*", rec("glob3", dep="*")),
        ("id with a newline", b"dep-03\nfake", rec("nl1", dep="dep-03\nfake")),
        ("id forging a log line", b"x", rec("nl2", dep="x\r\n2026-01-01 ERROR forged")),
        ("key of another record", b"dep-05", rec("km1", dep="unregistered-km-1")),
        ("key of another record, again", b"dep-11", rec("km2", dep="unregistered-km-2")),
        ("no key", b"", rec("km3", dep="unregistered-km-3")),
    ]
    out = [Sent("outcomes", what, b"dep-03", value, "bad") for what, value in bad]
    out += [Sent("outcomes", what, key or None, value, "decided") for what, key, value in odd]
    out += [Sent("outcomes", f"tombstone {i}", b"dep-03", None, "tombstone") for i in range(3)]
    return out


def _hostile_health(now: float, tag: str) -> list[Sent]:
    """Twelve health records: eight invalid, one tombstone, three odd but valid."""
    base = _health(f"{tag}-h", now, "dep-04")
    ts = f'"ts":{orjson.dumps(now).decode()}'.encode()
    bad = [
        ("health: empty value", b""),
        ("health: invalid utf-8", base.replace(b"soak-prober", b"soak\xff\xfeprober")),
        ("health: 10k deep", base[:-1] + b',"x":' + _deep(10_000) + b"}"),
        ("health: NaN ts", _health(f"{tag}-hnan", now, "dep-04").replace(ts, b'"ts":NaN')),
        ("health: ts in ms", _health(f"{tag}-hms", now * 1000, "dep-04")),
        ("health: healthy a string", _health(f"{tag}-hstr", now, "dep-04").replace(b'"healthy":false',
                                                                                   b'"healthy":"yes"')),
        ("health: schema health/2", _health(f"{tag}-hv2", now, "dep-04").replace(b"health/1", b"health/2")),
        ("health: a 1 KB id", _health(f"{tag}-hlong", now, "y" * LONG_ID)),
    ]
    odd = [
        ("health: id with a glob", b"dep-[*]", _health(f"{tag}-hglob", now, "dep-[*]")),
        ("health: id with a newline", b"dep-04", _health(f"{tag}-hnl", now, "dep-04\nforged")),
        ("health: key of another record", b"dep-09", _health(f"{tag}-hkm", now, "unregistered-hkm")),
    ]
    out = [Sent("health", what, b"dep-04", value, "bad") for what, value in bad]
    out.append(Sent("health", "health: tombstone", b"dep-04", None, "tombstone"))
    out += [Sent("health", what, key, value, "decided") for what, key, value in odd]
    return out


def _flood(now: float, tag: str, n: int, partitions: int) -> list[Sent]:
    """`n` health records for distinct unregistered ids of `NAME_MAX` characters, each keyed by another id and put
    on a partition that is not its id's murmur2 partition (misrouted: each is re-published)."""
    out = []
    for i in range(n):
        dep = f"{tag}-flood-{i:05d}-".ljust(NAME_MAX, "x")
        right = partition_of(dep, partitions)
        key = f"{tag}-other-{i}".encode()
        wrong = (right + 1 + i % (partitions - 1)) % partitions if partitions > 1 else right
        out.append(Sent("health", f"flood {i}", key, _health(f"{tag}-fl-{i}", now + i / 1000, dep), "decided",
                        partition=wrong))
    return out


def build(now: float, tag: str, partitions: int, *, flood: int = 300, valid: int = 1500) -> list[Sent]:
    """The mix, in the order it is produced: hostile outcomes and health, the flood, then `valid` outcomes
    (fleet traffic over the harness's deployments, dated in the minute before `now`)."""
    mix = _hostile_outcomes(now, tag) + _hostile_health(now, tag) + _flood(now, tag, flood, partitions)
    for line in fleet_traffic(valid, seed=11, t0=now - valid / 10 - 60, tag=tag):
        dep = orjson.loads(line)["deployment_id"]
        mix.append(Sent("outcomes", "valid", dep.encode(), line, "decided"))
    assert {s.value for s in mix if s.what == "valid"}.isdisjoint({None}), "valid records carry values"
    return mix


def decided_lines(mix: list[Sent]) -> list[bytes]:
    """The outcome and health records the worker decides, in production order per topic (replay's input)."""
    return [s.value for s in mix if s.kind == "decided" and s.value is not None]


async def allow_big_records(bootstrap: str, topics: list[str]) -> None:
    """Let `topics` take the oversized record (a topic's `max.message.bytes`; the broker's default is 1 MB)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.alter_configs([
            ConfigResource(ConfigResourceType.TOPIC, topic, configs={"max.message.bytes": str(BIG * 2)})
            for topic in topics
        ])
    finally:
        await admin.close()


async def produce(bootstrap: str, prefix: str, mix: list[Sent]) -> list[Any]:
    """Send the mix in order and wait until the broker has every record; the record metadata, in mix order."""
    names = Topics(prefix)
    topic = {"outcomes": names.outcomes, "health": names.health}
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, max_batch_size=1 << 20,
                                max_request_size=BIG * 2, enable_idempotence=True)
    await producer.start()
    try:
        futs = [await producer.send(topic[s.topic], key=s.key, value=s.value, partition=s.partition) for s in mix]
        return [await f for f in futs]
    finally:
        await producer.stop()

