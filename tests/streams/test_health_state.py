"""The health-state topic's value: what the decider publishes is what the materializer reads back, and a value
that is not one is refused with the reason (the materializer dead-letters it)."""

from __future__ import annotations

import orjson
import pytest

from coolant.processors import HealthState
from coolant.streams.health_state import decode_health_state, encode_health_state


def test_a_state_round_trips_with_the_deployment_id() -> None:
    state = HealthState(False, 1_800_000_000.25, "503 from /v1/models")
    raw = encode_health_state("dep-1", state)
    assert orjson.loads(raw) == {"deployment_id": "dep-1", "is_healthy": False, "timestamp": 1_800_000_000.25,
                                 "reason": "503 from /v1/models"}
    assert decode_health_state(raw) == ("dep-1", state)


@pytest.mark.parametrize(("raw", "problem"), [
    (None, "tombstone"),
    (b"{", "not JSON"),
    (b"[]", "expected an object"),
    (b'{"is_healthy": true, "timestamp": 1, "reason": ""}', "deployment_id"),
    (b'{"deployment_id": "d", "is_healthy": 1, "timestamp": 1, "reason": ""}', "is_healthy"),
    (b'{"deployment_id": "d", "is_healthy": true, "timestamp": true, "reason": ""}', "timestamp"),
    (b'{"deployment_id": "d", "is_healthy": true, "timestamp": 1}', "reason"),
])
def test_what_is_not_a_state_is_refused_with_the_reason(raw: bytes | None, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        decode_health_state(raw)
