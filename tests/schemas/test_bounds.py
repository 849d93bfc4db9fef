"""B1-B5 (docs/input-bounds.md): `decode` raises only InvalidRecord, whatever the bytes, and bounds every value."""

from __future__ import annotations

import pytest

from coolant.schemas import InvalidRecord, Outcome, decode, decode_block, encode
from coolant.schemas.codec import MAX_DEPTH, MAX_RECORD_BYTES

GOOD = (b'{"schema":"coolant.outcome/1","event_id":"e","ts":1767225600.5,"deployment_id":"d",'
        b'"model_group":"g","ok":false')


def _deep(n: int) -> bytes:
    return b"[" * n + b"]" * n


HOSTILE: list[tuple[str, bytes | None, str]] = [
    ("tombstone", None, "tombstone"),
    ("10k deep", _deep(10_000), "nested deeper"),
    ("10k deep in an unknown field", GOOD + b',"x":' + _deep(10_000) + b"}", "nested deeper"),
    ("deep objects", b'{"a":' * 5000 + b"1" + b"}" * 5000, "nested deeper"),
    ("oversize", GOOD + b',"x":"' + b"a" * MAX_RECORD_BYTES + b'"}', "byte limit"),
    ("ts 1e300", GOOD.replace(b"1767225600.5", b"1e300") + b"}", "ts"),
    ("ts ms", GOOD.replace(b"1767225600.5", b"1767225600000") + b"}", "milliseconds"),
    ("cooldown_time 1e308", GOOD + b',"cooldown_time":1e308}', "cooldown_time"),
    ("status 10**25", GOOD + b',"status_code":10000000000000000000000000}', "status_code"),
    ("status 0", GOOD + b',"status_code":0}', "status_code"),
    ("attempt 2**63", GOOD + b',"attempt":9223372036854775808}', "attempt"),
    ("not utf-8", GOOD + b',"exception_message":"\xff\xfe"}', "JSON"),
]


@pytest.mark.parametrize(("why", "raw", "says"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_records_are_invalid_with_a_reason(why: str, raw: bytes | None, says: str) -> None:
    with pytest.raises(InvalidRecord) as e:
        decode(raw)
    assert says in str(e.value), (why, str(e.value))


def test_depth_at_the_limit_is_accepted_and_strings_do_not_count() -> None:
    inside = MAX_DEPTH - 1  # the record object itself is one level
    rec = decode(GOOD + b',"x":' + _deep(inside) + b',"y":"' + b"[" * 100 + b'"}')
    assert isinstance(rec, Outcome)
    with pytest.raises(InvalidRecord):
        decode(GOOD + b',"x":' + _deep(inside + 1) + b"}")


def test_escaped_quotes_do_not_fool_the_depth_scan() -> None:
    rec = decode(GOOD + b',"x":"\\"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\\""}')
    assert isinstance(rec, Outcome)


def test_a_block_with_a_deep_line_is_refused_so_replay_redoes_it_line_by_line() -> None:
    good = encode(decode(GOOD + b"}"))
    with pytest.raises(InvalidRecord):
        decode_block(good + b"\n" + GOOD + b',"x":' + _deep(5000) + b"}\n" + good)
    assert len(decode_block(b"\n".join([good] * 40))) == 40  # many records, each shallow: the fast path


@pytest.mark.parametrize("depth", [33, 40, 900])
def test_a_block_refuses_what_decode_refuses_below_msgspecs_own_recursion_limit(depth: int) -> None:
    """msgspec skips an unknown field nested this deep without complaint; the block must still refuse the line,
    also when many shallow records around it keep the block's bracket count low per line."""
    good = encode(decode(GOOD + b"}"))
    deep = GOOD + b',"x":' + _deep(depth - 1) + b"}"  # `depth` levels with the record's own object
    with pytest.raises(InvalidRecord):
        decode(deep)
    for block in (deep, b"\n".join([good] * 500 + [deep]), b"\n".join([deep, *[good] * 3])):
        with pytest.raises(InvalidRecord):
            decode_block(block)
    at_limit = GOOD + b',"x":' + _deep(31) + b"}"
    assert len(decode_block(b"\n".join([good] * 500 + [at_limit]))) == 501
