"""The outlier profile live (docs/outlier.md): the worker decides it with the same engine steps as `coolant replay`,
its state (streaks, recent buckets) persisted with the rest of the path state, so live == replay."""

from __future__ import annotations

import pytest
import yaml

from coolant.config.overrides import override
from tests.support.kafka import produce_lines, read_json, wait_caught_up
from tests.support.records import fleet_traffic
from tests.support.worker import Case

from .test_live import assert_same_cooldowns, case  # noqa: F401 (the fixture: each Faust path)

pytestmark = pytest.mark.integration

PROFILE_REASONS = {"consecutive_failures", "recent_failure_rate", "probation"}


async def test_replay_equals_live_under_the_outlier_profile(case: Case, kafka_bootstrap: str) -> None:  # noqa: F811
    raw = yaml.safe_load(case.config.read_text())
    case.config.write_text(yaml.safe_dump(override(raw, "coolant.profile", "outlier")))
    lines = fleet_traffic(3000, seed=3)
    expected = case.replay(lines)
    reasons = {cd["reason"] for cd in expected}
    assert reasons & PROFILE_REASONS, f"the traffic should exercise the profile's rules, got {reasons}"
    assert any(cd["exception_type"] == "APIConnectionError" for cd in expected), "connection errors count (X9.1)"
    w = await case.worker("a", kafka_bootstrap)
    await w.wait_ready()
    await produce_lines(kafka_bootstrap, case.outcomes, lines)
    await wait_caught_up(kafka_bootstrap, case.app_id, case.outcomes, on_timeout=case.logs)
    got = await read_json(kafka_bootstrap, case.cooldowns)
    assert_same_cooldowns(got, expected, allow_duplicates=False)
    case.log(f"{len(expected)} cooldowns identical to replay's ({sorted(reasons)})")
