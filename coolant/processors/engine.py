"""The policy engine: one record in, at most one cooldown out (spec §3.2, §3.10, §4).

`step_outcome` and `step_health` are the per-deployment stage: they read the policy, update
the `PathState` they are given (request or health path, D6), and return a `Step` holding everything the record
decided (cooldown, health state, health transition). `eject` is the group-level stage (X3) for the cooldowns a
step marks as candidates. `Engine` composes both over in-memory states; replay, tuning and tests use it, and the
live agents run the same functions over states they persist, only routing what the steps say.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace

from coolant.processors import ejection, outlier, quota, recovery, windows
from coolant.processors.categories import exception_name
from coolant.processors.decide import Candidate, Failure, decide, gate
from coolant.processors.dispositions import Disposition, Skip
from coolant.processors.duration import provider_capped, request_duration, router_duration
from coolant.processors.emit import admit, build
from coolant.processors.health import transition
from coolant.processors.policy import COUNTER_TTL, DeploymentEntry, Options, Policy
from coolant.processors.state import DeploymentState, HealthState, PathState, PodCounters
from coolant.processors.value import value
from coolant.schemas import Cooldown, Health, HealthTransition, Outcome, Record, Window

PROBE_FAILED = "background_health_check_failed"


@value
class Step:
    """What one record did.

    `disposition` is a `Disposition` (counted, late, duplicate, ignored, probe, absorbed, cooled, suppressed)
    or the `Skip` reason of the rule that stopped the record. `health` is set when the record changed the
    deployment's health state.
    """

    disposition: Disposition | Skip
    cooldown: Cooldown | None = None
    health: HealthState | None = None
    suppressed: Cooldown | None = None
    """The cooldown X3 held back (never emitted; for metrics and the replay summary)."""
    transition: HealthTransition | None = None
    """Set when a probe flipped the deployment's materialized health (H1), or was its first: the record the
    live shell publishes on `<prefix>health.transitions` and `coolant replay --transitions-out` writes."""
    candidate: bool = False
    """X3 is on: `cooldown` still needs the group verdict (`eject`) before it is emitted. The live shell sends
    it to the ejection stage; the engine applies `eject` at once."""
    release: recovery.Release | None = None
    """RC4: probes released the deployment's cooldown early; the live shell ends it in Redis and in every pod."""


SKIPPED = {skip: Step(skip) for skip in Skip}
"""The step of a record a rule stopped, one per reason (a `Step` is a value: never changed once made)."""
COUNTED = Step(Disposition.COUNTED)
LATE = Step(Disposition.LATE)
DUPLICATE = Step(Disposition.DUPLICATE)
IGNORED = Step(Disposition.IGNORED)
ABSORBED = Step(Disposition.ABSORBED)


