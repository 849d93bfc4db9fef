"""Constrained field types shared by the records."""

from __future__ import annotations

from typing import Annotated

import msgspec

EventId = Annotated[str, msgspec.Meta(min_length=1, max_length=128)]
NonNegativeInt = Annotated[int, msgspec.Meta(ge=0)]
NonNegativeFloat = Annotated[float, msgspec.Meta(ge=0)]
