"""B10 and B11 (docs/input-bounds.md): ids and groups have a length limit, and an object must not repeat a name."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from coolant.io.sources import decode_records
from coolant.schemas import Cooldown, InvalidRecord, Outcome, decode, decode_block, encode
from coolant.schemas.codec import _SPACE_AFTER_QUOTE, _may_repeat, _names, _names_of, _space_after_quote
from coolant.schemas.types import NAME_MAX

HEAD = b'{"schema":"coolant.outcome/1","event_id":"e","ts":1767225600.5,'
GOOD = HEAD + b'"deployment_id":"dep-a","model_group":"g","ok":false}'


@pytest.mark.parametrize("field", ["deployment_id", "model_group"])
def test_a_name_longer_than_the_limit_is_invalid(field: str) -> None:
    at_limit = GOOD.replace(b'"dep-a"' if field == "deployment_id" else b'"g"', b'"' + b"x" * NAME_MAX + b'"')
    assert isinstance(decode(at_limit), Outcome)
    over = GOOD.replace(b'"dep-a"' if field == "deployment_id" else b'"g"', b'"' + b"x" * 100_000 + b'"')
    with pytest.raises(InvalidRecord) as e:
        decode(over)
    assert e.value.field == field and str(NAME_MAX) in str(e.value)


def test_every_record_kind_bounds_its_ids() -> None:
    long = "d" * (NAME_MAX + 1)
    for raw in (
        b'{"schema":"coolant.health/1","event_id":"p","ts":1.0,"deployment_id":"%s","model_group":"g","healthy":true}',
        b'{"schema":"coolant.deployment/1","deployment_id":"%s","model_group":"g"}',
    ):
        with pytest.raises(InvalidRecord):
            decode(raw.replace(b"%s", long.encode()))


REPEATS = [
    ("the same name twice", HEAD + b'"deployment_id":"dep-a","deployment_id":"dep-b","model_group":"g","ok":false}'),
    ("the same value twice", HEAD + b'"deployment_id":"dep-a","deployment_id":"dep-a","model_group":"g","ok":false}'),
    ("escaped in the name",
     HEAD + b'"deployment_id":"dep-a","deployment\\u005fid":"dep-b","model_group":"g","ok":false}'),
    ("with white space", HEAD + b'"deployment_id":"dep-a", "deployment_id" : "dep-b","model_group":"g","ok":false}'),
    ("hidden by an escaped quote",
     HEAD + b'"deployment_id":"dep-a","x\\\\":1,"deployment_id":"dep-b","model_group":"g","ok":false}'),
    ("hidden by an escaped null",
     HEAD + b'"deployment_id":"dep-a","exception_message":"\\":null","deployment_id":"dep-b","model_group":"g",'
     b'"ok":false}'),
    ("ok twice", GOOD.replace(b'"ok":false', b'"ok":false,"ok":true')),
    ("in a nested object", GOOD.replace(b"}", b',"ratelimit":{"remaining_requests":0,"remaining_requests":9}}')),
    ("in an unknown field", GOOD.replace(b"}", b',"x":{"a":1,"a":2}}')),
]


@pytest.mark.parametrize(("what", "raw"), REPEATS, ids=[r[0] for r in REPEATS])
def test_a_repeated_name_is_invalid_with_its_name(what: str, raw: bytes) -> None:
    with pytest.raises(InvalidRecord) as e:
        decode(raw)
    assert "given twice" in str(e.value), what
    with pytest.raises(InvalidRecord):
        decode(raw.decode())  # the same for text


def test_texts_nulls_and_unknown_fields_are_no_repeats() -> None:
    """The screen's other reasons to look closer (an unknown field, white space) are not refusals, and escaped
    quotes and nulls in a text are not names."""
    for raw in (
        GOOD.replace(b"}", b',"exception_message":"{\\"error\\": {\\"code\\": 429}, \\"a\\" : 1}"}'),
        GOOD.replace(b"}", b',"retry_after":null,"status_code":null,"unknown":{"deployment_id":"x"}}'),
        GOOD.replace(b",", b", "),
        GOOD.replace(b"}", b',"exception_message":"a\\":null, \\"b\\":null"}'),
    ):
        assert isinstance(decode(raw), Outcome)


def test_the_usual_records_pass_the_screen_without_the_exact_check() -> None:
    """The screen is what keeps B9 cheap: published records (and cooldowns, with their nulls) need no second
    reading. Mutating `_names` or the screen's count makes this fail."""
    root = Path(__file__).resolve().parents[2]
    lines = [line for line in (root / "examples" / "traffic.jsonl").read_bytes().splitlines() if line.strip()]
    assert lines
    for line in lines:
        rec = decode(line)
        assert not _may_repeat(line, _names(rec)), line
        out = encode(rec)
        assert not _may_repeat(out, _names(decode(out)))
    cd = Cooldown(event_id="cd-1", deployment_id="d", model_group="g", ts=1.0, until=6.0, cooldown_time=5,
                  reason="rate_limited", status_code=None, exception_type=None, exception_received="",
                  trigger_event_id="e", window=__import__("coolant.schemas", fromlist=["Window"]).Window(1.0, 0, 1))
    assert not _may_repeat(encode(cd), _names(cd))


