"""Typed field readers shared by every record: one place for the contract's type rules.

JSON has no int/float distinction worth trusting, so a float field accepts ints; a bool is
never a number (Python's bool is an int subclass, hence the `type(...) is` checks).
An optional field given as null is the same as an absent one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from coolant.schemas.errors import InvalidRecord

_MISSING: Any = object()


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def req_str(d: Mapping[str, Any], name: str) -> str:
    v = d.get(name, _MISSING)
    if v is _MISSING:
        raise InvalidRecord("missing required field", name)
    if type(v) is not str:
        raise InvalidRecord(f"must be a string, got {_type_name(v)}", name)
    return v


def req_event_id(d: Mapping[str, Any]) -> str:
    v = req_str(d, "event_id")
    if not 1 <= len(v) <= 128:
        raise InvalidRecord(f"must be 1-128 characters, got {len(v)}", "event_id")
    return v


def req_float(d: Mapping[str, Any], name: str) -> float:
    v = d.get(name, _MISSING)
    if v is _MISSING:
        raise InvalidRecord("missing required field", name)
    t = type(v)
    if t is float:
        return v  # type: ignore[no-any-return]
    if t is int:
        return float(v)
    raise InvalidRecord(f"must be a number, got {_type_name(v)}", name)


def req_bool(d: Mapping[str, Any], name: str) -> bool:
    v = d.get(name, _MISSING)
    if v is _MISSING:
        raise InvalidRecord("missing required field", name)
    if type(v) is not bool:
        raise InvalidRecord(f"must be true or false, got {_type_name(v)}", name)
    return v


def opt_str(d: Mapping[str, Any], name: str) -> str | None:
    v = d.get(name)
    if v is None or type(v) is str:
        return v
    raise InvalidRecord(f"must be a string or null, got {_type_name(v)}", name)


def opt_float(d: Mapping[str, Any], name: str) -> float | None:
    v = d.get(name)
    t = type(v)
    if v is None or t is float:
        return v
    if t is int:
        return float(v)
    raise InvalidRecord(f"must be a number or null, got {_type_name(v)}", name)


def opt_int(d: Mapping[str, Any], name: str) -> int | None:
    v = d.get(name)
    if v is None or type(v) is int:
        return v
    raise InvalidRecord(f"must be an integer or null, got {_type_name(v)}", name)


def opt_bool(d: Mapping[str, Any], name: str, default: bool) -> bool:
    v = d.get(name)
    if v is None:
        return default
    if type(v) is bool:
        return v
    raise InvalidRecord(f"must be true or false, got {_type_name(v)}", name)


def opt_map(d: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    v = d.get(name)
    if v is None or type(v) is dict:
        return v
    raise InvalidRecord(f"must be an object or null, got {_type_name(v)}", name)
