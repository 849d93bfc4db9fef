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
from coolant.native_backend import NativeBackend, collector_paused, for_policy, run_all
from coolant.processors import Engine, Step
from coolant.processors.policy import Policy
from coolant.schemas import Outcome, Record
from coolant.tuning.metrics import CooldownSpan, DeploymentTraffic, PolicyFigures, policy_figures
from coolant.tuning.traffic import EngineInput

__all__ = ["Evaluation", "GridRun", "default_jobs", "evaluate"]

Interval = tuple[float, float, str]
"""(start, until, reason) of one would-be cooldown, for the HTML timelines."""


@dataclass(slots=True)
class Evaluation:
    """What one policy would have done: its figures and the cooldowns of the charted deployments."""

    figures: PolicyFigures
    timelines: dict[str, list[Interval]]


@dataclass(frozen=True, slots=True)
class _Shared:
    records: Sequence[EngineInput]
    traffic: dict[str, DeploymentTraffic]
    flap_window: float
    charted: tuple[str, ...]
    blocks: Sequence[Block] | None = None
    decoded: Sequence[Sequence[Record | None] | None] | None = None
    compact: Any | None = None


_SHARED: _Shared | None = None
"""Set in the parent before the pool forks (inherited), or by `_init` in a spawned worker."""


def _init(shared: _Shared) -> None:
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
            span = CooldownSpan(cd.ts, cd.until, cd.reason, type(rec) is Outcome and not rec.ok)
            mine = spans.get(cd.deployment_id)
            if mine is None:
                spans[cd.deployment_id] = [span]
            else:
                mine.append(span)
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


def _evaluate_shared(policy: Policy) -> Evaluation:
    s = _SHARED
    assert s is not None, "worker started without the recording"
    return evaluate(policy, s.records, s.traffic, s.flap_window, s.charted, s.blocks, s.decoded, s.compact)


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
        self.shared = _Shared(records, traffic, flap_window, tuple(charted), blocks, decoded, compact)
        self.jobs = max(1, min(jobs, len(self.policies)))
        self._pool: ProcessPoolExecutor | None = None
        self._futures: dict[Future[Evaluation], int] = {}
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
                for i, policy in enumerate(self.policies):
                    self._futures[self._pool.submit(_evaluate_shared, policy)] = i  # forks on first submit
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
            for i, policy in enumerate(self.policies):
                ev = evaluate(policy, s.records, s.traffic, s.flap_window, s.charted, s.blocks, s.decoded, s.compact)
                self.results[i] = ev
                yield i, ev
            return
        for fut in as_completed(self._futures):
            i = self._futures[fut]
            ev = fut.result()
            self.results[i] = ev
            yield i, ev

    def ordered(self) -> list[Evaluation]:
        """All results in grid order (after `completed()` has been exhausted)."""
        missing = [i for i, r in enumerate(self.results) if r is None]
        if missing:
            raise RuntimeError(f"policies {missing} were not evaluated")
        return [r for r in self.results if r is not None]
