"""Property tests of the policy engine over random, realistic record streams (spec §5, D3, R5, G6).

Streams: 1–5 deployments in 1–3 groups (one group may be a wildcard), outcomes and some probes,
statuses from {None, 200, 400, 401, 402, 403, 404, 408, 409, 429, 500, 502, 503}, ts mostly
increasing with small out-of-order jitter and rare large jumps (late records), some Retry-After
and record cooldown_time values, some pre-call checks and non-final attempts, some duplicate
event_ids. Configs: a handful of router/coolant presets plus per-deployment model_info settings,
all built through `coolant.config.loader.parse_config` like a user's YAML.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from email.utils import formatdate
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from vectors_support import STATUS_CLASS, T0, cooldown_json

from coolant import schemas
from coolant.config.loader import parse_config
from coolant.processors import Disposition, Engine, Policy, Step, windows
from coolant.processors.state import PathState
from tests.support.hypothesis import examples

STATUSES = [None, 200, 400, 401, 402, 403, 404, 408, 409, 429, 500, 502, 503]
EXEMPT = {400, 403, 409, 422}
GROUP_NAMES = ["g1", "g2", "openai/*"]

# router_settings / coolant presets
PRESETS: dict[str, dict[str, Any]] = {
    "default": {},
    "sliding": {"coolant": {"window": "sliding"}},
    "counters_off": {"coolant": {"litellm_counters": False}},
    "coalesce": {"coolant": {"recool_coalesce": 1}},
    "router_cooldown": {"router_settings": {"cooldown_time": 12}},
    "router_af": {"router_settings": {"allowed_fails": 2, "cooldown_time": 9}},
    "router_policy": {
        "router_settings": {"allowed_fails_policy": {"RateLimitErrorAllowedFails": 1, "BadRequestErrorAllowedFails": 0}}
    },
    "fallbacks": {"router_settings": {"allowed_fails": 0, "fallbacks": [{"g1": ["g2"]}, {"g2": []}]}},
    "backoff": {"coolant": {"backoff": {}}},
    "overwrite": {"coolant": {"recool": "overwrite"}},
    "final_only": {"coolant": {"count_attempts": "final_only", "allowed_fails_window": 120}},
    "health": {"coolant": {"health": {"cooldown": True}}, "router_settings": {"cooldown_time": 7}},
    "ejection": {"coolant": {"max_ejection_percent": 50, "backoff": {"base": 2, "max": 60}}},
    "quota": {"coolant": {"quota": {"requests_threshold": 1, "tokens_per_request": 500}, "backoff": {}}},
    "quota_overwrite": {"coolant": {"quota": {}, "recool": "overwrite"}},
    "probation": {"coolant": {"backoff": {"probation": True, "base": 2, "reset_after": 60}}},
    "outlier": {"coolant": {"profile": "outlier"}, "router_settings": {"fallbacks": [{"g1": ["g2"]}]}},
    "outlier_tight": {
        "coolant": {
            "profile": "outlier",
            "outlier": {"consecutive": 2, "consecutive_single": 1, "rate_window": 3, "rate_min_requests": 2},
            "backoff": None,
        },
        "router_settings": {"fallbacks": [{"g2": ["g1"]}]},
    },
    "tuned": {
        "coolant": {
            "thresholds": {"min_requests": 3, "failure_rate": 0.3, "outage_min_requests": 8},
            "max_cooldown_time": 60,
            "late_after": 60,
            "health": {"cooldown": True},
        }
    },
}

# per-deployment model_info / litellm_params extras
DEPLOYMENT_EXTRAS: list[tuple[dict[str, Any], dict[str, Any]]] = [
    ({}, {}),
    ({}, {}),
    ({"cooldown_time": 30}, {}),
    ({"cooldown_time": 0}, {}),
    ({}, {"cooldown_time": 20}),
    ({"allowed_fails": 1}, {}),
    ({"allowed_fails_policy": {"RateLimitErrorAllowedFails": 0, "BadRequestErrorAllowedFails": 1}}, {}),
    ({"allowed_fails_policy": {"InternalServerErrorAllowedFails": 2}, "cooldown_time": 10}, {}),
]


@dataclass(frozen=True)
class Case:
    preset: str
    config: dict[str, Any]
    groups: dict[str, str]
    """deployment id -> group"""
    with_policy: frozenset[str]
    """deployments with a model_info.allowed_fails_policy"""
    records: list[schemas.Outcome | schemas.Health]

    @property
    def policy(self) -> Policy:
        return parse_config(self.config, source=f"preset {self.preset}").policy


@st.composite
def topologies(
    draw: st.DrawFn, presets: Sequence[str] = ()
) -> tuple[str, dict[str, Any], dict[str, str], frozenset[str]]:
    preset = draw(st.sampled_from(sorted(presets or PRESETS)))
    n_groups = draw(st.integers(1, 3))
    groups = draw(st.lists(st.sampled_from(GROUP_NAMES), min_size=n_groups, max_size=n_groups, unique=True))
    n_deps = draw(st.integers(1, 5))
    model_list = []
    members: dict[str, str] = {}
    with_policy = set()
    for i in range(n_deps):
        group = groups[i % n_groups] if i < n_groups else draw(st.sampled_from(groups))
        info, params = draw(st.sampled_from(DEPLOYMENT_EXTRAS))
        dep = f"d{i}"
        members[dep] = group
        if "allowed_fails_policy" in info:
            with_policy.add(dep)
        model_list.append(
            {
                "model_name": group,
                "litellm_params": {"model": group if "*" in group else f"openai/{group}", **params},
                "model_info": {"id": dep, **info},
            }
        )
    config = {"model_list": model_list, **json.loads(json.dumps(PRESETS[preset]))}
    return preset, config, members, frozenset(with_policy)


@st.composite
def cases(draw: st.DrawFn, max_records: int = 60, presets: Sequence[str] = ()) -> Case:
    preset, config, members, with_policy = draw(topologies(presets))
    deps = sorted(members)
    n = draw(st.integers(1, max_records))
    t = T0 + draw(st.integers(0, 59))
    records: list[schemas.Outcome | schemas.Health] = []
    ids: list[str] = []
    for i in range(n):
        step = draw(st.sampled_from([0, 0.5, 1, 1, 2, 3, 5, 8, 13]))
        if draw(st.integers(0, 40)) == 0:
            step = 200  # a gap long enough to make earlier stragglers late
        t += step
        ts = t
        jitter = draw(st.integers(0, 9))
        if jitter >= 7:
            ts = t - draw(st.sampled_from([0.5, 1, 3, 8]))  # small out-of-order arrival
        elif jitter == 6 and draw(st.booleans()):
            ts = t - 250  # a straggler, late under the default late_after
        dep = draw(st.sampled_from([*deps, "dx"])) if draw(st.integers(0, 30)) == 0 else draw(st.sampled_from(deps))
        status = draw(st.sampled_from(STATUSES))
        ok = draw(st.booleans()) if status is None else (status == 200 and draw(st.integers(0, 5)) > 0)
        exc_choice = draw(st.integers(0, 12))
        exc = STATUS_CLASS.get(status) if status is not None else None
        if exc_choice == 0:
            exc = None
        elif exc_choice == 1:
            exc = "APIConnectionError"
        elif exc_choice == 2 and exc is not None:
            exc = "litellm." + exc
        elif exc_choice == 3:
            exc = draw(st.sampled_from(["APIError", "ContentPolicyViolationError", "ContextWindowExceededError"]))
        if ok:
            status, exc = (200 if status == 200 else None), None
        # now and then a redelivery (or the same id reused on another deployment)
        event_id = draw(st.sampled_from(ids)) if ids and draw(st.integers(0, 4)) == 0 else f"e{i}"
        ids.append(event_id)
        d: dict[str, Any] = {
            "event_id": event_id,
            "ts": ts,
            "deployment_id": dep,
            "model_group": members.get(dep, "g1"),
            "status_code": status,
            "exception_type": exc,
        }
        if draw(st.integers(0, 9)) == 0:
            d.update(schema=schemas.HEALTH_SCHEMA, healthy=ok)
        else:
            d.update(schema=schemas.OUTCOME_SCHEMA, ok=ok)
            ra = draw(st.sampled_from([None] * 6 + ["17", "0", "2.5", "120", " 3 ", "date"]))
            d["retry_after"] = formatdate(ts + 45, usegmt=True) if ra == "date" else ra
            d["cooldown_time"] = draw(st.sampled_from([None] * 8 + [0, 7.5]))
            if draw(st.integers(0, 14)) == 0:
                d["source"] = "pre_call_check"
            attempt = draw(st.sampled_from([0, 0, 0, 1, 2]))
            d["attempt"] = attempt
            d["final"] = attempt == 0 or draw(st.booleans())
            d["gateway"] = draw(st.sampled_from(["gw-a", "gw-b", "gw-c"]))
            if ok and draw(st.integers(0, 3)) == 0:  # the quota a response announced (X6)
                d["ratelimit"] = {
                    "remaining_requests": draw(st.sampled_from([None, 0, 1, 2, 40])),
                    "reset_requests": draw(st.sampled_from([None, 0, 0.5, 6, 90])),
                    "remaining_tokens": draw(st.sampled_from([None, 0, 300, 9000])),
                    "reset_tokens": draw(st.sampled_from([None, 2, 30])),
                }
            if draw(st.integers(0, 5)) == 0:
                d["exception_message"] = draw(st.sampled_from(["boom", "x" * 70, "é" * 1100]))
            if not ok and draw(st.integers(0, 4)) == 0:  # who ended the attempt (only the outlier profile reads it)
                d["origin"] = draw(st.sampled_from(["caller", "upstream"]))
        rec = schemas.from_dict(d)
        assert isinstance(rec, schemas.Outcome | schemas.Health)
        records.append(rec)
    return Case(preset, config, members, with_policy, records)


def step_json(step: Step) -> tuple[Any, ...]:
    cd = None if step.cooldown is None else cooldown_json(step.cooldown)
    health = None if step.health is None else (step.health.is_healthy, step.health.timestamp, step.health.reason)
    return step.disposition, cd, health


def run(policy: Policy, records: Sequence[schemas.Outcome | schemas.Health]) -> list[Step]:
    engine = Engine(policy)
    return [engine.feed(rec) for rec in records]


SETTINGS = settings(max_examples=examples(250), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(cases())
def test_same_input_gives_identical_output(case: Case) -> None:
    """§5.1/5.2: the engine is a pure function of (records, registry, config); ids included."""
    policy = case.policy
    first = [step_json(s) for s in run(policy, case.records)]
    second = [step_json(s) for s in run(case.policy, case.records)]
    assert first == second
    # and the emitted JSON is byte-stable
    assert json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)


@SETTINGS
@given(cases())
def test_recool_extend_never_shortens(case: Case) -> None:
    """D3/E2: with `recool: extend`, each emitted until is > every earlier one, per deployment and path."""
    policy = case.policy
    if policy.options.recool != "extend":
        return
    latest: dict[tuple[str, str], float] = {}
    for step in run(policy, case.records):
        cd = step.cooldown
        if cd is None:
            continue
        key = (cd.deployment_id, "health" if cd.reason == "health_check" else "request")
        if key in latest:
            assert cd.until > latest[key], f"{key}: until {cd.until} does not extend {latest[key]}"
        latest[key] = cd.until


@SETTINGS
@given(cases(presets=("quota", "quota_overwrite")))
def test_quota_cooldowns_never_shorten_one_in_force(case: Case) -> None:
    """X6.5: a quota cooldown ends after every cooldown in force on its deployment, whatever `recool` says."""
    in_force: dict[str, float] = {}
    for step in run(case.policy, case.records):
        cd = step.cooldown
        if cd is None:
            continue
        if cd.reason == "quota_exhausted":
            assert cd.until > in_force.get(cd.deployment_id, float("-inf")), cooldown_json(cd)
        if cd.reason != "health_check":
            in_force[cd.deployment_id] = max(in_force.get(cd.deployment_id, float("-inf")), cd.until)


@SETTINGS
@given(cases(presets=("probation",)))
def test_probation_never_cools_after_a_success(case: Case) -> None:
    """X7.2: a probation cooldown never follows a counted success of the same deployment."""
    last_ok: dict[str, bool] = {}
    for rec, step in zip(case.records, run(case.policy, case.records), strict=True):
        if not isinstance(rec, schemas.Outcome) or step.disposition in ("late", "duplicate", "ignored"):
            continue
        if step.cooldown is not None and step.cooldown.reason == "probation":
            assert last_ok.get(rec.deployment_id) is False, cooldown_json(step.cooldown)
        last_ok[rec.deployment_id] = rec.ok


@SETTINGS
@given(cases())
def test_wildcard_deployments_never_cool(case: Case) -> None:
    """R5/G7."""
    for step in run(case.policy, case.records):
        if step.cooldown is not None:
            assert "*" not in case.groups[step.cooldown.deployment_id], cooldown_json(step.cooldown)


@SETTINGS
@given(cases())
def test_exempt_statuses_without_deployment_policy_never_cool(case: Case) -> None:
    """G6: 400/403/409/422 pass only when the deployment's own policy has an entry for them."""
    for rec, step in zip(case.records, run(case.policy, case.records), strict=True):
        failed = not rec.ok if isinstance(rec, schemas.Outcome) else not rec.healthy
        pre_call = isinstance(rec, schemas.Outcome) and rec.source == "pre_call_check"
        if failed and not pre_call and rec.status_code in EXEMPT and rec.deployment_id not in case.with_policy:
            assert step.cooldown is None, (rec, cooldown_json(step.cooldown))


