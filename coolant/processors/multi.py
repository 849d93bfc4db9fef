"""Several policies over one record stream in one pass: what a record does that no decision rule reads, done once.

Every policy of a tuning grid runs the same records through `step_outcome`, and most of a record's step does not
depend on the rules being tuned: L1-L3 (late, duplicate, discard), O3/N2/N4 (counted), O5 (the window counts), LC2
(the publisher's counters) and, where the policies share the registry and the router's durations, the gates
(`failure_of`). `MultiEngine` keeps that part of each deployment's request path once (`states`) and, for each
policy, only what its decisions read and write (`Engine.states` of each engine: counters, end, streak,
probation), then decides a counted failure for each policy with the engine's own `decided`, and filters it with
that policy's X3 state (`Engine.filter`). Health records go to each policy's engine as they are.

It serves policies that agree on everything the shared part reads (`shares`): the same `late_after`, window,
`count_attempts` and `litellm_counters`, and none with quota rules, the outlier profile or recovery that probes
(whose rules read every success or hold a request path). Each policy's steps are those its own `Engine` would
give, record by record; tests hold the two to the same steps on random streams.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from coolant.processors import windows
from coolant.processors.dispositions import Skip
from coolant.processors.engine import (
    COUNTED,
    DUPLICATE,
    IGNORED,
    LATE,
    SKIPPED,
    Engine,
    Step,
    counted,
    decided,
    failure_of,
)
from coolant.processors.policy import Policy
from coolant.processors.state import DeploymentState, PathState, PodCounters
from coolant.schemas import Health, Outcome, Record, Window

__all__ = ["MultiEngine", "share_key", "shares"]


def share_key(policy: Policy) -> tuple[object, ...] | None:
    """What `MultiEngine`'s shared part reads of a policy (policies with equal keys can share it), or None for a
    policy it does not serve."""
    o = policy.options
    if o.quota is not None or o.outlier is not None or o.recovery is not None:
        return None
    return (o.late_after, o.slot_width, o.count_attempts, o.litellm_counters)


def shares(policies: Sequence[Policy]) -> bool:
    """Whether `MultiEngine` serves these policies together."""
    keys = {share_key(p) for p in policies}
    return bool(policies) and len(keys) == 1 and None not in keys


def _gate_key(policy: Policy) -> tuple[object, ...]:
    """What `failure_of` reads of a policy besides the record."""
    return (policy.router.cooldown_time, policy.router.disable_cooldowns, policy.options.max_cooldown_time)


class MultiEngine:
    """One `Engine` per policy behind one shared request-path state per deployment (see the module docs)."""

    def __init__(self, policies: Sequence[Policy]) -> None:
        if not shares(policies):
            raise ValueError("MultiEngine serves policies that agree on late_after, window, count_attempts and "
                             "litellm_counters, without quota rules, the outlier profile or recovery")
        self.policies = list(policies)
        self.engines = [Engine(p) for p in self.policies]
        first = self.policies[0]
        self.options = first.options
        self.states: dict[str, DeploymentState] = {}
        """The shared part of each deployment's request path (hw, seen ids, windows, publisher counters); its
        `probation` is set while any policy's is (what the native success path reads before taking it)."""
        self.own: dict[str, list[PathState]] = {}
        """Per deployment, each policy's request path state (its engine's), in policy order."""
        self.gate = first if all(
            _gate_key(p) == _gate_key(first) and p.registry == first.registry for p in self.policies
        ) else None
        """The policy whose `failure_of` stands for every policy's, when they all agree on what it reads."""
        k = len(self.policies)
        self._late, self._duplicate, self._ignored = (LATE,) * k, (DUPLICATE,) * k, (IGNORED,) * k
        self.counted = (COUNTED,) * k

    def state(self, deployment_id: str) -> DeploymentState:
        """The shared state of `deployment_id`, each policy's own made with it."""
        st = self.states.get(deployment_id)
        if st is None:
            st = self.states[deployment_id] = DeploymentState()
            self.own[deployment_id] = [e.state(deployment_id).request for e in self.engines]
        return st

    def discard(self, st: DeploymentState, deployment_id: str, hw: float | None = None) -> None:
        """L3 on the shared part, and on each policy's allowed-fails counters (`windows.discard`'s)."""
        ps = st.request
        o = self.options
        windows.discard(ps, o.late_after, o.slot_width, hw)
        horizon = (ps.hw if hw is None else hw) - o.late_after
        for mine in self.own[deployment_id]:
            windows.expire_counters(mine, horizon)

    def feed(self, rec: Record) -> tuple[Step, ...]:
        """Each policy's step for `rec`, in policy order (X3 applied), as `Engine.feed` gives it."""
        if type(rec) is Health:
            self.state(rec.deployment_id)
            return tuple(e.feed(rec) for e in self.engines)
        if type(rec) is not Outcome:
            return self._ignored
        dep = rec.deployment_id
        st = self.states.get(dep)
        first = st is None
        if st is None:
            st = self.state(dep)
        ps = st.request
        o = self.options
        ts = rec.ts
        hw = ps.hw  # L1-L3, as `_accept`
        if hw - ts > o.late_after:
            return self._late
        seen = ps.seen
        if rec.event_id in seen:
            return self._duplicate
        seen[rec.event_id] = ts
        if ts > hw:
            ps.hw = ts
            if ts >= ps.gc_next:
                ps.gc_next = (ts // 60 + 1) * 60
                self.discard(st, dep)
        if not counted(o, rec):
            return self._ignored
        ok = rec.ok
        width = o.slot_width
        cell = ps.windows.get(k := windows.slot(ts, width))  # O5
        if cell is None:
            ps.windows[k] = [1, 0] if ok else [0, 1]
        else:
            cell[not ok] += 1
        pod = None
        if o.litellm_counters:  # LC2
            pod = ps.litellm.get(gateway := rec.gateway or "")
            if pod is None:
                pod = ps.litellm[gateway] = PodCounters()
            windows.bump(pod, ts, ok)
        own = self.own[dep]
        if ok:
            if ps.probation:  # X7.2 on every policy's path
                ps.probation = False
                for mine in own:
                    mine.probation = False
            if not first:  # FP1: the engine yields a step for a deployment's first record, counts the others
                st.counted += 1
            return self.counted
        gate = self.gate
        gated = None if gate is None else failure_of(gate, rec)
        if isinstance(gated, Skip):
            return (SKIPPED[gated],) * len(own)
        window = view = None
        steps: list[Step] = []
        probation = False
        for e, mine in zip(self.engines, own, strict=True):
            policy = e.policy
            g = failure_of(policy, rec) if gated is None else gated
            if isinstance(g, Skip):
                step = SKIPPED[g]
            else:
                if window is None:
                    start, s, f = windows.counts(ps, ts, width)
                    window = Window(start, s, f)
                    view = None if pod is None else windows.litellm_counts(pod, ts)
                step = decided(policy, mine, rec, g, window, view)
                if step.candidate:
                    step = e.filter(step)
            probation = probation or mine.probation
            steps.append(step)
        ps.probation = probation
        return tuple(steps)

    def feed_all(self, records: Iterable[Record]) -> Iterator[tuple[Record, tuple[Step, ...]]]:
        """`feed` for each record in order, yielding (record, steps) except where every step only counted the
        record (each policy's `Engine.feed_all` yields no step for those)."""
        counted_ = self.counted
        for rec in records:
            steps = self.feed(rec)
            if steps is not counted_:
                yield rec, steps

