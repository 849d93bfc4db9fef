"""Helpers for the spec §6 test vectors (cooldown-semantics.md): rows written close to the spec's own.

A vector row is: deployments in group g, a config in the spec's prefix notation, the "before"
records, the record(s) under test and one expectation per record. `run_vector` turns the config
into a LiteLLM proxy config dict, builds the policy through the real loader (`parse_config`),
feeds everything through `Engine.feed` and checks each step.

Conventions (spec §6): T0 = 1800000000; "before s/f" = s successes then f failures for d0 at
distinct ts in [T0, T0+30); the records under test at T0+30, T0+31, … unless they give their own
time; every record gets a fresh event_id unless it names one.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from coolant import schemas
from coolant.config.loader import parse_config
from coolant.processors import Engine, HealthState, Step
from coolant.schemas import Cooldown, Health, Outcome
from coolant.schemas.types import DURATION_MAX

T0 = 1_800_000_000
"""2027-01-15 08:00:00 GMT, a minute boundary."""

PROBE_FAILED = "background_health_check_failed"

# §6 conventions / §3.7: LiteLLM's class for a bare status; None where LiteLLM has none.
STATUS_CLASS: dict[int, str | None] = {
    429: "RateLimitError",
    500: "InternalServerError",
    401: "AuthenticationError",
    402: "PaymentRequiredError",
    404: "NotFoundError",
    408: "Timeout",
    503: "ServiceUnavailableError",
    502: "BadGatewayError",
    400: "BadRequestError",
    403: "PermissionDeniedError",
    422: "UnprocessableEntityError",
    409: None,
    499: None,
}


class _ClassOfStatus:
    def __repr__(self) -> str:
        return "<class of status>"


CLASS = _ClassOfStatus()
"""`exception_type` default: LiteLLM's class for the status (a "bare status" in §6)."""

_ALIASES = {"ra": "retry_after", "ct": "cooldown_time", "msg": "exception_message"}


def pol(**entries: int | None) -> dict[str, int | None]:
    """`pol(RateLimit=2)` -> `{"RateLimitErrorAllowedFails": 2}` (the spec's `pol{RateLimit:2}`)."""
    return {f"{category}ErrorAllowedFails": value for category, value in entries.items()}


# ----------------------------------------------------------------------------------------------
# Records


@dataclass(frozen=True)
class Rec:
    """A record template; `at` is the ts offset from T0 (None: the next slot T0+30, T0+31, …)."""

    schema: str
    fields: Mapping[str, Any]
    at: float | None = None

    def at_(self, offset: float) -> Rec:
        return replace(self, at=offset)


def _fields(status: int | None, exc: Any, extra: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"status_code": status}
    out["exception_type"] = (STATUS_CLASS.get(status) if status is not None else None) if exc is CLASS else exc
    for key, value in extra.items():
        out[_ALIASES.get(key, key)] = value
    return out


def fail(status: int | None = 500, exc: Any = CLASS, *, at: float | None = None, **extra: Any) -> Rec:
    """A failed request outcome (`ok: false`, `source: request`, attempt 0, final) for d0."""
    return Rec(Outcome.schema, {"ok": False, **_fields(status, exc, extra)}, at)


def success(*, at: float | None = None, **extra: Any) -> Rec:
    return Rec(Outcome.schema, {"ok": True, **{_ALIASES.get(k, k): v for k, v in extra.items()}}, at)


def pre_call(*, ok: bool = False, at: float | None = None, **extra: Any) -> Rec:
    """A `source: pre_call_check` outcome with status and exception_type null (N2)."""
    return Rec(Outcome.schema, {"ok": ok, "source": "pre_call_check", **_fields(None, None, extra)}, at)


def probe(
    status: int | None = None, exc: Any = CLASS, *, healthy: bool = False, at: float | None = None, **extra: Any
) -> Rec:
    """A `coolant.health/1` probe for d0; failed unless `healthy=True`."""
    return Rec(Health.schema, {"healthy": healthy, **_fields(status, exc, extra)}, at)


@dataclass(frozen=True)
class Before:
    """ "before s/f": s successes then f failures (template `failure`) for d0 in [T0, T0+30)."""

    successes: int
    failures: int
    failure: Rec = field(default_factory=lambda: fail(500))


