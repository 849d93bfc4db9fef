"""Properties of the outlier profile (docs/outlier.md) against brute-force models.

The models share nothing with `coolant.processors.outlier`: they keep every record seen so far and recount from
scratch at each failure (the streak over the deployment's whole history, the recent share by scanning the whole
history for the records whose second lies in the window).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from test_properties import SETTINGS, Case, cases
from vectors_support import T0

from coolant import schemas
from coolant.config.loader import parse_config
from coolant.processors import Engine, Policy
from coolant.processors.state import PathState

GATEWAY = {"APIConnectionError", "Timeout", "InternalServerError", "ServiceUnavailableError", "BadGatewayError",
           "MidStreamFallbackError", "APIError"}
TRANSPORT = {"RemoteProtocolError", "ReadError", "WriteError", "ConnectError", "NetworkError", "ProtocolError",
             "ReadTimeout", "WriteTimeout", "ConnectTimeout", "TimeoutException"}
CALLER = {"CallerCredentialAuthenticationError", "CallerCredentialRateLimitError", "MalformedRequestFieldError",
          "UnsupportedEndpointError"}
# (status, exception_type, origin); None status with a name is what LiteLLM reports for a cut stream or a reset,
# httpx's raw name what its logging hooks get for a stream that ended without a finish_reason (X9.6)
FAILURES: list[tuple[int | None, str | None, str | None]] = [
    (500, "InternalServerError", None), (503, "ServiceUnavailableError", "upstream"), (502, "BadGatewayError", None),
    (408, "Timeout", None), (None, "APIConnectionError", "upstream"), (None, "Timeout", None), (None, None, None),
    (500, "APIConnectionError", None), (None, "APIConnectionError", "caller"), (500, "InternalServerError", "caller"),
    (400, "BadRequestError", None), (404, "NotFoundError", None), (429, "RateLimitError", None), (499, None, None),
    (None, "CallerCredentialRateLimitError", None), (403, "PermissionDeniedError", None),
    (None, "RemoteProtocolError", "upstream"), (None, "httpx.ReadTimeout", None), (None, "PoolTimeout", "upstream"),
]


def counted_failure(rec: schemas.Outcome) -> bool | None:
    """X9 written out: True counts, False is an answer, None is neither."""
    if rec.ok:
        return False
    if rec.origin == "caller" or rec.status_code == 499 or rec.exception_type in CALLER:
        return None
    if rec.status_code is None:
        name = rec.exception_type
        return name is None or name in GATEWAY or name.removeprefix("httpx.") in TRANSPORT
    return rec.status_code >= 500 or rec.status_code == 408


@dataclass(frozen=True)
class Knobs:
    k: int
    k_single: int
    window: int
    threshold: float
    volume: int


@st.composite
def streams(draw: st.DrawFn) -> tuple[dict[str, Any], Knobs, list[schemas.Outcome]]:
    """1-4 deployments in groups g1/g2 (sizes 1-3, fallbacks or not), the compatible rules made inert (huge
    thresholds, no D7, no backoff), fresh ids, ts increasing with small out-of-order steps (never late)."""
    knobs = Knobs(draw(st.integers(1, 5)), draw(st.integers(1, 4)), draw(st.integers(1, 12)),
                  draw(st.sampled_from([0.25, 0.5, 0.8])), draw(st.integers(1, 8)))
    n = draw(st.integers(1, 4))
    groups = {f"d{i}": draw(st.sampled_from(["g1", "g2"])) for i in range(n)}
    fallbacks = draw(st.sampled_from([[], [{"g1": ["g2"]}], [{"g2": ["g1"]}], [{"g1": ["x"]}, {"g2": ["x"]}]]))
    config = {
        "model_list": [{"model_name": g, "litellm_params": {"model": f"openai/{g}"}, "model_info": {"id": d}}
                       for d, g in groups.items()],
        "router_settings": {"fallbacks": fallbacks},
        "coolant": {
            "profile": "outlier", "backoff": None, "litellm_counters": False,
            "thresholds": {"min_requests": 100_000, "outage_min_requests": 100_000},
            "outlier": {"consecutive": knobs.k, "consecutive_single": knobs.k_single, "rate_window": knobs.window,
                        "rate_threshold": knobs.threshold, "rate_min_requests": knobs.volume},
        },
    }
    t = T0 + draw(st.integers(0, 59)) + 0.5
    records = []
    for i in range(draw(st.integers(1, 80))):
        t += draw(st.sampled_from([0, 0.3, 0.5, 1, 1, 2, 4, 9]))
        ts = t - draw(st.sampled_from([0, 0, 0, 0.7, 2.5]))
        dep = draw(st.sampled_from(sorted(groups)))
        if draw(st.integers(0, 2)) == 0:
            d: dict[str, Any] = {"ok": True}
        else:
            status, exc, origin = draw(st.sampled_from(FAILURES))
            if status in (404, 429) and draw(st.booleans()):
                status, exc = 500, "InternalServerError"  # keep the compatible 404/429 rules rare
            d = {"ok": False, "status_code": status, "exception_type": exc, "origin": origin}
            if draw(st.integers(0, 12)) == 0:
                d["source"] = "pre_call_check"
        latency = draw(st.sampled_from([None, None, 0.0, 400.0, 1500.0, 6000.0]))
        if latency is not None:
            d["latency_ms"] = latency  # a stream that began seconds before it ended (X10.5)
        rec = schemas.from_dict({"schema": schemas.OUTCOME_SCHEMA, "event_id": f"e{i}", "ts": ts,
                                 "deployment_id": dep, "model_group": groups[dep], **d})
        assert isinstance(rec, schemas.Outcome)
        records.append(rec)
    return config, knobs, records


def model(policy: Policy, knobs: Knobs, records: Sequence[schemas.Outcome]) -> list[tuple[str, str, float] | None]:
    """Per record: (deployment, reason, until) of the cooldown the profile emits, or None; brute force."""
    history: dict[str, list[tuple[schemas.Outcome, bool | None, bool]]] = {}
    end: dict[str, float] = {}
    out: list[tuple[str, str, float] | None] = []
    for rec in records:
        dep = rec.deployment_id
        past = history.setdefault(dep, [])
        kind = None if rec.source == "pre_call_check" and not rec.ok else counted_failure(rec)
        fired: tuple[str, str, float] | None = None
        reason = None
        group = policy.registry.get(dep)
        assert group is not None
        g = group.model_group
        compatible = False  # the compatible rules that still fire with these thresholds: V2.4 and V2.1 (N2)
        if rec.origin == "caller":
            pass  # N4: an attempt its caller ended is neither counted nor decided, a pre-call check's neither
        elif rec.source == "pre_call_check" and not rec.ok:
            compatible = not policy.single(g)
        elif not rec.ok:
            compatible = rec.status_code == 404 or (rec.status_code == 429 and not policy.single(g))
        if compatible:
            reason = "compatible"
        elif kind is True and not policy.lone(g):
            # recounted from the first record; an answer older than the streak's first failure (X10.4), or that
            # began before it began (X10.5), leaves it
            streak, since, began = 0, -math.inf, -math.inf
            for prev, prev_kind, prev_fired in [*past, (rec, kind, False)]:
                start = prev.ts - (prev.latency_ms or 0) / 1000
                if prev_kind is True:
                    since, began = (prev.ts, start) if streak == 0 else (since, began)
                    streak = 0 if prev_fired else streak + 1
                elif prev_kind is False and prev.ts >= since and start >= began:
                    streak = 0
            k = knobs.k_single if policy.single(g) else knobs.k
            if streak >= k:
                reason = "consecutive_failures"
            else:
                last = math.floor(rec.ts)
                first = last - knobs.window + 1
                inside = [e for e in [*past, (rec, kind, False)]
                          if e[1] is not None and first <= math.floor(e[0].ts) <= last]
                f = sum(1 for _, pk, _ in inside if pk is True)
                if len(inside) >= knobs.volume and f > knobs.threshold * len(inside):
                    reason = "recent_failure_rate"
        if reason is not None:
            until = rec.ts + 5
            if until > end.get(dep, -math.inf):
                end[dep] = until
                fired = (dep, reason, until)
        past.append((rec, kind, reason == "consecutive_failures"))
        out.append(None if fired is None or fired[1] == "compatible" else fired)
    return out


@SETTINGS
@given(streams())
def test_o1_and_o2_are_the_brute_force_models(stream: tuple[dict[str, Any], Knobs, list[schemas.Outcome]]) -> None:
    """X9-X12 (consecutive failures, the recent share, lone primaries) cool exactly where the model says, and so
    does an engine whose request-path state makes a JSON round trip after every record (the streak's first ts and
    start, X10.4 and X10.5, are persisted as the live worker persists them)."""
    config, knobs, records = stream
    policy = parse_config(config).policy
    engine, persisted = Engine(policy), Engine(policy)
    got, again = [], []
    for rec in records:
        for eng, out in ((engine, got), (persisted, again)):
            cd = eng.feed(rec).cooldown
            out.append(None if cd is None or cd.reason not in ("consecutive_failures", "recent_failure_rate")
                       else (cd.deployment_id, cd.reason, cd.until))
        for state in persisted.states.values():
            state.request = PathState.from_dict(json.loads(json.dumps(state.request.to_dict())), state.request.seen)
    assert got == model(policy, knobs, records)
    assert again == got


COMPATIBLE_TWINS = ("default", "sliding", "counters_off", "coalesce", "router_cooldown", "router_af", "router_policy",
                    "fallbacks", "final_only", "health", "tuned", "quota_overwrite")
"""Presets without backoff, ejection or `recool: overwrite`, which the profile's twin below must not change."""


