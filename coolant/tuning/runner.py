"""Replay one recording through many policies, in parallel processes.

The records are decoded once, in the parent. Workers get them without copying or re-decoding:
with the `fork` start method (Linux) they inherit the parent's memory, and only the small
`Policy` goes out and the figures come back. Where `fork` is unavailable the records are pickled
to each worker once, by the pool initializer. Results are returned in grid order whatever order
the workers finish in, so a run is deterministic for any `--jobs`.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Any

from coolant.io.sources import Block
from coolant.native_backend import NativeBackend, available, collector_paused, for_policy, run_all, run_multi
from coolant.processors import Engine, Step
from coolant.processors.multi import MultiEngine, share_key, shares
from coolant.processors.policy import Policy
from coolant.schemas import Cooldown, Outcome, Record
from coolant.tuning.metrics import CooldownSpan, DeploymentTraffic, PolicyFigures, policy_figures
from coolant.tuning.traffic import EngineInput

__all__ = ["Evaluation", "GridRun", "Inputs", "default_jobs", "evaluate", "evaluate_many", "tasks"]

Interval = tuple[float, float, str]
"""(start, until, reason) of one would-be cooldown, for the HTML timelines."""


@dataclass(slots=True)
class Evaluation:
    """What one policy would have done: its figures and the cooldowns of the charted deployments."""

    figures: PolicyFigures
    timelines: dict[str, list[Interval]]


@dataclass(frozen=True, slots=True)
class Inputs:
    """What every run of a grid reads: the recording (decoded, and natively `compact`), its traffic index and the
    report's settings; set once in the parent and inherited by the pool's workers."""

    records: Sequence[EngineInput]
    traffic: dict[str, DeploymentTraffic]
    flap_window: float
    charted: tuple[str, ...]
    blocks: Sequence[Block] | None = None
    decoded: Sequence[Sequence[Record | None] | None] | None = None
    compact: Any | None = None


_SHARED: Inputs | None = None
"""Set in the parent before the pool forks (inherited), or by `_init` in a spawned worker."""


def _init(shared: Inputs) -> None:
    global _SHARED
    _SHARED = shared


def default_jobs() -> int:
    """CPUs this process may run on (the affinity mask in a container), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def evaluate(
    policy: Policy,
    records: Sequence[EngineInput],
    traffic: dict[str, DeploymentTraffic],
    flap_window: float,
    charted: Sequence[str] = (),
    blocks: Sequence[Block] | None = None,
    decoded: Sequence[Sequence[Record | None] | None] | None = None,
    compact: Any | None = None,
) -> Evaluation:
    """Replay `records` (file order) through a fresh engine and measure its would-be cooldowns. With the raw
    `blocks` of the same records, the native success path (FP2) reads its plain successes from them, and takes
    the records it hands back from `decoded` (per block, `Recording.decoded`) where given, and the lines from
    `compact` (`Recording.compact`, the blocks read once for every policy) where given."""
    spans: dict[str, list[CooldownSpan]] = {}
    suppressed = 0
    with collector_paused():
        # plain successes (FP1, FP2) yield nothing: they cool nothing
        for rec, step in _steps(policy, records, blocks, decoded, compact):
            cd = step.cooldown
            if cd is None:
                if step.suppressed is not None:
                    suppressed += 1
                continue
            _keep(spans, cd, type(rec) is Outcome and not rec.ok)
    return _evaluation(traffic, spans, flap_window, suppressed, charted)


def evaluate_many(policies: Sequence[Policy], inputs: Inputs) -> list[Evaluation]:
    """`evaluate` of each policy over `inputs`, in order: in one pass (`MultiEngine`) where the policies can share
    it (`shares`) and the recording is replayed from its records or, natively, from `compact`; else one run per
    policy."""
    records, traffic, flap_window, charted = inputs.records, inputs.traffic, inputs.flap_window, inputs.charted
    blocks, decoded, compact = inputs.blocks, inputs.decoded, inputs.compact
    policies = list(policies)
    multi_native = compact is not None and blocks is not None and available()
    if len(policies) < 2 or not shares(policies) or (blocks is not None and not multi_native):
        return [evaluate(p, records, traffic, flap_window, charted, blocks, decoded, compact) for p in policies]
    multi = MultiEngine(policies)
    k = len(policies)
    spans: list[dict[str, list[CooldownSpan]]] = [{} for _ in range(k)]
    suppressed = [0] * k
    with collector_paused():
        if multi_native:
            assert blocks is not None
            steps = run_multi(multi, compact, blocks, [None] * len(blocks) if decoded is None else decoded,
                              _counted_already)
        else:
            steps = multi.feed_all(records)
        for rec, each in steps:
            trigger = type(rec) is Outcome and not rec.ok
            for i, step in enumerate(each):
                cd = step.cooldown
                if cd is None:
                    if step.suppressed is not None:
                        suppressed[i] += 1
                    continue
                _keep(spans[i], cd, trigger)
        return [_evaluation(traffic, spans[i], flap_window, suppressed[i], charted) for i in range(k)]


def _keep(spans: dict[str, list[CooldownSpan]], cd: Cooldown, trigger_counted: bool) -> None:
    """A would-be cooldown added to its deployment's spans."""
    span = CooldownSpan(cd.ts, cd.until, cd.reason, trigger_counted)
    mine = spans.get(cd.deployment_id)
    if mine is None:
        spans[cd.deployment_id] = [span]
    else:
        mine.append(span)


