"""PF8: a lone primary's streak decided in the pod on its own records (docs/spec/semantics.md §8.1).

Two properties: against a brute-force model that recounts each pod's own history at every record (several pods,
so the pod's streak is its own evidence), and against the worker's engine when one pod publishes everything
(its cooldown is then the worker's for the same record). The vectors PV13-PV28 pin the cases.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_outlier_properties import FAILURES, counted_failure, streams
from test_prefetch import check_against_engine, outcome, policy_of, published
from test_properties import SETTINGS, Case, cases
from vectors_support import T0

from coolant import schemas
from coolant.config.loader import parse_config
from coolant.processors import Engine, Policy
from coolant.processors.own_streak import OwnStreaks, own_streak
from coolant.schemas import Cooldown, Outcome

LONE_PRIMARY = {"fallbacks": [{"g0": ["g1"]}]}
"""g0, a group of one, falls back to g1 (`policy_of(LONE_PRIMARY, sizes=(1, 1), ...)`)."""
PROFILE = {"profile": "outlier"}


def decisions(policy: Policy, records: list[Outcome]) -> list[Cooldown | None]:
    own = OwnStreaks()
    return [own_streak(policy, own, rec) for rec in records]


def fails(n: int, first: int = 0, gateway: str = "pod-a", **fields: Any) -> list[Outcome]:
    """n 500s from `gateway` one second apart from T0+first (event ids first..first+n-1)."""
    return [outcome(first + i, first + i, False, gateway, **fields) for i in range(n)]


def lone_primary(coolant: dict[str, Any] | None = None, router: dict[str, Any] | None = None,
                 sizes: tuple[int, ...] = (1, 1)) -> Policy:
    return policy_of({**LONE_PRIMARY, **(router or {})}, coolant=PROFILE | (coolant or {}), sizes=sizes)


@pytest.mark.parametrize(("policy", "records", "decided"), [
    (lone_primary(), fails(3), [2]),                                                     # PV13
    (lone_primary(), fails(7), [2]),                                                     # PV14: once a streak
    (lone_primary(), [*fails(2), outcome(2, 2, True), *fails(3, 3)], [5]),               # PV15: an answer ends it
    (lone_primary(), [*fails(2), outcome(2, 2, False, status_code=499),                  # PV16: X9.3 leaves it
                      outcome(3, 3, False, origin="caller"), *fails(1, 4)], [4]),
    (lone_primary(), [*fails(2), outcome(2, 2, False, status_code=429), *fails(3, 3)], [5]),  # a 429 answers
    (lone_primary(), fails(2) + fails(1, 2, status_code=None, exception_type="APIConnectionError"), [2]),
    (policy_of(coolant=PROFILE, sizes=(1, 1)), fails(5), []),                            # PV17: lone, X12
    (lone_primary(sizes=(2, 1)), fails(5), []),                                          # PV18: a group of two
    (policy_of(LONE_PRIMARY, sizes=(1, 1)), fails(5), []),                               # PV19: compatible
    (lone_primary({"max_ejection_percent": 50}), fails(5), []),                          # PV20: X3, PF off
    (lone_primary(), [outcome(9, 200, False), *fails(3), *fails(2, 201)], [5]),          # PV21: L1
    (lone_primary(), [*fails(2, 1), outcome(0, 0.5, True), *fails(1, 3)], [3]),          # PV23: X10.4
    (lone_primary(), [*fails(4), outcome(9, 2.5, True), *fails(2, 4), outcome(10, 6, True),  # PV24: once the
                      *fails(3, 7)], [2, 10]),                                           # pod cooled
    (lone_primary(), [*fails(3), outcome(3, 4, False), outcome(9, 3, True),              # PV25: an answer
                      *fails(3, 5)], [2]),                                               # older than T0+4
    (lone_primary(), [*fails(1, latency_ms=1000), outcome(9, 1, True, latency_ms=3000),  # PV26: X10.5, an
                      *fails(2, 2)], [3]),                                               # answer begun earlier
    (lone_primary(), [*fails(3, latency_ms=1000), *fails(1, 3),                          # PV27: once cooled,
                      outcome(9, 4, True, latency_ms=2000), *fails(3, 5)], [2]),         # begun before T0+3
    (lone_primary(), [*fails(3, latency_ms=1000), outcome(9, 3, True, latency_ms=2000),  # PV28: begun at T0+1
                      *fails(3, 4)], [2, 6]),                                            # ends it
    (lone_primary(router={"disable_cooldowns": True}), fails(3), []),                    # G4
    (lone_primary(), fails(3, cooldown_time=0), []),                                     # G5
])
def test_which_streaks_a_pod_decides(policy: Policy, records: list[Outcome], decided: list[int]) -> None:
    """The vectors of docs/windows.md §6 (PV13-PV28 but PV22): which records the pod cools on its own streak;
    each is the worker's cooldown for the same record (one pod publishes them all)."""
    got = decisions(policy, records)
    assert [i for i, cd in enumerate(got) if cd is not None] == decided
    own = OwnStreaks()
    assert check_against_engine(policy, list(records), decider=lambda r: own_streak(policy, own, r)) == len(decided)