def before(text: str, failure: Rec | None = None) -> Before:
    s, f = (int(x) for x in text.split("/"))
    return Before(s, f) if failure is None else Before(s, f, failure)


# ----------------------------------------------------------------------------------------------
# Expectations


_UNSET: Any = object()


@dataclass(frozen=True)
class Expect:
    """What one record under test must do.

    reason None: no cooldown ("—"); `skip` then pins `step.disposition` (a bracketed reason).
    Otherwise a cooldown with that reason and duration, `until == ts + duration`, plus E3's
    generic fields (event_id formula, trigger, ts, deployment, registry group, status, masked
    exception_type / exception_received) and any field the vector states.
    """

    reason: str | None = None
    duration: int | float | None = None
    skip: str | None = None
    until: float | None = None
    """offset from T0 of the expected `until`, where the vector states it"""
    window: tuple[float | None, int, int] | None = None
    """(start offset from T0, or None when it depends on the bucket width; successes; failures)"""
    fields: Mapping[str, Any] = field(default_factory=dict)
    """cooldown.to_dict() fields the vector states (JSON form)"""
    counts: tuple[int, int] | None = None
    """(successes, failures) of the record's window in the deployment's request state afterwards"""
    health: Any = _UNSET
    """expected `step.health`: a (healthy, ts offset, reason) tuple, or None for "unchanged" """
    probe_state: tuple[bool, float, str] | None = None
    """the deployment's materialized health state afterwards (H1): its latest `step.health` so far"""


def cool(reason: str, duration: int | float, **kw: Any) -> Expect:
    return Expect(reason, duration, **kw)


def no(skip: str | None = None, **kw: Any) -> Expect:
    return Expect(None, None, skip, **kw)


NO = no()


# ----------------------------------------------------------------------------------------------
# Vectors


@dataclass(frozen=True)
class Scenario:
    before: Before | None
    records: Sequence[Rec]
    expects: Sequence[Expect]


@dataclass(frozen=True)
class Vector:
    id: str
    dep: int
    cfg: Mapping[str, Any]
    scenarios: Sequence[Scenario]
    note: str = ""


def V(
    vid: str,
    dep: int,
    cfg: Mapping[str, Any],
    before_: str | Before | None,
    records: Sequence[Rec],
    expects: Sequence[Expect],
    note: str = "",
    *,
    separate: bool = False,
) -> Vector:
    """One row. `separate=True`: each record is its own case (fresh engine, same before, ts T0+30)."""
    b = before(before_) if isinstance(before_, str) else before_
    assert len(records) == len(expects), f"{vid}: {len(records)} records but {len(expects)} expectations"
    if separate:
        scenarios = [Scenario(b, [r], [e]) for r, e in zip(records, expects, strict=True)]
    else:
        scenarios = [Scenario(b, list(records), list(expects))]
    return Vector(vid, dep, cfg, scenarios, note)


def Vs(vid: str, dep: int, cfg: Mapping[str, Any], scenarios: Sequence[Scenario], note: str = "") -> Vector:
    """A row made of independent cases (e.g. XV11's two befores)."""
    return Vector(vid, dep, cfg, scenarios, note)


# ----------------------------------------------------------------------------------------------
# Config: the spec's prefix notation -> a LiteLLM proxy config dict


def _set_path(target: dict[str, Any], path: Sequence[str], value: Any) -> None:
    for part in path[:-1]:
        target = target.setdefault(part, {})
    target[path[-1]] = copy.deepcopy(value)


def litellm_config(dep: int, cfg: Mapping[str, Any]) -> dict[str, Any]:
    """`{"rs.allowed_fails": 1, "mi.cooldown_time": 30, "co.window": "sliding", "group": "openai/*"}`
    -> model_list (d0..d(dep-1), explicit ids, `mi.`/`lp.` on every deployment), router_settings, coolant.
    """
    group = cfg.get("group", "g")
    sections: dict[str, dict[str, Any]] = {"rs": {}, "mi": {}, "lp": {}, "co": {}}
    for key, value in cfg.items():
        if key == "group":
            continue
        prefix, _, path = key.partition(".")
        _set_path(sections[prefix], path.split("."), value)
    model = group if "*" in group else "openai/x"
    model_list = [
        {
            "model_name": group,
            "litellm_params": {"model": model, **copy.deepcopy(sections["lp"])},
            "model_info": {"id": f"d{i}", **copy.deepcopy(sections["mi"])},
        }
        for i in range(dep)
    ]
    out: dict[str, Any] = {"model_list": model_list}
    if sections["rs"]:
        out["router_settings"] = sections["rs"]
    if sections["co"]:
        out["coolant"] = sections["co"]
    return out


