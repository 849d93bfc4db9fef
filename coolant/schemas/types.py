"""Constrained field types shared by the records, and the bounds every input number is held to (docs/input-bounds.md).

The bounds keep every value a record can carry inside what the rest of the pipeline computes with: a
timestamp a `datetime` can show and Redis' `PXAT` accepts, a duration that cannot overflow `ts + D`, an int
that fits in 64 bits. They are part of the record classes, so the JSON Schema says the same (B2-B4).
"""

from __future__ import annotations

from typing import Annotated

import msgspec

TS_MAX = 10_000_000_000.0
"""B2: epoch seconds below 1e10 (year 2286). A millisecond timestamp of today (~1.7e12) is far above it."""
DURATION_MAX = 31_536_000.0
"""B3: a cooldown time is at most 365 days either way (a record's negative value is ignored by T1)."""
LATENCY_MAX = 1e15
"""B3: latencies are only carried, never computed with; the bound only excludes infinities."""
INT_MAX = 2**31 - 1
"""B4: counters (`attempt`, `allowed_fails`) fit in 32 bits."""
NAME_MAX = 256
"""B10: characters of a deployment id or a model group (LiteLLM's ids are 64-character hashes or short names). An id
is a Redis key, a Kafka key, a state-table key and a log field: a 100 KB one would be all of those."""

EventId = Annotated[str, msgspec.Meta(min_length=1, max_length=128)]
Name = Annotated[str, msgspec.Meta(max_length=NAME_MAX)]
"""A deployment id or a model group (B10)."""
NonNegativeInt = Annotated[int, msgspec.Meta(ge=0, le=INT_MAX)]
Timestamp = Annotated[float, msgspec.Meta(ge=0, lt=TS_MAX)]
RecordDuration = Annotated[float, msgspec.Meta(ge=-DURATION_MAX, le=DURATION_MAX)]
Duration = Annotated[float, msgspec.Meta(ge=0, le=DURATION_MAX)]
Latency = Annotated[float, msgspec.Meta(ge=-LATENCY_MAX, le=LATENCY_MAX)]
StatusCode = Annotated[int, msgspec.Meta(ge=100, le=599)]