def _evaluation(
    traffic: dict[str, DeploymentTraffic],
    spans: dict[str, list[CooldownSpan]],
    flap_window: float,
    suppressed: int,
    charted: Sequence[str],
) -> Evaluation:
    figures = policy_figures(traffic, spans, flap_window, suppressed)
    timelines = {d: [(s.start, s.until, s.reason) for s in spans.get(d, ())] for d in charted}
    return Evaluation(figures, timelines)


def _steps(
    policy: Policy,
    records: Sequence[EngineInput],
    blocks: Sequence[Block] | None,
    decoded: Sequence[Sequence[Record | None] | None] | None,
    compact: Any | None,
) -> Iterator[tuple[Record, Step]]:
    if blocks is None:
        return Engine(policy).feed_all(records)
    path = for_policy(policy)
    if not isinstance(path, NativeBackend):
        return path.engine.feed_all(records)
    if compact is not None:
        return path.run_compact(compact, blocks, [None] * len(blocks) if decoded is None else decoded, _counted_already)
    if decoded is None:
        return run_all(path, blocks, _counted_already)
    return _native_run(path, blocks, decoded)


def _native_run(
    path: NativeBackend, blocks: Sequence[Block], decoded: Sequence[Sequence[Record | None] | None]
) -> Iterator[tuple[Record, Step]]:
    """`run_all` with each block's records decoded already (in the parent, once for every policy)."""
    for block, recs in zip(blocks, decoded, strict=True):
        yield from path.run(block, _counted_already, recs)
    path.finish()


def _counted_already(where_and_problem: str) -> None:
    """Invalid lines were counted and reported when the recording was read."""


def _evaluate_shared(policies: list[Policy]) -> list[Evaluation]:
    s = _SHARED
    assert s is not None, "worker started without the recording"
    return evaluate_many(policies, s)


def tasks(policies: Sequence[Policy], jobs: int) -> list[list[int]]:
    """The grid's policies (indices) in the runs that evaluate them: the policies `MultiEngine` can run together
    in one pass (equal `share_key`) in one run, each other policy alone; runs split in halves, largest first,
    until there are at least `jobs` of them (or every run is one policy). Largest runs first."""
    groups: dict[object, list[int]] = {}
    out: list[list[int]] = []
    for i, p in enumerate(policies):
        key = share_key(p)
        if key is None:
            out.append([i])
        else:
            groups.setdefault(key, []).append(i)
    out += groups.values()
    while len(out) < jobs:
        out.sort(key=len, reverse=True)
        if len(out[0]) < 2:
            break
        big = out.pop(0)
        half = (len(big) + 1) // 2
        out += [big[:half], big[half:]]
    out.sort(key=lambda t: (-len(t), t[0]))
    return out


class GridRun:
    """Evaluate policies; iterate `completed()` for (grid index, Evaluation) as each one finishes.

    Use as a context manager and enter it *before* starting anything that runs a thread (a
    progress bar): the worker processes are forked on entry.
    """

    def __init__(
        self,
        policies: Sequence[Policy],
        records: Sequence[EngineInput],
        traffic: dict[str, DeploymentTraffic],
        flap_window: float,
        charted: Sequence[str] = (),
        jobs: int = 1,
        blocks: Sequence[Block] | None = None,
        decoded: Sequence[Sequence[Record | None] | None] | None = None,
        compact: Any | None = None,
    ) -> None:
        self.policies = list(policies)
        self.shared = Inputs(records, traffic, flap_window, tuple(charted), blocks, decoded, compact)
        self.jobs = max(1, min(jobs, len(self.policies)))
        self._pool: ProcessPoolExecutor | None = None
        self.tasks = tasks(self.policies, self.jobs)
        self._futures: dict[Future[list[Evaluation]], list[int]] = {}
        self.results: list[Evaluation | None] = [None] * len(self.policies)

    def __enter__(self) -> GridRun:
        if self.jobs > 1:
            global _SHARED
            kwargs: dict[str, Any] = {}
            if "fork" in multiprocessing.get_all_start_methods():
                kwargs["mp_context"] = multiprocessing.get_context("fork")
                _SHARED = self.shared
                gc.freeze()  # children's collections then leave the shared records' pages alone
            else:
                kwargs["initializer"] = _init
                kwargs["initargs"] = (replace(self.shared, compact=None),)  # native memory: not pickled
            self._pool = ProcessPoolExecutor(max_workers=self.jobs, **kwargs)
            try:
                for task in self.tasks:  # forks on first submit
                    self._futures[self._pool.submit(_evaluate_shared, [self.policies[i] for i in task])] = task
            finally:
                if _SHARED is not None:
                    gc.unfreeze()
                    _SHARED = None
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=exc is not None)
            self._pool = None

    def completed(self) -> Iterator[tuple[int, Evaluation]]:
        if self._pool is None:
            s = self.shared
            for task in self.tasks:
                evs = evaluate_many([self.policies[i] for i in task], s)
                for i, ev in zip(task, evs, strict=True):
                    self.results[i] = ev
                    yield i, ev
            return
        for fut in as_completed(self._futures):
            for i, ev in zip(self._futures[fut], fut.result(), strict=True):
                self.results[i] = ev
                yield i, ev

    def ordered(self) -> list[Evaluation]:
        """All results in grid order (after `completed()` has been exhausted)."""
        missing = [i for i, r in enumerate(self.results) if r is None]
        if missing:
            raise RuntimeError(f"policies {missing} were not evaluated")
        return [r for r in self.results if r is not None]
