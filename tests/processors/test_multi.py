"""`MultiEngine` (coolant/processors/multi.py): each policy's steps are its own `Engine`'s, record by record.

Random streams of tests/processors/test_properties.py (with its runs of plain successes, `_dense`), each case's
config varied along what a tuning grid varies and `MultiEngine` keeps per policy: the router's allowed fails, backoff
(with and without probation), re-cool, X3's percentage and, in one variant, the router's cooldown time (the gates
are then not shared).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coolant.config.loader import parse_config
from coolant.processors import Engine, Policy
from coolant.processors.multi import MultiEngine, share_key, shares
from coolant.schemas.deployment import DeploymentRecord
from tests.processors.test_properties import PRESETS, SETTINGS, Case, _dense, cases, step_json

VARIANTS: list[dict[str, dict[str, Any]]] = [
    {},
    {"router_settings": {"allowed_fails": 0}},
    {"router_settings": {"allowed_fails": 2}},
    {"coolant": {"backoff": {}}},
    {"coolant": {"backoff": {"probation": True, "base": 2, "reset_after": 60}}},
    {"coolant": {"recool": "overwrite", "max_ejection_percent": 50}},
    {"coolant": {"backoff": {"probation": True}}, "router_settings": {"allowed_fails": 1}},
]
OTHER_GATE = {"router_settings": {"cooldown_time": 3}}
SHARED = sorted(p for p in PRESETS if "quota" not in p and "outlier" not in p)


def _variant(config: dict[str, Any], change: dict[str, dict[str, Any]]) -> Policy:
    out = copy.deepcopy(config)
    for section, values in change.items():
        out.setdefault(section, {}).update(values)
    return parse_config(out, source="variant").policy


def _policies(case: Case, other_gate: bool) -> list[Policy]:
    return [_variant(case.config, v) for v in [*VARIANTS, *([OTHER_GATE] if other_gate else [])]]


@SETTINGS
@given(cases(presets=SHARED), st.randoms(use_true_random=False), st.booleans())
def test_each_policy_steps_as_its_own_engine(case: Case, rnd: Any, other_gate: bool) -> None:
    policies = _policies(case, other_gate)
    assert shares(policies)
    records = _dense(case, rnd)
    alone = [Engine(p) for p in policies]
    multi = MultiEngine(policies)
    assert (multi.gate is None) == other_gate
    for rec in records:
        want = [e.feed(rec) for e in alone]
        got = multi.feed(rec)
        assert [step_json(s) for s in got] == [step_json(s) for s in want], rec
        assert [s.suppressed for s in got] == [s.suppressed for s in want], rec
    for e, mine in zip(alone, multi.engines, strict=True):
        assert e.ejections == mine.ejections
        for dep, st_ in e.states.items():  # the decision's part of each state, and the shared part once
            ps, own, shared = st_.request, mine.states[dep].request, multi.states[dep].request
            assert (ps.counters, ps.end, ps.streak, ps.probation) == (own.counters, own.end, own.streak, own.probation)
            assert (ps.hw, ps.windows, dict(ps.seen), ps.litellm) == (
                shared.hw, shared.windows, dict(shared.seen), shared.litellm)
            assert st_.health.to_dict() == mine.states[dep].health.to_dict()


@SETTINGS
@given(cases(presets=SHARED), st.randoms(use_true_random=False))
def test_feed_all_yields_every_step_but_the_counts(case: Case, rnd: Any) -> None:
    policies = _policies(case, False)
    records = _dense(case, rnd)
    steps = [list(Engine(p).feed_all(records)) for p in policies]
    cooled = [[(r.event_id, step_json(s)) for r, s in each if s.cooldown is not None or s.suppressed is not None]
              for each in steps]
    got: list[list[Any]] = [[] for _ in policies]
    for rec, each in MultiEngine(policies).feed_all(records):
        for i, s in enumerate(each):
            if s.cooldown is not None or s.suppressed is not None:
                got[i].append((rec.event_id, step_json(s)))
    assert got == cooled


@pytest.mark.parametrize("preset", ["quota", "outlier"])
def test_policies_it_does_not_serve(preset: str) -> None:
    config = {"model_list": [{"model_name": "g", "litellm_params": {"model": "m"}, "model_info": {"id": "d"}}],
              **PRESETS[preset]}
    policy = parse_config(config, source="t").policy
    assert share_key(policy) is None
    with pytest.raises(ValueError, match="MultiEngine serves"):
        MultiEngine([policy, policy])
    sliding = parse_config({**config, "coolant": {"window": "sliding"}}, source="t").policy
    plain = parse_config({"model_list": config["model_list"]}, source="t").policy
    assert share_key(sliding) != share_key(plain) and not shares([sliding, plain])


def test_a_deployment_record_is_ignored_by_every_policy() -> None:
    config = {"model_list": [{"model_name": "g", "litellm_params": {"model": "m"}, "model_info": {"id": "d"}}]}
    policy = parse_config(config, source="t").policy
    rec = DeploymentRecord(deployment_id="d", model_group="g")
    want = Engine(policy).feed(rec).disposition
    assert [s.disposition for s in MultiEngine([policy, policy]).feed(rec)] == [want, want]
