"""The in-pod fast path is a prefetch: every cooldown `prefetch` returns is one the worker's engine makes too.

The same records go to `Engine.feed` (the worker's decisions, with the fleet's state) and, one at a time, to
`prefetch` (what a pod decides from that record alone). Whenever the pod cools, the worker must emit the same
cooldown (same id, end and LiteLLM value), or absorb it under a cooldown already in force that ends no earlier
(E2, X8). Under X8 the pod's cooldown is PF7's provisional part of the worker's (S shorter).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_properties import SETTINGS, Case, cases, topologies
from vectors_support import T0

from coolant import schemas
from coolant.config.loader import parse_config
from coolant.io.materializer import litellm_fields
from coolant.processors import Engine, Policy
from coolant.processors.prefetch import OwnCounters, prefetch
from coolant.schemas import Cooldown, Outcome

SAME = ("event_id", "deployment_id", "model_group", "ts", "until", "cooldown_time", "status_code",
        "exception_type", "exception_received", "trigger_event_id")
"""The fields a prefetched cooldown shares with the worker's (reason and window may differ, see prefetch)."""


def published(policy: Policy, records: list[Outcome | schemas.Health]) -> list[Outcome | schemas.Health]:
    """The records as pods publish them (PF3): the generator's redeliveries and records the worker finds late
    (another pod's clock far ahead) are dropped. Dropping them changes none of the worker's other steps."""
    engine = Engine(policy)
    return [rec for rec in records if engine.feed(rec).disposition not in ("late", "duplicate")]


def check_against_engine(policy: Policy, records: list[Outcome | schemas.Health], *, own: bool = False,
                         decider: Callable[[Outcome], Cooldown | None] | None = None) -> int:
    """Feeds both; returns how many records the pod decided. With `own`, each gateway is a pod keeping its
    own D7 counters (PF1) over every record it publishes. `decider`: the pod's decision instead of `prefetch`."""
    engine = Engine(policy)
    fetched = 0
    pods: dict[str, OwnCounters] = {}
    o = policy.options
    coalesce = o.recool_coalesce if o.recool == "extend" else None
    for rec in records:
        pod = None
        if isinstance(rec, Outcome):
            if decider is not None:
                pod = decider(rec)
            else:
                pod = prefetch(policy, rec, pods.setdefault(rec.gateway or "", OwnCounters()) if own else None)
        step = engine.feed(rec)
        if pod is None:
            continue
        fetched += 1
        if step.disposition in ("late", "duplicate"):  # the generator's stragglers and redeliveries: a pod
            continue                                      # sees a record once, when it is made
        if step.disposition == "absorbed":
            end = engine.state(rec.deployment_id).request.end
            assert end is not None and end >= pod.until, (rec, pod, end)
            continue
        assert step.disposition == "cooled", (rec, step, pod)
        worker = step.cooldown
        assert isinstance(worker, Cooldown)
        if coalesce is not None:  # PF7: the pod holds S less, the LiteLLM value ending there
            worker = msgspec.structs.replace(worker, until=worker.until - coalesce,
                                             cooldown_time=worker.until - coalesce - worker.ts)
            pod = msgspec.structs.replace(pod, cooldown_time=float(pod.cooldown_time))
        if o.backoff is not None:  # X2: the pod holds the first step, the worker's streak may make it longer
            assert pod.until <= worker.until, (rec, pod, worker)
            worker = msgspec.structs.replace(worker, until=pod.until, cooldown_time=pod.cooldown_time)
        assert {f: getattr(pod, f) for f in SAME} == {f: getattr(worker, f) for f in SAME}
        assert litellm_fields(pod) == litellm_fields(worker)
    return fetched


@SETTINGS
@given(cases())
def test_prefetch_never_decides_what_the_worker_would_not(case: Case) -> None:
    check_against_engine(case.policy, case.records)


POD_PRESETS = ("default", "sliding", "counters_off", "router_cooldown", "overwrite", "final_only", "health",
               "tuned", "quota_overwrite", "coalesce", "backoff", "probation", "quota", "outlier", "outlier_tight")
"""The presets under which a pod may decide (`coalesce`: X8, under which it holds PF7's part; the backoff ones:
X2's first step)."""