def test_replay_reports_the_line_and_keeps_the_rest() -> None:
    block = GOOD + b"\n" + REPEATS[0][1] + b"\n" + GOOD.replace(b'"e"', b'"e2"') + b"\n"
    with pytest.raises(InvalidRecord):
        decode_block(block)
    problems: list[str] = []
    records = decode_records(("f.jsonl", 1, block), problems.append)
    assert [r.event_id for r in records] == ["e", "e2"]  # type: ignore[union-attr]
    assert len(problems) == 1 and "f.jsonl:2" in problems[0] and "given twice" in problems[0]


_FIELDS = {  # optional outcome fields and values a record may give (or give as null, or leave out)
    "status_code": 429, "exception_type": "RateLimitError", "exception_message": 'quota: "x" : 1', "retry_after": "20",
    "cooldown_time": 5.0, "attempt": 2, "final": False, "source": "router", "gateway": "pod-1", "latency_ms": 80.5,
    "origin": "caller", "ratelimit": {"remaining_requests": 0, "reset_requests": 2.5},
}
HEALTH = b'{"schema":"coolant.health/1","event_id":"p","ts":1.0,"deployment_id":"d","model_group":"g","healthy":false}'


@st.composite
def _lines(draw: st.DrawFn) -> bytes:
    """An outcome line with each optional field given, given as null or left out (or, now and then, a probe)."""
    if draw(st.integers(0, 9)) == 0:
        return HEALTH
    return b"".join(_given(draw, {name: orjson.dumps(value) for name, value in _FIELDS.items()})) + b"}"


def _given(draw: st.DrawFn, values: dict[str, bytes]) -> list[bytes]:
    """GOOD's opening and each of `values` (JSON) given, given as null or left out: the parts of a line."""
    parts = [GOOD[:-1]]
    for name, value in values.items():
        how = draw(st.sampled_from(["out", "null", "value"]))
        if how != "out":
            parts.append(b',"%s":%s' % (name.encode(), b"null" if how == "null" else value))
    return parts


@given(st.lists(_lines(), min_size=1, max_size=12))
def test_the_block_count_of_names_is_the_sum_of_the_records(lines: list[bytes]) -> None:
    """`_names_of` (a block's count, in C for one record class) is `_names` summed, whatever the nulls, nested
    objects and record classes; and a block of them passes the screen as each of its lines does."""
    records = [decode(line) for line in lines]
    assert _names_of(records) == sum(map(_names, records))
    block = b"\n".join(lines) + b"\n"
    each = any(_may_repeat(x, _names(r)) for x, r in zip(lines, records, strict=True))
    assert _may_repeat(block, _names_of(records)) == each


@given(st.lists(st.sampled_from([b'"', b" ", b"\t", b"\r", b"\n", b"a", b":"]), max_size=40).map(b"".join))
def test_the_white_space_screen_is_the_regex(raw: bytes) -> None:
    """`_space_after_quote` (two searches from a literal, the usual case) answers what the one regex answers."""
    assert _space_after_quote(raw) == (_SPACE_AFTER_QUOTE.search(raw) is not None)


@pytest.mark.parametrize("space", [b" ", b"\t", b"\r", b" \t\r"])
def test_a_block_whose_line_hides_a_repeat_behind_white_space_is_refused(space: bytes) -> None:
    hidden = HEAD + b'"deployment_id":"dep-a","deployment_id"' + space + b':"dep-b","model_group":"g","ok":false}'
    with pytest.raises(InvalidRecord):
        decode_block(GOOD + b"\n" + hidden + b"\n")