def test_the_pods_cooldown_is_the_first_step_of_the_workers() -> None:
    """PV13 in full: X10's reason and window, the outlier profile's first backoff step (5 s), E3's id."""
    policy = lone_primary()
    records = fails(3)
    cd = decisions(policy, records)[2]
    assert cd is not None
    engine = Engine(policy)
    assert [step.cooldown for step in map(engine.feed, records)] == [None, None, cd]
    assert (cd.reason, cd.until, cd.window) == ("consecutive_failures", T0 + 7, schemas.Window(T0, 0, 3))


def test_another_pods_answer_does_not_end_this_pods_streak() -> None:
    """PV22: pod a fails twice, pod b is answered, pod a fails again. The fleet's streak is 1 (the worker does
    not cool), pod a's own is 3: it cools its own routers (never Redis: docs/windows.md §6)."""
    policy = lone_primary()
    records = [*fails(2), outcome(0, 2, True, "pod-b"), *fails(1, 3)]
    got = decisions(policy, records)
    assert [i for i, cd in enumerate(got) if cd is not None] == [3]
    assert all(step.cooldown is None for step in map(Engine(policy).feed, records))


def test_under_coalescing_the_pod_holds_its_part() -> None:
    """PF7 applies to PF8 too: under X8 1 s the pod holds the worker's until less 1 s."""
    policy = lone_primary({"recool_coalesce": 1})
    cd = decisions(policy, fails(3))[2]
    assert cd is not None and (cd.until, cd.cooldown_time) == (T0 + 6, 4)
    own = OwnStreaks()
    assert check_against_engine(policy, list(fails(3)), decider=lambda r: own_streak(policy, own, r)) == 1


# -- against a brute-force model: several pods ------------------------------------------------------------------


@dataclass(frozen=True)
class Stream:
    config: dict[str, Any]
    k: int
    records: list[Outcome]


@st.composite
def pods_streams(draw: st.DrawFn) -> Stream:
    """test_outlier_properties' streams (groups of 1-3, with and without fallbacks, every kind of failure X9
    tells apart), each record published by one of three pods."""
    config, knobs, records = draw(streams())
    gateways = draw(st.lists(st.sampled_from(["pod-a", "pod-b", "pod-c"]), min_size=len(records),
                             max_size=len(records)))
    return Stream(config, knobs.k_single,
                  [msgspec.structs.replace(r, gateway=g) for r, g in zip(records, gateways, strict=True)])


def model(policy: Policy, k: int, records: list[Outcome]) -> list[int]:
    """The indexes of the records PF8 cools, each one recounted from the start of its pod's history of the
    deployment: a failure cools once the failures since the streak's last end reach k; an answer ends the streak
    when it is no older than its first failure (X10.4) and began no earlier (X10.5), or, once the pod cooled, than
    every failure of it."""
    out = []
    for i, rec in enumerate(records):
        entry = policy.registry.get(rec.deployment_id)
        if entry is None or not policy.single(entry.model_group) or policy.lone(entry.model_group):
            continue
        mine = [r for r in records[: i + 1] if (r.gateway, r.deployment_id) == (rec.gateway, rec.deployment_id)]
        failures: list[tuple[float, float]] = []  # the (ts, start) of the streak's failures
        cools = fired = False
        for r in mine:
            kind = None if r.source == "pre_call_check" and not r.ok else counted_failure(r)
            start = r.ts - (r.latency_ms or 0) / 1000
            cools = False
            if kind is True:
                failures.append((r.ts, start))
                cools = not fired and len(failures) >= k
                fired = fired or cools
            elif kind is False and failures:
                bar = [f for f in failures if fired] or failures[:1]
                if all(r.ts >= ts and start >= began for ts, began in bar):
                    failures, fired = [], False
        if cools:
            out.append(i)
    return out


@SETTINGS
@given(pods_streams())
def test_a_pods_streak_is_the_brute_force_model(stream: Stream) -> None:
    policy = parse_config(stream.config).policy
    got = decisions(policy, stream.records)
    assert [i for i, cd in enumerate(got) if cd is not None] == model(policy, stream.k, stream.records)
    for cd, rec in zip(got, stream.records, strict=True):
        assert cd is None or (cd.ts, cd.until, cd.reason) == (rec.ts, rec.ts + 5, "consecutive_failures")


