"""D7's per-publisher counters in the persisted path state (docs/windows.md LC1): round trip and older formats."""

from __future__ import annotations

import json

from coolant.processors.state import NEG_INF, PathState, PodCounters


def test_the_counters_survive_a_json_round_trip() -> None:
    ps = PathState(litellm={"pod-a": PodCounters(10.0, 3, 12.5, 2), "": PodCounters(NEG_INF, 0, 11.0, 1)})
    back = PathState.from_dict(json.loads(json.dumps(ps.to_dict())))
    assert back.litellm == ps.litellm


def test_a_state_from_before_d7_has_no_counters() -> None:
    d = PathState().to_dict()
    del d["litellm"]
    assert PathState.from_dict(d).litellm == {}


def test_the_first_d7_format_is_read_as_the_counters_of_records_without_a_gateway() -> None:
    d = PathState().to_dict()
    d["litellm"] = [10.0, 3, None, 0]
    assert PathState.from_dict(d).litellm == {"": PodCounters(10.0, 3, NEG_INF, 0)}