@SETTINGS
@given(cases(presets=COMPATIBLE_TWINS))
def test_the_profile_only_adds_cooldowns(case: Case) -> None:
    """Every cooldown the compatible profile emits is emitted under the profile too, or a cooldown in force there
    already ends no earlier (the profile's twin: `profile: outlier` with `backoff: null`, the case's D7 and V2.3
    minimum)."""
    compatible = Engine(case.policy)
    o = case.policy.options  # X9.5 would change D7 and V2.3's minimum: the twin keeps the case's own
    coolant = case.config.get("coolant", {})
    twin_config = {**case.config, "coolant": {
        **coolant, "profile": "outlier", "backoff": None, "litellm_counters": o.litellm_counters,
        "thresholds": {**coolant.get("thresholds", {}), "min_requests": o.min_requests}}}
    twin = Engine(parse_config(twin_config).policy)
    for rec in case.records:
        cd = compatible.feed(rec).cooldown
        mine = twin.feed(rec)
        if cd is None or isinstance(rec, schemas.Health):
            continue
        if mine.cooldown is not None:
            assert mine.cooldown.until >= cd.until
        else:
            end = twin.state(rec.deployment_id).request.end
            assert end is not None and end >= cd.until, (rec, cd, mine)


@SETTINGS
@given(cases(presets=("outlier", "outlier_tight")))
def test_lone_deployments_never_get_the_profiles_cooldowns(case: Case) -> None:
    """X12: a group's only deployment with no fallback is never cooled by X10, X11 or the half-open re-cool."""
    policy = case.policy
    engine = Engine(policy)
    for rec in case.records:
        cd = engine.feed(rec).cooldown
        if cd is not None and policy.lone(cd.model_group):
            assert cd.reason not in ("consecutive_failures", "recent_failure_rate"), cd