@SETTINGS
@given(cases(), st.randoms(use_true_random=False))
def test_interleaving_deployments_does_not_change_their_cooldowns(case: Case, rnd: Any) -> None:
    """§5.2: a deployment's outputs depend only on its own record sequence (max_ejection_percent 100)."""
    policy = case.policy
    if policy.options.max_ejection_percent < 100:
        return
    queues: dict[str, list[schemas.Outcome | schemas.Health]] = defaultdict(list)
    for rec in case.records:
        queues[rec.deployment_id].append(rec)
    labels = [rec.deployment_id for rec in case.records]
    rnd.shuffle(labels)
    positions = dict.fromkeys(queues, 0)
    merged = []
    for dep in labels:
        merged.append(queues[dep][positions[dep]])
        positions[dep] += 1

    def per_deployment(records: Sequence[schemas.Outcome | schemas.Health]) -> dict[str, list[Any]]:
        out: dict[str, list[Any]] = defaultdict(list)
        for rec, step in zip(records, run(policy, records), strict=True):
            out[rec.deployment_id].append(step_json(step))
        return dict(out)

    assert per_deployment(case.records) == per_deployment(merged)


@SETTINGS
@given(cases())
def test_persisting_state_after_every_record_changes_nothing(case: Case) -> None:
    """Live persists each PathState as JSON per batch (streams/pathstore.py): a round trip through
    `to_dict`/`from_dict` after every record (D7's counters included) gives the same steps."""
    policy = case.policy
    engine = Engine(policy)
    steps = []
    for rec in case.records:
        steps.append(step_json(engine.feed(rec)))
        for st_ in engine.states.values():
            for path in ("request", "health"):
                ps = getattr(st_, path)
                setattr(st_, path, PathState.from_dict(json.loads(json.dumps(ps.to_dict())), ps.seen))
    assert steps == [step_json(s) for s in run(policy, case.records)]


