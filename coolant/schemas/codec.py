"""Bytes <-> records: the single entry point for every reader (replay, agents, publisher, CLI).

msgspec decodes and validates in one C pass against the record classes themselves, so the
record definitions are the only statement of the schema (and are what JSON Schema is made from).

Before that pass, B1 (docs/input-bounds.md) bounds what a decoder recursing into the record could meet: a
missing value (a tombstone), more than MAX_RECORD_BYTES, or nesting deeper than MAX_DEPTH even in an unknown
field. Where the fast pass refuses what the JSON Schema accepts (an integral float such as `500.0` or `5e2`
for an int, a lone surrogate escape), B5 decides again from the standard JSON reader, so that the schema and
the worker agree. After it, B11 refuses an object that repeats a name: JSON readers keep the last value
silently, so `"deployment_id": "dep-a", "deployment_id": "dep-b"` would cool dep-b from a record keyed dep-a.
"""

from __future__ import annotations

import json
import re
from functools import partial
from itertools import repeat
from operator import attrgetter, is_not
from typing import Any, cast

import msgspec

from coolant.schemas.cooldown import Cooldown
from coolant.schemas.deployment import DeploymentRecord
from coolant.schemas.errors import InvalidRecord
from coolant.schemas.health import Health
from coolant.schemas.outcome import Outcome
from coolant.schemas.transition import HealthTransition

InputRecord = Outcome | Health | DeploymentRecord
Record = Outcome | Health | DeploymentRecord | Cooldown | HealthTransition

_decoder = msgspec.json.Decoder(Record)
_NAMES: dict[type, tuple[int, tuple[int, ...], tuple[str, ...]]] = {}
"""Per record class: 1 if it has a schema tag (a name of its JSON object), the indexes of its nested objects, and
its field names in `astuple`'s order (`msgspec.structs.fields` takes 0.6 ms a call)."""
_encoder = msgspec.json.Encoder()
_AT = re.compile(r" - at `\$\.([^`\[]+)")
_MISSING = re.compile(r"missing required field `([^`]+)`")

MAX_RECORD_BYTES = 1 << 20
"""B1: Kafka's default `message.max.bytes`; records are a few hundred bytes."""
MAX_DEPTH = 32
"""B1: the records nest two levels; unknown fields get room to grow, not a recursion bomb."""
_NESTING = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]')
_SURROGATE = re.compile("[\ud800-\udfff]")
_TS_HINT = (
    " (ts is epoch seconds, below 1e10; a value near 1.7e12 is milliseconds, near 1.7e15 microseconds:"
    " divide by 1000 or 1e6)"
)


def _too_deep(raw: bytes) -> bool:
    """B1 nesting, cheaply: only a record with more than MAX_DEPTH brackets at all is scanned (strings skipped)."""
    if raw.find(b"[") < 0 and raw.find(b"{", raw.find(b"{") + 1) < 0:
        return False  # the usual record: one object, no array (memchr scans; `count` is a slower byte loop)
    if raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH:
        return False
    depth = 0
    for m in _NESTING.finditer(raw):
        c = m.group()
        if c in (b"[", b"{"):
            depth += 1
            if depth > MAX_DEPTH:
                return True
        elif c in (b"]", b"}"):
            depth -= 1
    return False


def _bounded(raw: bytes | bytearray | memoryview | str | None) -> bytes | str:
    """B1: the value itself, or InvalidRecord for a tombstone, an oversize record or a recursion bomb."""
    if raw is None:
        raise InvalidRecord("no value (a tombstone): a record is a JSON object")
    if type(raw) is not bytes and not isinstance(raw, str):
        raw = bytes(raw)
    size = len(raw)
    if size > MAX_RECORD_BYTES:
        raise InvalidRecord(f"record of {size} bytes, above the {MAX_RECORD_BYTES} byte limit")
    if _too_deep(raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw):
        raise InvalidRecord(f"nested deeper than {MAX_DEPTH} levels")
    return raw


