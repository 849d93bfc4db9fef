"""Recovery that probes (RC1-RC5): probe records hold a cooled deployment and release it early; after a release
the first real failure re-cools at once. Checked through `Engine` (what replay and tuning run, over the same
step functions as the worker), and against a brute-force model of the rules."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from coolant.config.errors import ConfigError
from coolant.config.loader import parse_config
from coolant.processors import Engine, Policy, Step
from coolant.schemas import Health, Outcome
from tests.support.hypothesis import examples

T0 = 1_800_000_000.0
COOLDOWN = 5.0
"""The router's default cooldown_time: what a 401 in a group of several cools for (V2.4)."""


def policy(recovery: dict[str, Any] | None = None, **coolant: Any) -> Policy:
    model_list = [{"model_name": "g", "litellm_params": {"model": "openai/x"}, "model_info": {"id": f"d{i}"}}
                  for i in range(3)]
    if recovery is not None:
        coolant["recovery"] = recovery
    return parse_config({"model_list": model_list, "coolant": coolant}).policy


def failure(n: int, dt: float, dep: str = "d0") -> Outcome:
    return Outcome(event_id=f"o{n}", ts=T0 + dt, deployment_id=dep, model_group="g", ok=False, status_code=401,
                   exception_type="AuthenticationError")


def success(n: int, dt: float, dep: str = "d0") -> Outcome:
    return Outcome(event_id=f"s{n}", ts=T0 + dt, deployment_id=dep, model_group="g", ok=True)


def probe(n: int, dt: float, healthy: bool, dep: str = "d0") -> Health:
    return Health(event_id=f"p{n}", ts=T0 + dt, deployment_id=dep, model_group="g", healthy=healthy,
                  status_code=None if healthy else 503,
                  exception_type=None if healthy else "ServiceUnavailableError")


def probes(engine: Engine, start: float, pattern: str, every: float = 1.0, first: int = 0) -> list[Step]:
    """Feed one probe per `every` s from `start`: "x" failing, "o" healthy."""
    return [engine.feed(probe(first + i, start + i * every, c == "o")) for i, c in enumerate(pattern)]


def test_healthy_probes_release_a_cooled_deployment_early() -> None:
    engine = Engine(policy({"release_after": 2}))
    cooled = engine.feed(failure(1, 0))
    assert cooled.cooldown is not None and cooled.cooldown.until == T0 + COOLDOWN
    first, second = probes(engine, 1, "oo")
    assert first.disposition == "held" and first.release is None
    assert second.disposition == "released" and second.release is not None
    assert second.release.ts == T0 + 2 and second.release.deployment_id == "d0"
    assert second.release.trigger_event_id == "p1"
    assert engine.states["d0"].request.end == T0 + 2  # the cooldown in force ended at the release


def test_a_failing_probe_breaks_the_healthy_streak() -> None:
    engine = Engine(policy({"release_after": 2}))
    engine.feed(failure(1, 0))
    steps = probes(engine, 0.5, "oxoo", every=0.5)
    assert [s.disposition for s in steps] == ["held", "cooled", "held", "released"]  # the failing one holds


def test_failing_probes_hold_the_cooldown_up_to_the_bound() -> None:
    engine = Engine(policy({"extend": 10, "max_hold": 30}))
    engine.feed(failure(1, 0))
    steps = probes(engine, 1, "x" * 40)
    held = [s.cooldown for s in steps if s.cooldown is not None]
    assert held and all(cd.reason == "health_check" and cd.status_code == 503 for cd in held)
    # one record per extend / 2 s at most, never past the hold's first failing probe (T0 + 1) + max_hold
    assert max(cd.until for cd in held) == T0 + 1 + 30
    assert all(b.ts - a.ts >= 5 for a, b in itertools.pairwise(held))
    assert engine.states["d0"].request.end == T0 + 31
    # past the end, the probes are H1's alone: the deployment is no longer cooled
    late = probes(engine, 32, "xo", first=100)
    assert [s.disposition for s in late] == ["probe", "probe"]


def test_probes_of_a_deployment_not_cooled_change_nothing() -> None:
    engine = Engine(policy({}))
    steps = probes(engine, 0, "xxoo")
    assert [s.disposition for s in steps] == ["probe"] * 4
    assert all(s.cooldown is None and s.release is None for s in steps)


def test_without_recovery_probes_never_touch_the_request_path() -> None:
    """The default: probes feed H1 only, as before (the compatible profile is unchanged)."""
    engine = Engine(policy())
    engine.feed(failure(1, 0))
    steps = probes(engine, 1, "oooo")
    assert [s.disposition for s in steps] == ["probe"] * 4
    assert engine.states["d0"].request.end == T0 + COOLDOWN and engine.states["d0"].request.hold is None


def server_error(n: int, dt: float) -> Outcome:
    """A failure V2 does not cool alone with `min_requests: 100` (below threshold)."""
    return Outcome(event_id=f"e{n}", ts=T0 + dt, deployment_id="d0", model_group="g", ok=False, status_code=500,
                   exception_type="InternalServerError")