_PLAIN_VALUES = {  # optional outcome fields with values holding no backslash (a `_plain` block's)
    "status_code": b"429", "exception_type": b'"RateLimitError"', "exception_message": b'"quota: x : 1 {a} [b]"',
    "retry_after": b'"20"', "attempt": b"2", "final": b"false", "gateway": b'"pod-1"', "latency_ms": b"80.5",
    "ratelimit": b'{"remaining_requests":0,"reset_requests":2.5}',
}


@st.composite
def _plain_line(draw: st.DrawFn) -> bytes:
    """A line as published (compact, each optional field given, given as null or left out), or now and then with
    one of what B11 must see: a name given twice (with a value, as null, or both), an unknown field, white space
    around a name or a value, a repeat hidden by an escaped `":null` in a text."""
    if draw(st.integers(0, 9)) == 0:
        return HEALTH
    parts = _given(draw, _PLAIN_VALUES)
    if draw(st.integers(0, 3)) == 0:
        name, value = draw(st.sampled_from(sorted(_PLAIN_VALUES.items())))
        key = b',"%s":' % name.encode()
        parts.append(draw(st.sampled_from([
            key + value + key + value, key + b"null" + key + value, key + value + key + b"null",
            key + b"null" + key + b"null", b',"x":1', b',"x":null', b',"x":{"a":{"b":[1]}}', b',"ok":false',
            b',"deployment_id" :"d"', b',"model_group": "g"', b',"origin":"a" ',
            b',"source":"x\\":null","origin":"a","origin":"b"', b',"x\\\\":1',
        ])))
    return b"".join(parts) + b"}"


@st.composite
def _plain_blocks(draw: st.DrawFn) -> bytes:
    """Lines joined mostly one a line; now and then two on a line, one over two lines, a blank line, or no final
    line break."""
    lines = draw(st.lists(_plain_line(), min_size=1, max_size=8))
    out = lines[0]
    for line in lines[1:]:
        sep = draw(st.sampled_from([b"\n"] * 8 + [b"", b" ", b"\n\n"]))
        if draw(st.integers(0, 9)) == 0:
            line = line.replace(b",", b",\n", 1)  # this record over two lines
        out += sep + line
    return out + draw(st.sampled_from([b"\n", b"\n", b"", b"\n\n", b" \n"]))


@given(_plain_blocks())
@example(GOOD[:-1] + rb',"x\\":1}' + b"\n" + GOOD)  # a name that ends in a backslash: not a plain block
def test_the_usual_blocks_screen_is_the_general_one(block: bytes) -> None:
    """`decode_block`'s checks for a block with no backslash, tab or CR (`_plain`, `_plain_names`) answer what the
    general ones (`_checked`: B9's line counts, B1, `_may_repeat`) answer, and a block it takes is what `decode`
    makes of each line. Dropping the line count, the two-on-a-line search, the white-space search, the nested names or
    the backslash test fails it."""
    from coolant.schemas.codec import _checked, _decoder, _plain, _plain_names

    try:
        records = _decoder.decode_lines(block)
    except Exception:
        return
    if _plain(block, len(records)):
        lines = block.split(b"\n")
        assert len(lines) - (block.endswith(b"\n")) == len(records)  # B9: one record per line
        assert all(line.strip().startswith(b"{") and line.strip().endswith(b"}") for line in lines if line)
        assert _plain_names(block, records) == (not _may_repeat(block, _names_of(records)))
    try:
        taken = decode_block(block)
    except InvalidRecord:
        return
    each = [decode(line) for line in block.split(b"\n") if line.strip()]  # raises where the block should have
    assert taken == each
    assert _checked(block, records) == records


def test_a_plain_block_with_a_repeat_or_a_split_record_is_redone_line_by_line() -> None:
    twice = GOOD.replace(b'"ok":false', b'"ok":false,"ok":true')
    split = GOOD.replace(b",", b",\n", 1)
    for block in (GOOD + b"\n" + twice + b"\n", GOOD + b" " + GOOD + b"\n" + split + b"\n",
                  GOOD + b"\n" + GOOD.replace(b"}", b',"deployment_id" :"dep-b"}') + b"\n"):
        with pytest.raises(InvalidRecord):
            decode_block(block)
    assert len(decode_block(GOOD + b"\n" + GOOD.replace(b'"e"', b'"e2"'))) == 2  # no final line break
