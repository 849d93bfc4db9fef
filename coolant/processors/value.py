"""`value`: the dataclass decorator of the values the engine makes per record (`Step`, `Failure`, `Candidate`).

To the type checker a `value` class is a frozen dataclass: mypy rejects any assignment to its fields. At run
time it is a slotted dataclass with the frozen class's equality, hash and repr, minus the frozen `__init__`,
which sets each field through `object.__setattr__` at about three times the cost of a plain assignment. The
engine makes two or three of these per failed record, so on a replay of an incident that cost was a sizeable
share of the whole run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar, dataclass_transform

T = TypeVar("T")


@dataclass_transform(frozen_default=True)
def value(cls: type[T]) -> type[T]:
    return dataclass(slots=True, unsafe_hash=True)(cls)