@st.composite
def incidents(draw: st.DrawFn) -> Case:
    """Streams where D7 decides often: 1-3 deployments, 2 pods, failure rates near 50 %, minute boundaries and
    counter expiries crossed, out-of-order records, retries, pre-call checks and record durations."""
    preset, config, members, with_policy = draw(topologies(POD_PRESETS))
    deps = sorted(members)
    t = T0 + draw(st.integers(0, 59))
    fail_share = draw(st.integers(3, 8))  # in tenths
    records: list[Outcome | schemas.Health] = []
    hot = draw(st.sampled_from(deps))  # most records go to one deployment, so its pods' counters fill
    for i in range(draw(st.integers(20, 120))):
        t += 61 if draw(st.integers(0, 19)) == 0 else draw(st.sampled_from([0.1, 0.5, 0.5, 1, 1, 2, 3, 7]))
        ts = t - draw(st.sampled_from([0] * 6 + [0.5, 3, 30]))
        dep = hot if draw(st.integers(0, 3)) else draw(st.sampled_from(deps))
        ok = draw(st.integers(0, 9)) >= fail_share
        status = 200 if ok else draw(st.sampled_from([500, 500, 502, 503, 408, 429, 401, 500, None]))
        d: dict[str, Any] = {"schema": schemas.OUTCOME_SCHEMA, "event_id": f"e{i}", "ts": ts, "deployment_id": dep,
                             "model_group": members[dep], "ok": ok, "status_code": status,
                             "gateway": draw(st.sampled_from(["pod-a", "pod-b"]))}
        if draw(st.integers(0, 5)) == 0:
            d.update(attempt=1, final=draw(st.booleans()))
        if draw(st.integers(0, 15)) == 0:
            d["source"] = "pre_call_check"
        if not ok and draw(st.integers(0, 6)) == 0:
            d[draw(st.sampled_from(["retry_after", "cooldown_time"]))] = draw(st.sampled_from(["9", "2.5"]))
            if "cooldown_time" in d:
                d["cooldown_time"] = float(d["cooldown_time"])
        rec = schemas.from_dict(d)
        assert isinstance(rec, Outcome)
        records.append(rec)
    return Case(preset, config, members, with_policy, records)


@SETTINGS
@given(st.one_of(cases(), incidents()))
def test_a_pods_own_counters_never_decide_what_the_worker_would_not(case: Case) -> None:
    """PF: each pod counts what it publishes; every cooldown it decides on its counters is the worker's."""
    policy = case.policy
    check_against_engine(policy, published(policy, case.records), own=True)


def policy_of(router: dict[str, Any] | None = None, coolant: dict[str, Any] | None = None,
              sizes: tuple[int, ...] = (3,), **info: Any) -> Policy:
    model_list = [
        {"model_name": f"g{g}", "litellm_params": {"model": f"openai/g{g}"}, "model_info": {"id": f"g{g}-{i}", **info}}
        for g, size in enumerate(sizes) for i in range(size)
    ]
    config: dict[str, Any] = {"model_list": model_list, "router_settings": router or {"cooldown_time": 60}}
    if coolant:
        config["coolant"] = coolant
    return parse_config(config).policy


def failure(status: int, dep: str = "g0-0", n: int = 0, **fields: Any) -> Outcome:
    rec = schemas.from_dict({"schema": schemas.OUTCOME_SCHEMA, "event_id": f"e{n}", "ts": T0 + n,
                             "deployment_id": dep, "model_group": dep.split("-")[0], "ok": False,
                             "status_code": status, **fields})
    assert isinstance(rec, Outcome)
    return rec


def spent(dep: str = "g0-0", remaining: int = 0, **fields: Any) -> Outcome:
    """A success whose response announced `remaining` requests left, refilling 30 s later (X6)."""
    rec = schemas.from_dict({"schema": schemas.OUTCOME_SCHEMA, "event_id": "s0", "ts": T0, "deployment_id": dep,
                             "model_group": dep.split("-")[0], "ok": True,
                             "ratelimit": {"remaining_requests": remaining, "reset_requests": 30}, **fields})
    assert isinstance(rec, Outcome)
    return rec