def _normalized(value: Any) -> Any:
    """B5: integral floats as ints (JSON Schema's "integer" is a number with no fraction) and lone surrogates
    as U+FFFD, throughout (float fields take the ints back unchanged)."""
    if isinstance(value, float):
        return int(value) if value.is_integer() and abs(value) < 2**63 else value
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_normalized(v) for v in value]
    if isinstance(value, dict):
        return {_normalized(k): _normalized(v) for k, v in value.items()}
    return value


def _shape(cls: type) -> tuple[int, tuple[int, ...], tuple[str, ...]]:
    shape = _NAMES.get(cls)
    if shape is None:
        fields = msgspec.structs.fields(cls)
        tag = 1 if isinstance(getattr(cls, "schema", None), str) else 0  # the records carry their tag as `schema`
        nested = tuple(i for i, f in enumerate(fields) if f.name in ("ratelimit", "window", "allowed_fails_policy"))
        shape = _NAMES[cls] = (tag, nested, tuple(f.name for f in fields))
    return shape


_NOT_NONE = partial(is_not, None)


def _names_of(records: list[Record], block: bytes | None = None) -> int:
    """`sum(map(_names, records))`; for a block of one record class (the usual one) with the per-record work in C
    (`map` over `astuple` and `tuple.count`): a Python call per record was 0.8 s of a 1M-record replay. `block`:
    the records' JSON when it holds no backslash and no `" ` (`_plain_names`), so that a record gives a nested
    object only where `"name":` is in it: a nested field whose name is not is None in every record."""
    kinds = set(map(type, records))
    if len(kinds) != 1:
        return sum(map(_names, records))
    cls = kinds.pop()
    tag, nested, fields = _shape(cls)
    n = len(records) * (tag + len(fields)) - sum(map(tuple.count, map(msgspec.structs.astuple, records), repeat(None)))
    for i in nested:
        if block is None or b'"%s":' % fields[i].encode() in block:
            n += sum(map(_names, filter(_NOT_NONE, map(attrgetter(fields[i]), records))))
    return n


def _names(value: Any) -> int:
    """How many names with a value other than null the JSON of `value` holds (its schema tag and nested objects
    included) if it repeats none and has no unknown field. Cheap (C-level tuple operations): it screens every
    record."""
    if isinstance(value, dict):
        return len(value) - list(value.values()).count(None)
    tag, nested, _ = _shape(type(value))
    t = msgspec.structs.astuple(value)
    n = tag + len(t) - t.count(None)
    for i in nested:
        if t[i] is not None:
            n += _names(t[i])
    return n


_SPACE_AFTER_QUOTE = re.compile(rb'"[ \t\r\n]')
_SPACE_AFTER = re.compile(rb' (?<=" )')
_NEWLINE_AFTER = re.compile(rb'\n(?<="\n)')
"""`_SPACE_AFTER_QUOTE` by its two usual cases. A search from a literal skips to each candidate fast; one from a
character class steps through every byte, and a quote is in every name (0.5 s for a 1M-record replay, against
0.15 s for these two with a memchr for the other two characters)."""


def _space_after_quote(raw: bytes) -> bool:
    """`_SPACE_AFTER_QUOTE.search(raw) is not None`."""
    if b"\t" in raw or b"\r" in raw:
        return _SPACE_AFTER_QUOTE.search(raw) is not None
    return _SPACE_AFTER.search(raw) is not None or _NEWLINE_AFTER.search(raw) is not None


def _may_repeat(raw: bytes | str, names: int) -> bool:
    """B11's screen: False when `raw` surely names nothing twice. In compact JSON each name is `"name":`, a null
    value `":null`, and the same with a backslash in front is inside a text. A count of non-null names that
    differs from `names` (a repeat, an unknown field) or white space after a quote (`"name" :`) sends the record
    to the exact check."""
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")
    given = raw.count(b'":') - raw.count(b'":null')
    if b"\\" in raw:  # memchr: the escaped forms need counting only where there is a backslash at all
        given += raw.count(b'\\":null') - raw.count(b'\\":')
    return given != names or _space_after_quote(raw)