HALF_OPEN = {"backoff": {"probation": True}, "thresholds": {"min_requests": 100}}


def test_the_first_real_failure_after_a_release_re_cools_at_once() -> None:
    """RC5 is X7's half-open: with `backoff.probation` (the outlier profile's default) the release starts it."""
    engine = Engine(policy({"release_after": 2}, **HALF_OPEN))
    engine.feed(failure(1, 0))
    engine.feed(success(1, 0.5))  # in flight when it was cooled: ends X7.1's probation (X7.2)
    probes(engine, 1, "oo")
    again = engine.feed(server_error(2, 3))
    assert again.cooldown is not None and again.cooldown.reason == "probation"
    assert again.cooldown.ts == T0 + 3 and again.cooldown.until == T0 + 3 + 2 * COOLDOWN  # X2: the next step


def test_a_success_after_a_release_ends_the_half_open_state() -> None:
    engine = Engine(policy({"release_after": 2}, **HALF_OPEN))
    engine.feed(failure(1, 0))
    probes(engine, 1, "oo")
    engine.feed(success(1, 3))
    later = engine.feed(server_error(2, 4))
    assert later.cooldown is None and later.disposition == "below_threshold"


def test_without_probation_a_release_is_not_half_open() -> None:
    engine = Engine(policy({"release_after": 2}, thresholds={"min_requests": 100}))
    engine.feed(failure(1, 0))
    probes(engine, 1, "oo")
    assert engine.feed(server_error(2, 3)).cooldown is None


def test_a_duplicate_probe_counts_once() -> None:
    engine = Engine(policy({"release_after": 2}))
    engine.feed(failure(1, 0))
    one = engine.feed(probe(1, 1, True))
    dup = engine.feed(probe(1, 1, True))
    assert one.disposition == "held" and dup.disposition == "duplicate"


def test_bad_recovery_settings_are_refused() -> None:
    for bad in ({"release_after": 0}, {"extend": 0}, {"extend": 20, "max_hold": 10}, {"nope": 1}, 3):
        try:
            policy(bad)  # type: ignore[arg-type]
        except ConfigError:
            continue
        raise AssertionError(f"accepted {bad!r}")


# -- against a brute-force model ------------------------------------------------------------------------------

def model(
    events: list[tuple[float, str]], release_after: int, extend: float, max_hold: float
) -> list[tuple[str, float]]:
    """RC1-RC4 as written in docs/probe.md, over (ts offset, kind) with kind "fail" (a 401 outcome), "x" or "o"
    (a failing or healthy probe): every ("cool" | "hold" | "release", until or ts)."""
    out: list[tuple[str, float]] = []
    end: float | None = None
    since: float | None = None
    good = 0
    for dt, kind in events:
        if kind == "fail":
            if end is None or dt + COOLDOWN > end:  # a 401 cools at once (V2.4); a re-cool only extends
                end = dt + COOLDOWN
                out.append(("cool", end))
            continue
        if end is None or dt >= end:
            since, good = None, 0
            continue
        if kind == "o":
            good += 1
            if good >= release_after:
                out.append(("release", dt))
                end, since, good = dt, None, 0
            continue
        good = 0
        since = dt if since is None else since
        until = min(dt + extend, since + max_hold)
        if until - end >= extend / 2:
            end = until
            out.append(("hold", until))
    return out


@settings(max_examples=examples(200), deadline=None)  # 200 under `ci`, fewer under `quick`
@given(
    steps=st.lists(
        st.tuples(st.integers(1, 16).map(lambda q: q / 4), st.sampled_from(["fail", "x", "x", "o", "o"])),
        max_size=40,
    ),
    release_after=st.integers(1, 3),
    extend=st.sampled_from([2.0, 5.0, 10.0]),
    hold_factor=st.sampled_from([1.0, 2.0, 5.0]),
)
def test_the_engine_decides_as_the_model(
    steps: list[tuple[float, str]], release_after: int, extend: float, hold_factor: float
) -> None:
    max_hold = extend * hold_factor
    engine = Engine(policy({"release_after": release_after, "extend": extend, "max_hold": max_hold}))
    events: list[tuple[float, str]] = []
    t = 0.0
    got: list[tuple[str, float]] = []
    for i, (gap, kind) in enumerate(steps):
        t += gap
        events.append((t, kind))
        step = engine.feed(failure(i, t) if kind == "fail" else probe(i, t, kind == "o"))
        if step.release is not None:
            got.append(("release", step.release.ts - T0))
        elif step.cooldown is not None:
            kind_of = "hold" if step.cooldown.reason == "health_check" else "cool"
            got.append((kind_of, step.cooldown.until - T0))
    want = model(events, release_after, extend, max_hold)
    assert [k for k, _ in got] == [k for k, _ in want]
    assert all(abs(a - b) < 1e-6 for (_, a), (_, b) in zip(got, want, strict=True))