# ----------------------------------------------------------------------------------------------
# Running and checking


def cooldown_json(cd: Cooldown) -> dict[str, Any]:
    """The cooldown record as its JSON object (what `coolant.cooldowns` carries)."""
    to_dict = getattr(cd, "to_dict", None)  # the schemas API moved from methods to codec functions
    plain = to_dict() if to_dict is not None else schemas.to_dict(cd)
    return json.loads(json.dumps(plain))


def mask(text: str | None) -> str | None:
    """E4, written independently of the engine."""
    if text is None:
        return None
    text = text[:1024]
    return text if len(text) <= 50 else text[:50] + "*" * (len(text) - 50)


def expected_event_id(schema: str, deployment_id: str, event_id: str) -> str:
    return "cd-" + hashlib.sha256(f"{schema}\n{deployment_id}\n{event_id}".encode()).hexdigest()[:32]


class _Ids:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.n = 0

    def __call__(self) -> str:
        self.n += 1
        return f"{self.prefix}{self.n:04d}"


def make_record(rec: Rec, ts: float, event_id: str, group: str) -> Outcome | Health:
    d: dict[str, Any] = {
        "schema": rec.schema,
        "event_id": event_id,
        "ts": ts,
        "deployment_id": "d0",
        "model_group": group,
    }
    if rec.schema == Outcome.schema:
        d.update({"source": "request", "attempt": 0, "final": True})
    d.update(rec.fields)
    out = schemas.from_dict(d)  # validated exactly as a reader would
    assert isinstance(out, Outcome | Health)
    return out


def _label(vid: str, k: int, i: int, rec: Outcome | Health) -> str:
    return f"{vid} case {k} record {i} (ts T0{rec.ts - T0:+g}, {rec.deployment_id}, status {rec.status_code})"


@functools.cache
def _probe_policy(dep: int, coolant_section: str) -> Any:
    """Group g (not a wildcard), no V1 settings, the vector's own counting options."""
    return parse_config(litellm_config(dep, json.loads(coolant_section)), source="window probe").policy


def window_counts(engine: Engine, fed: Sequence[Outcome | Health], deployment_id: str, ts: float) -> tuple[int, int]:
    """(successes, failures) of the deployment's request window holding ts, observed black-box.

    The records fed so far are replayed into a fresh engine whose policy counts them the same
    way (same window, count_attempts, late_after) but lets a 401 cool by V2.4 (non_retryable);
    one more 401 at ts with a huge record cooldown_time (so E2 cannot absorb it) then reports
    the window's counts, plus itself, in its cooldown record.
    """
    o = engine.policy.options
    co = {"co.window": o.window, "co.count_attempts": o.count_attempts, "co.late_after": o.late_after,
          "co.litellm_counters": False}  # the window's counts, not D7's (which would rank first for the 401)
    entry = engine.policy.registry.get(deployment_id)
    assert entry is not None
    probe_engine = Engine(_probe_policy(engine.policy.registry.size(entry.model_group), json.dumps(co)))
    for rec in fed:
        probe_engine.feed(rec)
    probe = schemas.from_dict(
        {
            "schema": Outcome.schema,
            "event_id": "window-probe",
            "ts": ts,
            "deployment_id": deployment_id,
            "model_group": "g",
            "ok": False,
            "status_code": 401,
            "exception_type": "AuthenticationError",
            "cooldown_time": DURATION_MAX,  # the longest a record may ask for (B3)
        }
    )
    step = probe_engine.feed(probe)
    assert step.cooldown is not None, f"window probe did not cool: {step.disposition}"
    w = step.cooldown.window
    return w.successes, w.failures - 1