def _repeated(raw: bytes | str) -> str | None:
    """B11, exactly: the first name an object of `raw` (at any depth) gives twice, else None."""
    repeated: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> None:
        if not repeated and len({k for k, _ in items}) != len(items):
            seen: set[str] = set()
            repeated.extend(k for k, _ in items if k in seen or seen.add(k))  # type: ignore[func-returns-value]

    try:
        json.loads(raw, object_pairs_hook=pairs, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return None
    return repeated[0] if repeated else None


def _no_repeats(raw: bytes | str, rec: Record) -> Record:
    """B11: `rec`, unless `raw` gives a name twice (then InvalidRecord naming it)."""
    if _may_repeat(raw, _names(rec)):
        name = _repeated(raw)
        if name is not None:
            raise InvalidRecord(
                "given twice: a JSON object must not repeat a name (RFC 8259 §4); which value was meant is unknown",
                name,
            )
    return rec


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _second_chance(raw: bytes | str) -> Record | None:
    """B5: the record as the standard JSON reader (which JSON Schema validators use) sees it, normalized; None
    when that reader refuses it too, or when the normalized record is still invalid."""
    try:
        obj = json.loads(raw, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict):
        return None
    try:
        return cast(Record, msgspec.convert(_normalized(obj), Record))
    except msgspec.MsgspecError:
        return None


def _invalid(exc: msgspec.MsgspecError) -> InvalidRecord:
    text = str(exc)
    if isinstance(exc, msgspec.DecodeError) and not isinstance(exc, msgspec.ValidationError):
        return InvalidRecord(f"not valid JSON: {text}")
    if ("Invalid value" in text and "`$.schema`" in text) or "missing required field `schema`" in text:
        return InvalidRecord(f"unknown or missing schema: {text}", "schema")
    m = _AT.search(text) or _MISSING.search(text)
    field = m.group(1) if m else None
    if field == "ts" and ("<" in text or "out of range" in text):
        text += _TS_HINT  # B2: the usual cause is a unit
    return InvalidRecord(text, field)


def decode(raw: bytes | bytearray | memoryview | str | None, names_distinct: bool = False) -> Record:
    """Decode and validate one JSON record; InvalidRecord says which field is wrong and how (never another
    exception, whatever the bytes). `names_distinct`: the caller has read `raw` to its end as one flat object
    that gives no name twice (the native scan does), so B11 has nothing left to look for."""
    if not (type(raw) is bytes and len(raw) <= MAX_RECORD_BYTES and raw.find(b"[") < 0 and raw.find(b"{", 1) < 0):
        raw = _bounded(raw)  # the usual record (one flat object) needs no closer look: two memchr scans
    try:
        rec = _decoder.decode(raw)
    except msgspec.MsgspecError as exc:
        second = _second_chance(raw)
        if second is None:
            raise _invalid(exc) from None
        rec = second
    return rec if names_distinct else _no_repeats(raw, rec)


def decode_block(block: bytes) -> list[Record]:
    """Decode newline-delimited records in one call (blank lines skipped); InvalidRecord if any is bad (the
    caller redoes the block line by line with `decode` to say which, and to give B5 its second chance)."""
    try:
        records = _decoder.decode_lines(block)
    except (msgspec.MsgspecError, RecursionError) as exc:
        raise InvalidRecord(str(exc)) from None
    if _plain(block, len(records)) and _plain_names(block, records):
        return records
    return _checked(block, records)


def _plain(block: bytes, records: int) -> bool:
    """B9 for the usual block: no backslash, tab or CR anywhere (memchr scans), as many lines as records (the line
    count is `read_blocks`' own, `newlines`) and no value's end and the next one's start on one line: then no line
    is blank and none holds two records, so none holds part of one, and each holds exactly one. Otherwise (or any
    doubt: a blank line) `_checked` decides."""
    if not records or b"\\" in block or b"\t" in block or b"\r" in block:
        return False
    return newlines(block) + (not block.endswith(b"\n")) == records and not _TWO_ON_A_LINE.search(block)


def _plain_names(block: bytes, records: list[Record]) -> bool:
    """B11's screen, then B1, on a `_plain` block: True when no line can name anything twice (nor nest deeper than
    MAX_DEPTH). With no backslash no string holds a quote, so every `":` ends a name and every `":null` is a null
    value (`_may_repeat`'s corrections are 0); with no tab or CR, and no line break inside a record or after its
    end's `}` on its line, the white space after a quote `_space_after_quote` looks for is a space. So this is
    `_may_repeat`'s answer, screened the same way. A block it passes has no unknown field with a value (each is a
    name the records do not count), so its records nest only as deep as their own classes (2): B1 holds. (Each
    check is the fastest in wall time of those tried: a regex from a literal beats a substring search here.)"""
    if _SPACE_AFTER.search(block):
        return False
    given = block.count(b'":') - block.count(b'":null')
    return given == _names_of(records, block)


def _checked(block: bytes, records: list[Record]) -> list[Record]:
    """B9, B1 and B11 as `decode` applies them, on any block."""
    # B9's one record per line, as `decode` and the native reader apply it: msgspec splits the block by JSON value,
    # not by line, so it takes a record over two lines and two records on one line
    lines = newlines(block) + (not block.endswith(b"\n"))
    if (len(records) != lines and len(records) != _filled(block)) or _TWO_ON_A_LINE.search(block):
        raise InvalidRecord("a line does not hold exactly one record")
    # B1 as `decode` applies it (msgspec skips an unknown field nested 33-999 deep without complaint). Every
    # decoded line holds at least one `{`, so a line nested deeper than MAX_DEPTH brings the block's brackets
    # to at least len(records) + MAX_DEPTH; below that no line needs the per-line scan.
    opens = block.count(b"{") + (block.count(b"[") if b"[" in block else 0)  # memchr before a byte count
    if opens >= len(records) + MAX_DEPTH and any(map(_too_deep, block.split(b"\n"))):
        raise InvalidRecord(f"a line is nested deeper than {MAX_DEPTH} levels")
    # B11 as `decode` applies it, screened over the whole block (a line that repeats a name is found when the
    # caller redoes the block line by line)
    if _may_repeat(block, _names_of(records)) and _repeated_in_lines(block):
        raise InvalidRecord("a line repeats a name")
    return records


_LINES: list[tuple[bytes, int]] = [(b"", 0)]
"""The last block `newlines` counted, and its count."""


def newlines(block: bytes) -> int:
    """`block.count(b"\\n")`, remembered for the last block counted: `read_blocks` (for its line numbers) and
    `decode_block` (B9) both want it of each block, and the count is a byte loop over a megabyte."""
    last, n = _LINES[0]
    if last is block:
        return n
    n = block.count(b"\n")
    _LINES[0] = (block, n)
    return n


_TWO_ON_A_LINE = re.compile(rb"\}[ \t\r]*\{")
"""A value's end and the next one's start on one line (inside a string too: then the per-line pass decides)."""


def _filled(block: bytes) -> int:
    """Lines that hold more than white space: `decode_lines` skips the others."""
    return sum(1 for line in block.split(b"\n") if line.strip())


def _repeated_in_lines(block: bytes) -> bool:
    return any(_repeated(line) is not None for line in block.split(b"\n") if line.strip())


def from_dict(d: Any) -> Record:
    """Validate an already decoded object (YAML fixtures, tests) by the same rules."""
    try:
        return cast(Record, msgspec.convert(d, Record))
    except msgspec.MsgspecError as exc:
        raise _invalid(exc) from None


def encode(record: Record) -> bytes:
    """Compact JSON, the wire and file format (with its `schema` tag)."""
    return _encoder.encode(record)


def to_dict(record: Record) -> dict[str, Any]:
    return msgspec.to_builtins(record)  # type: ignore[no-any-return]
