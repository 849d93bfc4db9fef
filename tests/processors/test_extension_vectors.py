"""Vectors of the opt-in extensions X6 (quota-aware cooldowns) and X7 (probation), docs/policy-extensions.md.

Same conventions and machinery as the spec's §6 vectors (tests/test_vectors.py): group g of d0…d(n−1),
T0 = 1800000000, records for d0 at T0+30, T0+31, … unless `at` is given.
"""

from __future__ import annotations

import pytest
from vectors_support import NO, Scenario, V, Vs, cool, fail, mask, no, probe, run_vector, success

QUOTA = {"co.quota": {}}
PROBATION = {"co.backoff": {"probation": True}}
FB = {"rs.fallbacks": [{"g": ["h"]}]}


def spent(requests: int | None = 0, reset: float | None = None, **kw):
    """A success whose response announced `requests` remaining, refilling `reset` seconds later."""
    return success(ratelimit={"remaining_requests": requests, "reset_requests": reset}, **kw)


def qe(d, text: str = "quota exhausted: remaining_requests=0", **kw):
    fields = {"status_code": 429, "exception_type": None, "exception_received": mask(text)}
    return cool("quota_exhausted", d, fields=fields, **kw)


def pb(d, **kw):
    return cool("probation", d, **kw)


# fmt: off
VECTORS = [
    # X6 quota
    V("QV1", 2, QUOTA, None, [spent(0, 12)], [qe(12, window=(0, 1, 0), until=42)], "X6.2, X6.4"),
    V("QV2", 2, QUOTA, None, [spent(3, 12)], [no("counted")], "X6.2: budget left"),
    V("QV3", 2, {}, None, [spent(0, 12)], [no("counted")], "off by default"),
    V("QV4", 2, {"co.quota": {"requests_threshold": 2}}, None, [spent(2, 30), spent(3, 30)],
      [qe(30, "quota exhausted: remaining_requests=2"), no("counted")], "X6.2 threshold"),
    V("QV5", 2, {"co.quota": {"tokens_per_request": 1000}}, None,
      [success(ratelimit={"remaining_tokens": 500, "reset_tokens": 7.5}),
       success(ratelimit={"remaining_tokens": 1500, "reset_tokens": 7.5}, at=40)],
      [qe(7.5, "quota exhausted: remaining_tokens=500"), no("counted")], "X6.2 tokens"),
    V("QV6", 2, QUOTA, None, [spent(0, None)], [qe(5)], "X6.4: no reset announced, T4"),
    V("QV7", 2, {**QUOTA, "rs.cooldown_time": 12}, None, [spent(0, 0)], [qe(12)], "X6.4: reset 0 is none, T3"),
    V("QV8", 1, QUOTA, None, [spent(0, 12)], [no("lone_exempt")], "X6.3"),
    V("QV9", 1, {**QUOTA, **FB}, None, [spent(0, 12)], [qe(12)], "X6.3: fallbacks make it not lone"),
    V("QV10", 2, {**QUOTA, "co.max_cooldown_time": 60}, None, [spent(0, 3600)], [qe(60)], "X6.4 with X4"),
    V("QV11", 2, QUOTA, None, [fail(429, ra="60", at=30), spent(0, 10, at=31), spent(0, 100, at=32)],
      [cool("rate_limited", 60), no("absorbed"), qe(100, until=132)], "X6.5: E2, never shorter"),
    V("QV17", 2, {**QUOTA, "co.recool": "overwrite"}, None, [fail(429, ra="60", at=30), spent(0, 10, at=31)],
      [cool("rate_limited", 60), no("absorbed")], "X6.5: never shorter, even with recool overwrite"),
    V("QV12", 2, {**QUOTA, "rs.disable_cooldowns": True}, None, [spent(0, 12)], [no("disabled")], "X6.3"),
    V("QV13", 2, {**QUOTA, "group": "openai/*"}, None, [spent(0, 12)], [no("wildcard")], "X6.3"),
    V("QV14", 2, {"co.quota": {"tokens_per_request": 100}}, None,
      [success(ratelimit={"remaining_requests": 0, "reset_requests": 5, "remaining_tokens": 10, "reset_tokens": 20})],
      [qe(20, "quota exhausted: remaining_requests=0 remaining_tokens=10")], "X6.4: the longest spent reset"),
    V("QV15", 2, {**QUOTA, "co.backoff": {}}, None, [spent(0, 3, at=30), spent(0, 3, at=40)],
      [qe(3), qe(3)], "X6.5: backoff never lengthens an announced reset"),
    V("QV16", 2, QUOTA, None, [spent(0, 12, at=30), spent(0, 12, at=31)],
      [qe(12), qe(12, until=43)], "X6.5: a later end is emitted"),
    # X7 probation
    V("PV1", 2, PROBATION, None, [fail(429, at=30), fail(500, at=36)], [cool("rate_limited", 5), pb(10, until=46)],
      "X7.3: the first failure after the end, next step"),
    V("PV2", 2, {"co.backoff": {}}, None, [fail(429, at=30), fail(500, at=36)],
      [cool("rate_limited", 5), no("below_threshold")], "without probation"),
    V("PV3", 2, PROBATION, None, [fail(429, at=30), success(at=36), fail(500, at=37)],
      [cool("rate_limited", 5), no("counted"), no("below_threshold")], "X7.2: a success ends probation"),
    V("PV4", 2, PROBATION, None, [fail(429, at=30), fail(500, at=33), fail(500, at=36)],
      [cool("rate_limited", 5), no("below_threshold"), pb(10)], "X7.3: not while still cooled"),
    V("PV5", 2, PROBATION, None, [fail(429, at=30), fail(500, at=335)],
      [cool("rate_limited", 5), no("below_threshold")], "X7.3: probation ends with reset_after"),
    V("PV6", 2, PROBATION, None, [fail(429, at=30), fail(400, at=36), fail(500, at=37)],
      [cool("rate_limited", 5), no("status_exempt"), pb(10)], "X7.3: after the gate"),
    V("PV7", 2, PROBATION, None, [fail(429, at=t) for t in (30, 36, 47, 68)],
      [cool("rate_limited", 5), cool("rate_limited", 10), cool("rate_limited", 20), cool("rate_limited", 40)],
      "a rule's own candidate keeps its reason"),
    V("PV8", 2, PROBATION, None, [fail(429, at=30), fail(500, at=36), fail(500, at=47), fail(500, at=68)],
      [cool("rate_limited", 5), pb(10), pb(20), pb(40)], "X7: the backoff ladder"),
    V("PV9", 2, {**PROBATION, "rs.allowed_fails": 1}, None, [fail(500, at=t) for t in (30, 31, 37)],
      [NO, cool("allowed_fails", 5), pb(10)], "X7.3 in V1"),
    V("PV10", 1, {**PROBATION, "rs.allowed_fails": 0}, None, [fail(500, at=30), fail(500, at=36)],
      [no("lone_exempt"), no("lone_exempt")], "X7.3: lone groups stay exempt"),
    V("PV11", 2, {**PROBATION, "co.health.cooldown": True}, None, [probe(401, at=30), probe(500, at=36)],
      [cool("health_check", 5), NO], "X7: request path only"),
    Vs("PV12", 2, {**PROBATION, "co.quota": {}}, [
        Scenario(None, [spent(0, 5, at=30), fail(500, at=36)], [qe(5), no("below_threshold")]),
    ], "X7.1: a quota cooldown starts no probation"),
]
# fmt: on


@pytest.mark.parametrize("vector", [pytest.param(v, id=v.id) for v in VECTORS])
def test_extension_vector(vector) -> None:
    run_vector(vector)
