"""Health transitions (issue 6): one record per flip of a deployment's materialized health, none per repeated probe."""

from __future__ import annotations

from coolant.config.loader import parse_config
from coolant.processors import step_health
from coolant.processors.health import transition, transition_id
from coolant.processors.state import HealthState, PathState
from coolant.schemas import Health, HealthTransition, decode, encode

T0 = 1_800_000_000.0


def probe(eid: str, dt: float, healthy: bool, **fields: object) -> Health:
    return Health(event_id=eid, ts=T0 + dt, deployment_id="d1", model_group="probe-group", healthy=healthy,
                  **fields)  # type: ignore[arg-type]


def run(probes: list[Health], *, health_cooldown: bool = False) -> list[HealthTransition]:
    """The transitions `step_health` returns (what the worker publishes and `coolant replay` writes)."""
    policy = parse_config({"model_list": [{"model_name": "g", "litellm_params": {"model": "openai/x"},
                                            "model_info": {"id": "d1"}}],
                           "coolant": {"health": {"cooldown": health_cooldown}}}).policy
    ps = PathState()
    out = []
    for rec in probes:
        previous = ps.probe
        step = step_health(policy, ps, rec)
        assert step.transition == transition(previous, rec, "g")  # the rule, as the step applies it
        assert step.transition is None or step.health is not None  # a flip is always a health-state change
        if step.transition is not None:
            out.append(step.transition)
    return out


def test_first_probe_is_a_transition_from_unknown() -> None:
    t = transition(None, probe("p1", 0, True))
    assert t is not None
    assert (t.healthy, t.previous, t.model_group, t.probe_event_id) == (True, None, "probe-group", "p1")
    assert t.exception_received == ""


def test_same_verdict_is_no_transition() -> None:
    assert transition(HealthState(True, T0, ""), probe("p2", 5, True)) is None
    assert transition(HealthState(False, T0, "background_health_check_failed"), probe("p2", 5, False)) is None


def test_flip_carries_the_evidence_masked() -> None:
    message = "litellm.AuthenticationError: Incorrect API key provided: sk-proj-" + "x" * 80
    t = transition(HealthState(True, T0, ""), probe("p3", 10, False, status_code=401,
                                                    exception_type="litellm.AuthenticationError",
                                                    exception_message=message, prober="prober-1"))
    assert t is not None
    assert (t.healthy, t.previous, t.status_code, t.prober) == (False, True, 401, "prober-1")
    assert t.exception_type == "AuthenticationError"
    # the key is redacted before E4 masks (S1), then the first 50 characters are kept
    redacted = "litellm.AuthenticationError: Incorrect API key provided: [REDACTED]"
    assert t.exception_received == redacted[:50] + "*" * (len(redacted) - 50)
    assert "sk-proj" not in t.exception_received


def test_older_probe_never_flips() -> None:
    """H1 keeps the probe with the greatest ts: a late probe changes no state, so it is no transition either."""
    assert transition(HealthState(True, T0 + 10, ""), probe("old", 5, False)) is None
    # a tie is processed later and wins (H1)
    assert transition(HealthState(True, T0 + 10, ""), probe("tie", 10, False)) is not None


def test_event_id_is_deterministic_and_valid() -> None:
    a = transition(None, probe("p1", 0, False))
    b = transition(None, probe("p1", 0, False))
    assert a is not None and b is not None
    assert a.event_id == b.event_id == transition_id("d1", "p1")
    assert a.event_id != transition_id("d1", "p2") != transition_id("d2", "p1")
    assert decode(encode(a)) == a


def test_flapping_sequence_gives_one_record_per_flip() -> None:
    seq = [
        probe("h1", 0, True), probe("h2", 10, True),
        probe("u1", 20, False, status_code=500), probe("u2", 30, False, status_code=500),
        probe("late", 25, True),  # older than u1/u2: no state change, no transition
        probe("u2", 30, False, status_code=500),  # a redelivered copy
        probe("h3", 40, True), probe("h4", 50, True),
    ]
    got = run(seq)
    assert [(t.probe_event_id, t.previous, t.healthy) for t in got] == [
        ("h1", None, True), ("u1", True, False), ("h3", False, True)
    ]
    assert all(t.model_group == "g" for t in got)
    assert run(seq, health_cooldown=True) == got  # probe cooldowns (H2) change nothing of the transitions