# -- against the worker: one pod ---------------------------------------------------------------------------------

PRESETS: dict[str, dict[str, Any]] = {
    "profile": {"coolant": PROFILE},
    "tight": {"coolant": {**PROFILE, "outlier": {"consecutive_single": 1}}},
    "no_backoff": {"coolant": {**PROFILE, "backoff": None, "outlier": {"consecutive_single": 2}}},
    "coalesce": {"coolant": {**PROFILE, "recool_coalesce": 2}},
    "overwrite": {"coolant": {**PROFILE, "recool": "overwrite"}},
    "outage": {"coolant": {**PROFILE, "thresholds": {"outage_min_requests": 2}}},
    "allowed_fails": {"coolant": PROFILE, "router_settings": {"allowed_fails": 1}},
    "counters": {"coolant": {**PROFILE, "litellm_counters": True}},
    "no_recovery": {"coolant": {**PROFILE, "recovery": None}},
}
"""Under the profile, with the compatible rules that can cool a lone primary with fallbacks (V1, V2.2), X2 on
and off, X8 (PF7), `recool: overwrite` and the probes' holds and releases (RC3-RC5)."""


@st.composite
def outages(draw: st.DrawFn) -> Case:
    """A lone primary p (group g0, falling back to g1) failing in bursts: 503s, cut streams and timeouts, answers
    between, a caller's disconnect now and then, a few probes, records out of order by up to 2 s, and attempts
    that began up to 6 s before they ended (a stream admitted before the burst that ends in it: X10.5)."""
    preset = draw(st.sampled_from(sorted(PRESETS)))
    config = {"model_list": [
        {"model_name": "g0", "litellm_params": {"model": "openai/g0"}, "model_info": {"id": "p"}},
        {"model_name": "g1", "litellm_params": {"model": "openai/g1"}, "model_info": {"id": "f"}}],
        **PRESETS[preset]}
    config["router_settings"] = {**config.get("router_settings", {}), **LONE_PRIMARY}
    t = T0 + draw(st.integers(0, 59))
    records: list[Outcome | schemas.Health] = []
    share = draw(st.integers(4, 9))  # failures, in tenths
    for i in range(draw(st.integers(5, 80))):
        t += draw(st.sampled_from([0, 0.1, 0.2, 0.5, 1, 1, 4, 9]))
        ts = t - draw(st.sampled_from([0] * 6 + [0.4, 2]))
        if draw(st.integers(0, 11)) == 0:
            d: dict[str, Any] = {"schema": schemas.HEALTH_SCHEMA, "healthy": draw(st.booleans())}
        elif draw(st.integers(0, 9)) >= share:
            d = {"schema": schemas.OUTCOME_SCHEMA, "ok": True}
        else:
            status, exc, origin = draw(st.sampled_from(FAILURES[:8] + FAILURES[:3] + FAILURES[8:]))
            d = {"schema": schemas.OUTCOME_SCHEMA, "ok": False, "status_code": status, "exception_type": exc,
                 "origin": origin}
        if d["schema"] == schemas.OUTCOME_SCHEMA:
            d["gateway"] = "pod"
            # an answer's attempt often began long before it ended (a stream), a failure's less often (X10.5)
            latency = draw(st.sampled_from([None, 400.0, 3000.0, 6000.0] if d["ok"] else [None, None, 0.0, 1000.0]))
            if latency is not None:
                d["latency_ms"] = latency
        rec = schemas.from_dict({"event_id": f"e{i}", "ts": ts, "deployment_id": "p", "model_group": "g0", **d})
        assert isinstance(rec, Outcome | schemas.Health)
        records.append(rec)
    return Case(preset, config, {"p": "g0", "f": "g1"}, frozenset(), records)


@SETTINGS
@given(st.one_of(outages(), cases(presets=("outlier", "outlier_tight"))))
def test_one_pods_streak_is_the_workers(case: Case) -> None:
    """With one publisher, every cooldown PF8 decides is the one the worker emits for the same record (same id,
    end and LiteLLM value; under X2 no longer than the worker's, under X8 PF7's part), or one it absorbs under
    a cooldown in force that ends no earlier."""
    policy = case.policy
    records = [msgspec.structs.replace(r, gateway="pod") if isinstance(r, Outcome) else r for r in case.records]
    own = OwnStreaks()
    check_against_engine(policy, published(policy, records), decider=lambda r: own_streak(policy, own, r))