def check_step(
    where: str,
    e: Expect,
    step: Step,
    rec: Outcome | Health,
    engine: Engine,
    group: str,
    health_states: Mapping[str, HealthState],
    fed: Sequence[Outcome | Health],
) -> None:
    cd = step.cooldown
    if e.reason is None:
        assert cd is None, f"{where}: expected no cooldown, got {cooldown_json(cd) if cd else None}"
        assert step.disposition != "cooled", where
        if e.skip is not None:
            assert step.disposition == e.skip, f"{where}: disposition {step.disposition!r}, expected {e.skip!r}"
    else:
        assert cd is not None, f"{where}: expected {e.reason} {e.duration}, got disposition {step.disposition!r}"
        assert step.disposition == "cooled", where
        d = cooldown_json(cd)
        got = (d["reason"], d["cooldown_time"])
        assert got == (e.reason, e.duration), f"{where}: got {got}, expected {(e.reason, e.duration)}"
        # E3: a whole-number duration is a JSON integer
        assert type(d["cooldown_time"]) is type(e.duration), f"{where}: cooldown_time {d['cooldown_time']!r}"
        assert d["until"] == rec.ts + e.duration, f"{where}: until {d['until']} != ts + D"
        if e.until is not None:
            assert d["until"] == T0 + e.until, f"{where}: until T0{d['until'] - T0:+g}, expected T0{e.until:+g}"
        # E3 fields that hold for every cooldown
        pre_call = isinstance(rec, Outcome) and rec.source == "pre_call_check"
        name = "RateLimitError" if pre_call else (rec.exception_type or "").rpartition(".")[2] or None
        expected = {
            "schema": "coolant.cooldown/1",
            "event_id": expected_event_id(rec.schema, rec.deployment_id, rec.event_id),
            "trigger_event_id": rec.event_id,
            "ts": rec.ts,
            "deployment_id": rec.deployment_id,
            "model_group": group,
            "status_code": 429 if pre_call else rec.status_code,
            "exception_type": mask(name),
            "exception_received": mask(rec.exception_message if rec.exception_message is not None else name) or "",
        }
        expected.update(e.fields)
        for key, value in expected.items():
            assert d[key] == value, f"{where}: {key} = {d[key]!r}, expected {value!r}"
        if e.window is not None:
            start, s, f = e.window
            w = d["window"]
            assert (w["successes"], w["failures"]) == (s, f), f"{where}: window {w}, expected {s}/{f}"
            if start is not None:
                assert w["start"] == T0 + start, f"{where}: window start T0{w['start'] - T0:+g}"
        # the JSON form round-trips
        assert schemas.from_dict(json.loads(json.dumps(d))) == cd, where
    if e.counts is not None:
        s, f = window_counts(engine, fed, rec.deployment_id, rec.ts)
        assert (s, f) == e.counts, f"{where}: window counts {s}/{f}, expected {e.counts[0]}/{e.counts[1]}"
    if e.health is not _UNSET:
        want = None if e.health is None else HealthState(e.health[0], T0 + e.health[1], e.health[2])
        assert step.health == want, f"{where}: step.health {step.health}, expected {want}"
    if e.probe_state is not None:
        healthy, at, reason = e.probe_state
        got_state = health_states.get(rec.deployment_id)
        assert got_state == HealthState(healthy, T0 + at, reason), f"{where}: health state {got_state}"


def run_vector(v: Vector) -> None:
    config = parse_config(litellm_config(v.dep, v.cfg), source=v.id)
    group = v.cfg.get("group", "g")
    for k, sc in enumerate(v.scenarios):
        engine = Engine(config.policy)
        fresh = _Ids(f"{v.id}-{k}-")
        fed: list[Outcome | Health] = []
        health_states: dict[str, HealthState] = {}  # what a materializer holds: the latest health update
        b = sc.before
        if b is not None:
            n = b.successes + b.failures
            templates = [success()] * b.successes + [b.failure] * b.failures
            for i, tmpl in enumerate(templates):
                rec = make_record(tmpl, T0 + i * 30 / n, fresh(), group)
                fed.append(rec)
                engine.feed(rec)
        for i, (tmpl, e) in enumerate(zip(sc.records, sc.expects, strict=True)):
            ts = T0 + (tmpl.at if tmpl.at is not None else 30 + i)
            rec = make_record(tmpl, ts, fresh(), group)
            fed.append(rec)
            step = engine.feed(rec)
            if step.health is not None:
                health_states[rec.deployment_id] = step.health
            check_step(_label(v.id, k, i, rec), e, step, rec, engine, group, health_states, fed)