@SETTINGS
@given(cases())
def test_discarding_old_state_changes_nothing(case: Case) -> None:
    """L3: the discard pass (windows, V1 counters, D7 counters, seen ids) never changes a result.

    With unique event ids: a reused id with a later ts is a duplicate only while its first copy is remembered,
    which L2 allows to differ."""
    policy = case.policy
    records = [msgspec.structs.replace(rec, event_id=f"u{i}") for i, rec in enumerate(case.records)]
    expected = [step_json(s) for s in run(policy, records)]
    original = windows.discard
    windows.discard = lambda *args: None  # type: ignore[assignment]
    try:
        kept = [step_json(s) for s in run(policy, records)]
    finally:
        windows.discard = original
    assert kept == expected


def _dense(case: Case, rnd: Any) -> list[schemas.Outcome | schemas.Health]:
    """The case's records with runs of plain successes after many of them (same deployment, gateway and
    window, fresh ids, now and then one on the next minute's boundary, where L3 is due): the records the
    engine's fast path (FP1) takes, between the ones it must not. Now and then one of them is a redelivery (an
    id seen before), late, ended by its caller (N4), a pre-call check (N2) or not final (O3)."""
    out: list[schemas.Outcome | schemas.Health] = []
    ids: list[str] = []
    for i, rec in enumerate(case.records):
        out.append(rec)
        ids.append(rec.event_id)
        if type(rec) is schemas.Outcome and rnd.random() < 0.6:
            for j in range(rnd.randrange(1, 6)):
                # exactly 60 s on (a D7 counter's expiry) or 60/180/250 s back (`late_after` in two presets)
                ts = rec.ts + rnd.choice([0, 0, 0.25, 1, 3, -2, 60, -60, -180, -250])
                if rnd.random() < 0.1:
                    ts = (rec.ts // 60 + 1) * 60.0
                event_id = f"s{i}.{j}" if rnd.random() < 0.9 else rnd.choice(ids)
                ids.append(event_id)
                out.append(msgspec.structs.replace(
                    rec, event_id=event_id, ts=ts, ok=True, status_code=None, exception_type=None,
                    ratelimit=None, source=None if rnd.random() < 0.9 else "pre_call_check",
                    final=rec.final if rnd.random() < 0.8 else False,
                    origin=None if rnd.random() < 0.8 else rnd.choice(["caller", "upstream"]),
                ))
    return out


def _state_json(engine: Engine) -> dict[str, Any]:
    return {
        dep: [st_.request.to_dict(), dict(st_.request.seen), st_.health.to_dict(), dict(st_.health.seen)]
        for dep, st_ in engine.states.items()
    }


@SETTINGS
@given(cases(), st.randoms(use_true_random=False))
def test_the_fast_path_is_the_general_path(case: Case, rnd: Any) -> None:
    """FP1 (docs/engine-fast-path.md): `Engine.feed_all` gives the steps `feed` gives, leaves the same states,
    and the only records it yields no step for are ones `feed` counts ("counted", nothing else), which it
    tallies per deployment."""
    policy = case.policy
    records = _dense(case, rnd)
    general = Engine(policy)
    expected = [general.feed(rec) for rec in records]
    fast = Engine(policy)
    yielded = iter(fast.feed_all(records))
    skipped: defaultdict[str, int] = defaultdict(int)
    nxt = next(yielded, None)
    for rec, step in zip(records, expected, strict=True):
        if nxt is not None and nxt[0] is rec:
            assert step_json(nxt[1]) == step_json(step)
            assert nxt[1].suppressed == step.suppressed
            nxt = next(yielded, None)
        else:
            assert step == Step(Disposition.COUNTED), (rec, step)
            assert type(rec) is schemas.Outcome
            skipped[rec.deployment_id] += 1
    assert nxt is None
    assert {d: s.counted for d, s in fast.states.items() if s.counted} == dict(skipped)
    assert _state_json(fast) == _state_json(general)
    assert fast.ejections == general.ejections