@pytest.mark.parametrize(("policy", "rec", "cools"), [
    (policy_of(), failure(429, exception_type="RateLimitError"), True),            # V2.1 on a group of 3
    (policy_of(sizes=(1,)), failure(429, exception_type="RateLimitError"), False),  # a lone 429: the window
    (policy_of(), failure(401, exception_type="AuthenticationError"), True),       # V2.4
    (policy_of(), failure(404, exception_type="NotFoundError"), True),
    (policy_of(), failure(500, exception_type="InternalServerError"), False),      # V2.3: the fleet's window
    (policy_of(), failure(503), False),
    (policy_of({"allowed_fails": 0}), failure(500, exception_type="InternalServerError"), True),  # V1, 0
    (policy_of({"allowed_fails": 3}), failure(429, exception_type="RateLimitError"), False),      # V1 counts
    (policy_of({"allowed_fails_policy": {"RateLimitErrorAllowedFails": 0}}), failure(429), True),
    (policy_of(allowed_fails=0), failure(503), True),
    (policy_of({"disable_cooldowns": True}), failure(429), False),                  # G4
    (policy_of(coolant={"backoff": {}}), failure(429), True),                       # X2: its first step
    (policy_of(coolant={"profile": "outlier"}), failure(429), True),                # the outlier profile's X2
    (policy_of(coolant={"profile": "outlier"}, sizes=(1,)), failure(500), False),   # X10: the fleet's streak
    (policy_of(coolant={"max_ejection_percent": 50}), failure(429), False),         # X3: the fleet's cooldowns
    (policy_of(coolant={"recool_coalesce": 1}), failure(429), True),                # X8: PF7, until - 1
    (policy_of(), failure(429, dep="dx-0"), False),                                 # R6: unknown deployment
    (policy_of(cooldown_time=0), failure(429), False),                              # G5
    (policy_of(coolant={"quota": {}}), spent(), True),                              # X6: the record announces it
    (policy_of(coolant={"quota": {}}), spent(remaining=3), False),                  # budget left
    (policy_of(), spent(), False),                                                  # X6 is opt-in
    (policy_of(coolant={"quota": {}}, sizes=(1,)), spent(), False),                 # X6.3 lone
    (policy_of(coolant={"quota": {}, "backoff": {}}), spent(), True),               # X6 under X2: never lengthened
    (policy_of(coolant={"quota": {}, "max_ejection_percent": 50}), spent(), False), # fleet-dependent options
])
def test_which_records_a_pod_decides_alone(policy: Policy, rec: Outcome, cools: bool) -> None:
    assert (prefetch(policy, rec) is not None) is cools
    assert check_against_engine(policy, [rec]) == int(cools)


def test_retry_after_and_per_deployment_durations_are_the_workers() -> None:
    """T1-T4 read the record and the registry only: a Retry-After (capped by max_cooldown_time), a record's
    cooldown_time, a deployment's model_info.cooldown_time."""
    capped = policy_of(coolant={"max_cooldown_time": 30})
    assert (cd := prefetch(capped, failure(429, retry_after="120"))) is not None and cd.cooldown_time == 30
    assert (cd := prefetch(policy_of(), failure(429, retry_after="17"))) is not None and cd.until == T0 + 17
    assert (cd := prefetch(policy_of(), failure(401, cooldown_time=7.5))) is not None and cd.cooldown_time == 7.5
    assert (cd := prefetch(policy_of(cooldown_time=9), failure(429, retry_after="17"))) is not None
    assert cd.cooldown_time == 9


def test_a_storm_of_429s_matches_record_for_record() -> None:
    """Many pods' 429s on one deployment, with successes between: every one the pod cools, the worker emits or
    absorbs under its own longer cooldown (E2 extend)."""
    policy = policy_of()
    records: list[Outcome | schemas.Health] = []
    for n in range(200):
        if n % 3:
            records.append(failure(429, n=n, retry_after=str(5 + n % 7)))
        else:
            ok = schemas.from_dict({"schema": schemas.OUTCOME_SCHEMA, "event_id": f"e{n}", "ts": T0 + n,
                                    "deployment_id": "g0-0", "model_group": "g0", "ok": True})
            assert isinstance(ok, Outcome)
            records.append(ok)
    assert check_against_engine(policy, records) == sum(1 for r in records if isinstance(r, Outcome) and not r.ok)


def outcome(n: int, ts: float, ok: bool, gateway: str = "pod-a", dep: str = "g0-0", **fields: Any) -> Outcome:
    rec = schemas.from_dict({"schema": schemas.OUTCOME_SCHEMA, "event_id": f"{gateway}-{n}", "ts": T0 + ts,
                             "deployment_id": dep, "model_group": dep.split("-")[0], "ok": ok,
                             "status_code": 200 if ok else 500, "gateway": gateway, **fields})
    assert isinstance(rec, Outcome)
    return rec