@SETTINGS
@given(streams())
def test_x13_the_first_counted_failure_after_a_cooldown_ends_recools(
    stream: tuple[dict[str, Any], Knobs, list[schemas.Outcome]],
) -> None:
    """X13 against a model that only remembers each deployment's last cooldown end and whether a success came
    since: a failure X9 counts, of a group that is not lone, within `reset_after` of that end and with no success
    since, cools at once (or a cooldown in force ends no earlier); a `probation` cooldown comes from nothing
    else."""
    config, _, records = stream
    config["coolant"]["backoff"] = {"probation": True, "base": 2, "reset_after": 60}
    policy = parse_config(config).policy
    engine = Engine(policy)
    last_end: dict[str, float] = {}
    success_since: dict[str, bool] = {}
    for rec in records:
        dep = rec.deployment_id
        step = engine.feed(rec)
        end = last_end.get(dep)
        group = policy.registry.get(dep)
        assert group is not None
        half_open = end is not None and end <= rec.ts < end + 60 and not success_since.get(dep, False)
        counts = counted_failure(rec) is True and rec.source != "pre_call_check"
        if half_open and counts and not policy.lone(group.model_group):
            assert step.cooldown is not None or step.disposition == "absorbed", (rec, step)
        cd = step.cooldown
        if cd is not None and cd.reason == "probation":
            assert half_open, (rec, cd, end)
        if rec.ok:
            success_since[dep] = True
        if cd is not None:
            last_end[dep] = max(cd.until, last_end.get(dep, cd.until))
            success_since[dep] = False
