"""`Step` carries everything a record decided: the X3 candidate mark and the group verdict (`eject`), and health
transitions. The live shell only routes these, so what is checked here is what both the worker and replay do."""

from __future__ import annotations

from typing import Any

from coolant.config.loader import parse_config
from coolant.processors import Disposition, Engine, Policy, Skip, Step, eject, step_health, step_outcome
from coolant.processors.state import PathState
from coolant.schemas import Health, Outcome

T0 = 1_800_000_000.0


def policy(n: int = 4, **coolant: Any) -> Policy:
    model_list = [{"model_name": "g", "litellm_params": {"model": "openai/x"}, "model_info": {"id": f"d{i}"}}
                  for i in range(n)]
    return parse_config({"model_list": model_list, "coolant": coolant}).policy


def auth_error(eid: str, dep: str, dt: float) -> Outcome:
    return Outcome(event_id=eid, ts=T0 + dt, deployment_id=dep, model_group="g", ok=False, status_code=401,
                   exception_type="AuthenticationError")


def test_a_cooldown_is_a_candidate_only_when_x3_is_on() -> None:
    off = step_outcome(policy(), PathState(), auth_error("e1", "d0", 1))
    on = step_outcome(policy(max_ejection_percent=50), PathState(), auth_error("e1", "d0", 1))
    assert off.cooldown is not None and not off.candidate
    assert on.cooldown is not None and on.candidate
    assert on.cooldown == off.cooldown  # the mark routes the cooldown; it changes nothing of it


def test_eject_passes_then_suppresses_at_the_limit() -> None:
    p = policy(max_ejection_percent=50)  # 4 deployments: at most 2 cooled at once
    active: dict[str, float] = {}
    verdicts = []
    for i, dep in enumerate(("d0", "d1", "d2")):
        step = step_outcome(p, PathState(), auth_error(f"e{i}", dep, i))
        verdicts.append(eject(p, active, step))
    assert [v.disposition for v in verdicts] == ["cooled", "cooled", "suppressed"]
    assert not any(v.candidate for v in verdicts)  # decided: nothing is left for the group stage
    third = verdicts[2]
    assert third.cooldown is None and third.suppressed is not None and third.suppressed.deployment_id == "d2"
    assert set(active) == {"d0", "d1"}


def test_eject_is_a_pass_when_x3_was_turned_off_meanwhile() -> None:
    """A candidate decided under X3 may meet a policy at 100 % in the ejection stage: it passes."""
    step = step_outcome(policy(max_ejection_percent=50), PathState(), auth_error("e1", "d0", 1))
    full: dict[str, float] = {"d1": T0 + 1000, "d2": T0 + 1000, "d3": T0 + 1000}
    assert eject(policy(max_ejection_percent=50), dict(full), step).disposition == "suppressed"
    assert eject(policy(), dict(full), step) == Step("cooled", step.cooldown)


def test_engine_keeps_the_transition_of_a_suppressed_probe_cooldown() -> None:
    engine = Engine(policy(2, max_ejection_percent=50, health={"cooldown": True}))
    engine.feed(auth_error("e1", "d1", 1))  # d1 cooled: the group's one allowed ejection
    step = engine.feed(Health(event_id="h1", ts=T0 + 2, deployment_id="d0", model_group="g", healthy=False,
                              status_code=401, exception_type="AuthenticationError"))
    assert step.disposition == "suppressed" and step.suppressed is not None
    assert step.health is not None and step.transition is not None and step.transition.healthy is False


def test_a_probe_flip_is_a_transition_with_the_registry_group() -> None:
    p = policy()
    ps = PathState()
    first = step_health(p, ps, Health(event_id="h1", ts=T0, deployment_id="d0", model_group="prober's", healthy=True))
    again = step_health(p, ps, Health(event_id="h2", ts=T0 + 1, deployment_id="d0", model_group="x", healthy=True))
    assert first.transition is not None and first.transition.model_group == "g" and first.transition.previous is None
    assert again.health is not None and again.transition is None  # a newer verdict, but the same: no flip


def test_dispositions_keep_the_words_of_metrics_and_summaries() -> None:
    """The enums name the values; the values themselves (metric labels, replay summary keys) never change."""
    assert sorted(Disposition) == sorted(
        ["counted", "late", "duplicate", "ignored", "probe", "absorbed", "cooled", "suppressed",
         "held", "released",
         "invalid", "failed", "tombstone", "stale"])  # the last four: the live shell's, for records not decided
    assert sorted(Skip) == sorted(
        ["unknown_deployment", "no_status", "excluded_type", "disabled", "zero_duration", "status_exempt", "wildcard",
         "single_402", "lone_exempt", "below_threshold"])
    step = step_outcome(policy(), PathState(), auth_error("e1", "nowhere", 1))
    assert step.disposition is Skip.UNKNOWN_DEPLOYMENT and f"{step.disposition}" == "unknown_deployment"


def test_an_attempt_its_caller_ended_is_not_counted_in_any_profile() -> None:
    """N4: two successes then three caller-ended failures leave the window at 2 successes and 0 failures, so the
    next real 500 (1 of 3) cannot cross V2.3's rate; counted as failures, 4 of 6 would."""
    for profile in ("compatible", "outlier"):
        pol = policy(n=2, profile=profile, thresholds={"min_requests": 1}) if profile == "outlier" else policy(n=2)
        ps = PathState()
        for i in range(2):
            step_outcome(pol, ps, Outcome(event_id=f"s{i}", ts=T0 + i, deployment_id="d0", model_group="g", ok=True))
        for i in range(3):
            left = Outcome(event_id=f"c{i}", ts=T0 + 5 + i, deployment_id="d0", model_group="g", ok=False,
                           exception_type="ClientDisconnected", origin="caller")
            step = step_outcome(pol, ps, left)
            assert step.cooldown is None and step.disposition == Disposition.IGNORED, profile
        step = step_outcome(pol, ps, Outcome(event_id="f", ts=T0 + 10, deployment_id="d0", model_group="g",
                                             ok=False, status_code=500, exception_type="InternalServerError"))
        assert step.cooldown is None, profile