def mid_minute(gateway: str = "pod-a", **fields: Any) -> list[Outcome | schemas.Health]:
    """PV1: 4 successes at T0+25..28, then 500s at T0+30..34 from one pod: 5/9 on its counters at the 5th."""
    return [outcome(i, 25 + i, True, gateway) for i in range(4)] + [
        outcome(10 + i, 30 + i, False, gateway, **fields) for i in range(5)]


@pytest.mark.parametrize(("policy", "records", "decided"), [
    (policy_of(), mid_minute(), 1),                                                   # PV1
    (policy_of(coolant={"litellm_counters": False}), mid_minute(), 0),                # PV2: D7 off
    (policy_of(coolant={"recool_coalesce": 1}), mid_minute(), 1),                     # PV3: X8, PF7's part
    (policy_of(coolant={"count_attempts": "final_only"}), mid_minute(attempt=0, final=False), 0),  # PV4: O3
    (policy_of({"allowed_fails": 3}), mid_minute(), 0),                               # PV5: V1 counts fleet-wide
    (policy_of(sizes=(1,)), mid_minute(), 0),                                         # PV6: lone: V2.2 only
    (policy_of(), [outcome(i, 55 + i, True, "pod-a") for i in range(5)]               # PV7: pod b's own 0/5,
     + [outcome(10 + i, 57 + i, False, "pod-b") for i in range(5)], 1),               # the window's 5/10
    (policy_of(), [outcome(0, 200, True), outcome(1, 0, True), *mid_minute()], 0),    # PV8: the clock went back
])
def test_which_streams_a_pods_counters_decide(policy: Policy, records: list[Outcome | schemas.Health],
                                              decided: int) -> None:
    """The vectors of docs/windows.md §6 (PV1-PV8): how many cooldowns the pods decide on their own counters,
    each one the worker's (same id, end and LiteLLM value)."""
    own = OwnCounters()
    base = sum(prefetch(policy, r) is not None for r in records if isinstance(r, Outcome))
    assert check_against_engine(policy, records, own=True) - base == decided
    pods = [prefetch(policy, r, own) for r in records if isinstance(r, Outcome)]
    assert len(pods) - pods.count(None) == base + decided


def test_under_coalescing_a_pod_holds_what_the_worker_holds_whatever_it_absorbs() -> None:
    """PF7 (PV9): a second 429 0.5 s after one at T0, cooldown_time 5, X8 1 s. The worker absorbs it (it would
    extend by less than 1 s) and holds T0+5; the pod, which cannot know that, holds T0+4.5 for it, S less than
    the record's own until (without PF7 it would have held, and written to Redis, T0+5.5)."""
    policy = policy_of({"cooldown_time": 5}, coolant={"recool_coalesce": 1})
    first, second = failure(429, n=0), schemas.from_dict({**schemas.to_dict(failure(429, n=1)), "ts": T0 + 0.5})
    assert isinstance(second, Outcome)
    engine = Engine(policy)
    assert engine.feed(first).disposition == "cooled"
    assert engine.feed(second).disposition == "absorbed"
    assert engine.state("g0-0").request.end == T0 + 5
    pods = [prefetch(policy, first), prefetch(policy, second)]
    assert [None if cd is None else (cd.until, cd.cooldown_time) for cd in pods] == [(T0 + 4, 4), (T0 + 4.5, 4)]
    assert [cd.event_id for cd in pods if cd is not None] == [engine_id(policy, first), engine_id(policy, second)]
    assert check_against_engine(policy, [first, second]) == 2


def engine_id(policy: Policy, rec: Outcome) -> str:
    """The id the worker gives the cooldown of `rec` on a fresh state (E3)."""
    cd = Engine(policy).feed(rec).cooldown
    assert cd is not None
    return cd.event_id


@pytest.mark.parametrize(("coolant", "expected"), [
    ({"recool_coalesce": 1}, (T0 + 59, 59)),                                   # PV10: 60 s, 1 s less
    ({"recool_coalesce": 60}, None),                                           # PV11: nothing left (S >= D)
    ({"recool_coalesce": 1, "recool": "overwrite"}, (T0 + 60, 60)),            # PV12: X8 is for extend only
])
def test_a_pods_part_under_coalescing(coolant: dict[str, Any], expected: tuple[float, float] | None) -> None:
    """PF7 on the one-record fast path (a 429 in a group of 3, the router's cooldown_time 60)."""
    policy = policy_of(coolant=coolant)
    cd = prefetch(policy, failure(429, exception_type="RateLimitError"))
    assert (None if cd is None else (cd.until, cd.cooldown_time)) == expected