def _accept(o: Options, ps: PathState, event_id: str, ts: float) -> Step | None:
    """L1 (late), L2 (duplicate), then advance the high-water mark and discard old state (L3)."""
    hw = ps.hw
    if hw - ts > o.late_after:
        return LATE
    seen = ps.seen
    if event_id in seen:
        return DUPLICATE
    seen[event_id] = ts
    if ts > hw:
        ps.hw = ts
        if ts >= ps.gc_next:  # once per event-time minute
            ps.gc_next = (ts // 60 + 1) * 60
            windows.discard(ps, o.late_after, o.slot_width)
    return None


def short_path(o: Options) -> bool:
    """`Engine.feed_all` decides a success itself: a counted success only counts (no X6 quota rule reads its
    announced budget, no outlier rule its streak or recent buckets)."""
    return o.quota is None and o.outlier is None


def counted(o: Options, rec: Outcome) -> bool:
    """O3 (a non-final attempt under `final_only`), N2 (a successful pre-call check) and N4 (an attempt its caller
    ended) are not counted."""
    if rec.final is False and o.count_attempts == "final_only":
        return False
    if rec.origin == "caller":
        return False
    return not (rec.ok and rec.source == "pre_call_check")


def step_outcome(policy: Policy, ps: PathState, rec: Outcome) -> Step:
    """O1-O9 for one outcome record, before the group-level ejection filter.

    The success path is the hot path of every replay and agent, so it is kept flat.
    """
    o = policy.options
    ts = rec.ts
    stop = _accept(o, ps, rec.event_id, ts)
    if stop is not None:
        return stop
    if not counted(o, rec):
        return IGNORED
    ok = rec.ok
    width = o.slot_width
    cell = ps.windows.get(k := windows.slot(ts, width))  # O5: count in the record's window
    if cell is None:
        ps.windows[k] = [1, 0] if ok else [0, 1]
    else:
        cell[not ok] += 1
    pod = None
    if o.litellm_counters:  # LC2: the publisher's own counters, as that LiteLLM process keeps them; a failure
        pod = ps.litellm.get(gateway := rec.gateway or "")  # is counted before the decision reads it
        if pod is None:
            pod = ps.litellm[gateway] = PodCounters()
        windows.bump(pod, ts, ok)
    if ok:
        if o.outlier is not None:
            outlier.answered(ps, ts, outlier.began(rec))  # X10.2, X10.4, X10.5, X11.1
        if ps.probation:
            ps.probation = False  # X7.2: a success ends probation
        return COUNTED if o.quota is None else _quota_step(policy, ps, rec)
    if o.outlier is not None:
        return _outlier_failure(policy, ps, rec, pod)
    return _failure(policy, ps, rec, pod)


def _failure(policy: Policy, ps: PathState, rec: Outcome, pod: PodCounters | None) -> Step:
    """O7-O9 for a counted failure (with X7, and so RC5), after O5 and LC2 counted it."""
    gated = failure_of(policy, rec)
    if isinstance(gated, Skip):
        return SKIPPED[gated]
    ts = rec.ts
    start, s, f = windows.counts(ps, ts, policy.options.slot_width)
    view = None if pod is None else windows.litellm_counts(pod, ts)
    return decided(policy, ps, rec, gated, Window(start, s, f), view)


def decided(
    policy: Policy,
    ps: PathState,
    rec: Outcome,
    gated: tuple[DeploymentEntry, Failure, float],
    window: Window,
    view: Window | None,
) -> Step:
    """O7-O9 for a counted failure that passed the gates (`failure_of`), given the counts of its window (O5) and
    its publisher's counters (LC3; None when D7 is off): M1-M4, V1/V2, X7.3, then O9. Reads and writes only
    the decision's part of `ps` (counters, end, streak, probation); the windows it reads are `window`'s."""
    o = policy.options
    entry, failure, duration = gated
    verdict = decide(policy, entry, ps, failure, duration, window, view)
    if isinstance(verdict, Skip):
        if not (verdict is Skip.BELOW_THRESHOLD and ps.probation and _on_probation(o, ps, rec.ts)):
            return SKIPPED[verdict]
        verdict = Candidate("probation", duration, window)  # X7.3
    return _cooled(o, ps, entry, verdict, rec, failure)


def _outlier_failure(policy: Policy, ps: PathState, rec: Outcome, pod: PodCounters | None) -> Step:
    """A counted failure under the outlier profile (docs/outlier.md): the compatible rules first, unchanged; for a
    failure the profile counts (X9) that they did not cool, X10, X11, then the half-open re-cool (X13, and so
    RC5 after a release)."""
    o = policy.options
    out = o.outlier
    assert out is not None
    what = outlier.observe(ps, rec)
    step = _failure(policy, ps, rec, pod)
    if what is not outlier.Kind.FAILED or not isinstance(step.disposition, Skip):
        return step
    ts = rec.ts
    entry = policy.registry.get(rec.deployment_id)
    duration = 0.0 if entry is None else request_duration(policy, entry, rec.cooldown_time, rec.retry_after, ts)
    skip = outlier.gate(policy, entry, duration)
    if skip is not None:
        return Step(skip)
    assert entry is not None
    failure = Failure(rec.status_code, exception_name(rec.exception_type), ts)
    found = outlier.rule(policy, out, entry, ps, ts, duration)
    if found is None and ps.probation and _on_probation(o, ps, ts):
        start, s, f = windows.counts(ps, ts, o.slot_width)
        found = Candidate("probation", duration, Window(start, s, f))  # X13: X7.3 for every failure X9 counts
    if found is None:
        return Step(Skip.BELOW_THRESHOLD)
    return _cooled(o, ps, entry, found, rec, failure)


def _cooled(o: Options, ps: PathState, entry: DeploymentEntry, candidate: Candidate, rec: Outcome,
            failure: Failure) -> Step:
    """O9 for a request-path candidate, then X7.1: a cooldown emitted under `probation: true` starts one."""
    step = _emit(o, entry, ps, candidate, rec, failure)
    if step.cooldown is not None and o.backoff is not None and o.backoff.probation:
        ps.probation = True  # X7.1
    return step


def failure_of(policy: Policy, rec: Outcome) -> tuple[DeploymentEntry, Failure, float] | Skip:
    """N1, N2, T1-T4 then G1-G7 for a failed outcome: (entry, failure, duration), or the gate's skip reason."""
    ts = rec.ts
    failure = Failure(429, "RateLimitError", ts) if rec.source == "pre_call_check" else Failure(
        rec.status_code, exception_name(rec.exception_type), ts
    )
    entry = policy.registry.get(rec.deployment_id)
    duration = 0.0
    if entry is not None:
        duration = request_duration(policy, entry, rec.cooldown_time, rec.retry_after, ts)
    skip = gate(policy, entry, failure, duration)
    if skip is not None:
        return skip
    assert entry is not None
    return entry, failure, duration


def _on_probation(o: Options, ps: PathState, ts: float) -> bool:
    """X7.3: the backed-off cooldown has ended and its reset span has not."""
    end = ps.end
    return o.backoff is not None and end is not None and end <= ts < end + o.backoff.reset_after


def _quota_step(policy: Policy, ps: PathState, rec: Outcome) -> Step:
    """X6: a counted success whose announced budget is spent cools the deployment until the reset."""
    o = policy.options
    assert o.quota is not None
    reset = quota.spent_reset(o.quota, rec)
    if reset is None:
        return COUNTED
    entry = policy.registry.get(rec.deployment_id)
    skip = gate(policy, entry, Failure(429, None, rec.ts), None)  # X6.3: G1, G4, G7 (a 429 passes the others)
    if skip is not None:
        return Step(skip)
    assert entry is not None
    if policy.lone(entry.model_group):
        return Step(Skip.LONE_EXEMPT)
    ts = rec.ts
    if reset > 0:
        duration = provider_capped(policy, reset)
    else:
        duration = request_duration(policy, entry, rec.cooldown_time, None, ts)
    if duration == 0:
        return Step(Skip.ZERO_DURATION)
    end = ps.end
    admitted = None if end is not None and ts + duration <= end else admit(o, ps, ts, duration, backoff=False)
    if admitted is None:  # never shorter than the cooldown in force, even with `recool: overwrite`
        return Step(Disposition.ABSORBED)
    start, s, f = windows.counts(ps, ts, o.slot_width)
    final, until = admitted
    cooldown = build(
        entry,
        Candidate("quota_exhausted", final, Window(start, s, f)),
        final,
        until,
        trigger_schema=rec.schema,
        trigger_event_id=rec.event_id,
        ts=ts,
        status=429,
        name=None,
        message=quota.message(rec),
    )
    return Step(Disposition.COOLED, cooldown, candidate=ejection.enabled(o))


def step_health(policy: Policy, ps: PathState, rec: Health, request: PathState | None = None) -> Step:
    """H1 (health state, always), RC1-RC4 (recovery that probes, when enabled: on `request`, the deployment's
    request path state) and H2-H3 (probe cooldowns, when enabled), on the health path state."""
    update = flip = None
    probe = ps.probe
    entry = policy.registry.get(rec.deployment_id)
    if probe is None or rec.ts >= probe.timestamp:
        new = HealthState(rec.healthy, rec.ts, "" if rec.healthy else PROBE_FAILED)
        if new != probe:
            ps.probe = update = new
            flip = transition(probe, rec, None if entry is None else entry.model_group)
    o = policy.options
    accepted = False
    if o.recovery is not None and request is not None and entry is not None:
        stop = _accept(o, ps, rec.event_id, rec.ts)
        if stop is not None:
            return Step(stop.disposition, None, update, transition=flip)
        accepted = True
        held = recovery.on_probe(o, entry, request, rec)
        if held is not None:
            return Step(held.disposition, held.cooldown, update, transition=flip, release=held.release)
    if rec.healthy or not o.health_cooldown:
        return Step(Disposition.PROBE, None, update, transition=flip)
    stop = None if accepted else _accept(o, ps, rec.event_id, rec.ts)
    if stop is not None:
        return Step(stop.disposition, None, update, transition=flip)
    failure = Failure(rec.status_code, exception_name(rec.exception_type), rec.ts)
    skip = gate(policy, entry, failure, None)
    if skip is not None:
        return Step(skip, None, update, transition=flip)
    assert entry is not None
    verdict = decide(policy, entry, ps, failure, router_duration(policy), Window(rec.ts, 0, 1))
    if isinstance(verdict, Skip):
        return Step(verdict, None, update, transition=flip)
    step = _emit(o, entry, ps, Candidate("health_check", verdict.duration, verdict.window), rec, failure)
    return replace(step, health=update, transition=flip)


def _emit(
    o: Options, entry: DeploymentEntry, ps: PathState, candidate: Candidate, rec: Outcome | Health, failure: Failure
) -> Step:
    """O9: backoff and re-cool on the path state, then the cooldown record (E3)."""
    admitted = admit(o, ps, rec.ts, candidate.duration)
    if admitted is None:
        return ABSORBED
    duration, until = admitted
    cooldown = build(
        entry,
        candidate,
        duration,
        until,
        trigger_schema=rec.schema,
        trigger_event_id=rec.event_id,
        ts=rec.ts,
        status=failure.status,
        name=failure.name,
        message=rec.exception_message,
    )
    return Step(Disposition.COOLED, cooldown, candidate=ejection.enabled(o))


def eject(policy: Policy, active: ejection.GroupEjections, step: Step) -> Step:
    """X3, the group verdict on a candidate step: emitted as it is, or suppressed (its cooldown kept aside).

    `active` is the candidate's model group's ejection state (see `ejection.passes`), updated on a pass.
    """
    cd = step.cooldown
    if cd is None or ejection.passes(policy, active, cd.deployment_id, cd.ts, cd.until):
        return replace(step, candidate=False)
    return Step(Disposition.SUPPRESSED, None, step.health, cd, step.transition)


def emit_fresh(
    o: Options, entry: DeploymentEntry, candidate: Candidate, rec: Outcome, failure: Failure
) -> Cooldown | None:
    """O9 on a path with no cooldown in force: the record a pod can make without the fleet's end (E1)."""
    return _emit(o, entry, PathState(), candidate, rec, failure).cooldown


class Engine:
    """In-memory states for every deployment plus the ejection filter: the offline pipeline."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.states: dict[str, DeploymentState] = {}
        self.ejections: dict[str, ejection.GroupEjections] = {}

    def state(self, deployment_id: str) -> DeploymentState:
        st = self.states.get(deployment_id)
        if st is None:
            st = self.states[deployment_id] = DeploymentState()
        return st

    def feed(self, rec: Record) -> Step:
        """Process one record in order. Deployment (R2: replay uses the config) and cooldown records are ignored."""
        if isinstance(rec, Outcome):
            step = step_outcome(self.policy, self.state(rec.deployment_id).request, rec)
        elif isinstance(rec, Health):
            st = self.state(rec.deployment_id)
            step = step_health(self.policy, st.health, rec, st.request)
        else:
            return IGNORED
        return self.filter(step) if step.candidate else step

    def filter(self, step: Step) -> Step:
        """X3 on a candidate step, over the in-memory ejection state of its group."""
        cd = step.cooldown
        assert cd is not None
        return eject(self.policy, self.ejections.setdefault(cd.model_group, {}), step)

    def feed_all(self, records: Iterable[Record]) -> Iterator[tuple[Record, Step]]:
        """`feed` for each record in order, yielding (record, step) except for the records whose step only counted
        them (FP1, docs/engine-fast-path.md): those add 1 to their `DeploymentState.counted` instead.

        Nearly every record is such a success, so skipping `feed`'s dispatch and the caller's per-step work for
        them is replay's and tuning's hot path. Under the options the short path serves (no X6 quota rules, not the
        outlier profile: `short_path`), a success of a deployment with a state is decided here, by the rules
        `step_outcome` applies to it in the same order (L1-L3, O3/N2/N4, O5, LC2, X7.2), without its calls;
        every other record is `step_outcome`'s or `feed`'s. Property tests hold the two to the same steps and
        states on random streams.
        """
        if not short_path(self.policy.options):
            yield from self._feed_all(records)
            return
        policy = self.policy
        o = policy.options
        states = self.states
        feed = self.feed
        late_after, width, d7 = o.late_after, o.slot_width, o.litellm_counters
        final_only = o.count_attempts == "final_only"
        for rec in records:
            if type(rec) is not Outcome or (st := states.get(rec.deployment_id)) is None:
                yield rec, feed(rec)
                continue
            if not rec.ok:
                step = step_outcome(policy, st.request, rec)
                yield rec, self.filter(step) if step.candidate else step
                continue
            ps = st.request
            ts = rec.ts
            hw = ps.hw
            if hw - ts > late_after:  # L1
                yield rec, LATE
                continue
            seen = ps.seen
            event_id = rec.event_id
            if event_id in seen:  # L2
                yield rec, DUPLICATE
                continue
            seen[event_id] = ts
            if ts > hw:
                ps.hw = ts
                if ts >= ps.gc_next:  # L3, once per event-time minute
                    ps.gc_next = (ts // 60 + 1) * 60
                    windows.discard(ps, late_after, width)
            if (final_only or rec.origin is not None or rec.source is not None) and not counted(o, rec):
                yield rec, IGNORED  # O3, N4, N2: `counted` reads only these three
                continue
            cell = ps.windows.get(k := int(ts // width))  # O5 (`windows.slot`)
            if cell is None:
                ps.windows[k] = [1, 0]
            else:
                cell[0] += 1
            if d7:  # LC2 (`windows.bump` of a success)
                pod = ps.litellm.get(gateway := rec.gateway or "")
                if pod is None:
                    pod = ps.litellm[gateway] = PodCounters()
                if ts >= pod.s_anchor + COUNTER_TTL:
                    pod.s_anchor = ts
                    pod.s_count = 1
                else:
                    pod.s_count += 1
            if ps.probation:
                ps.probation = False  # X7.2
            st.counted += 1

    def _feed_all(self, records: Iterable[Record]) -> Iterator[tuple[Record, Step]]:
        """`feed_all` with every outcome of a known deployment decided by `step_outcome` (the quota and outlier
        options read every success)."""
        policy = self.policy
        states = self.states
        feed = self.feed
        for rec in records:
            if type(rec) is Outcome and (st := states.get(rec.deployment_id)) is not None:
                step = step_outcome(policy, st.request, rec)
                if step is COUNTED:
                    st.counted += 1
                    continue
                yield rec, self.filter(step) if step.candidate else step
            else:
                yield rec, feed(rec)

    def run(self, records: Iterable[Record]) -> list[Cooldown]:
        """Convenience for tests and tuning: every cooldown emitted for `records`, in order."""
        return [step.cooldown for _, step in self.feed_all(records) if step.cooldown is not None]
