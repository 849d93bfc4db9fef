"""The replay backends (FP2, docs/engine-fast-path.md): blocks of raw lines into one policy's `Engine`.

One API, two backends, chosen with `coolant replay --backend` and `coolant tune --backend`. `PythonBackend`
decodes every line (msgspec) and feeds it to `Engine.feed_all`: the engine decides every record, its plain
successes by FP1. `NativeBackend` (the `coolant_native` extension, built by `pip install` where a Rust toolchain
is present) owns only the plain successes of deployments with nothing pending:
it reads them from the raw bytes, checks L1/L2 (seen ids as 64-bit hashes) and tallies the O5 window, the
publisher's D7 success counter and `DeploymentState.counted`, creating no record. Every other line goes to the
same engine, in file order, after the deployment's tallies were written back into its `PathState` (`pull`):
the engine still decides every failure, probe and odd record. A deployment on hold (recovery that probes, RC5)
stays the engine's until the hold ends. Replay and tuning use `for_policy`.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol, cast

from coolant.errors import CoolantError
from coolant.io.sources import Block, decode_records
from coolant.processors import Engine, Policy, Step, windows
from coolant.processors.engine import COUNTED
from coolant.processors.multi import MultiEngine
from coolant.processors.policy import COUNTER_TTL
from coolant.processors.state import DeploymentState, PodCounters
from coolant.schemas import InvalidRecord, Outcome, Record, decode

_NATIVE: list[Any] = []
"""The `coolant_native` module (or None when it is not built), once looked up."""
NATIVE_API = 2
"""The `coolant_native.API` this module drives (`scan`'s answer, `push`'s arguments): an extension built from
another source (a stale build left in place) is not used."""


def _native_module() -> Any:
    """Imported on first use, so processes that never replay (the worker, the probe) never load it."""
    if not _NATIVE:
        try:
            import coolant_native
        except ImportError:  # not built (no Rust toolchain at install): the pure-Python backend
            coolant_native = None
        if coolant_native is not None and getattr(coolant_native, "API", None) != NATIVE_API:
            coolant_native = None
        _NATIVE.append(coolant_native)
    return _NATIVE[0]


__all__ = ["BACKENDS", "Backend", "BackendError", "NativeBackend", "PythonBackend", "available", "for_policy"]

BACKENDS = ("auto", "native", "python")
"""What `--backend` takes: auto (native when it is built and the policy allows it), native, python."""
NOT_BUILT = (
    "the native backend (coolant_native) is not built, or was built from another version: reinstall coolant "
    "where a Rust toolchain (cargo) is present, e.g. `pip install .` after https://rustup.rs"
)
BACKEND_HELP = (
    "Which loop reads the records: native (coolant_native, Rust: plain successes tallied straight from the raw "
    "lines, every other record decided by the Python engine), python (every line decoded and decided in Python), "
    "or auto (native when it is built and the policy has no quota rule). The output is the same byte for byte; "
    "native is several times faster."
)


class BackendError(CoolantError):
    """An unknown backend, or `native` asked for where it is not built."""


class Backend(Protocol):
    """What replay and tuning drive: `run` each block in file order, then `finish` once."""

    engine: Engine
    name: str
    """"native" or "python": what the replay and tune summaries print."""
    note: str
    """Why auto chose python, when it did ("" otherwise)."""

    @property
    def records(self) -> int:
        """Valid records so far (tallied or decoded)."""
        ...

    def run(self, block: Block, on_invalid: Callable[[str], None]) -> Iterator[tuple[Record, Step]]:
        """`Engine.feed_all` over the block's valid records (invalid lines go to `on_invalid` as
        "file:line: problem"), yielding (record, step) for every record whose step is not a plain count."""
        ...

    def finish(self) -> None:
        """Write every remaining tally into the engine's states (`DeploymentState.counted` and the rest)."""
        ...


class PythonBackend:
    """Every line decoded and decided by the engine (FP1 counts its plain successes)."""

    name = "python"

    def __init__(self, engine: Engine, note: str = "") -> None:
        self.engine = engine
        self.note = note
        self.decoded = 0

    @property
    def records(self) -> int:
        return self.decoded

    def run(self, block: Block, on_invalid: Callable[[str], None]) -> Iterator[tuple[Record, Step]]:
        decoded = decode_records(block, on_invalid)
        self.decoded += len(decoded)
        return self.engine.feed_all(decoded)

    def finish(self) -> None:
        pass


class _Native(Protocol):
    """`coolant_native.FastPath` (native/src/lib.rs)."""

    tallied: int

    def scan(self, data: bytes, pos: int, line: int) -> tuple[int, int, int, bytes | None, bool]: ...
    def pull(self, deployment_id: str, st: DeploymentState) -> float | None: ...
    def push(self, deployment_id: str, st: DeploymentState, gateway: str | None = None) -> bool: ...
    def owned(self) -> int: ...
    def is_new(self, deployment_id: str) -> bool: ...
    def new_ids(self) -> list[str]: ...
    def take_met(self) -> list[bytes]: ...
    def adopt(self, compact: Any) -> None: ...
    def scan_compact(self, compact: Any, pos: int) -> tuple[int, int, int, bytes | None, bool]: ...


_Handed = tuple[str, int, int, bytes, bool, Sequence[Record | None] | None]
"""A line the native scan handed back: (source, first line of its block, its number in the block, its bytes, whether
it names nothing twice, the block's records when decoded already)."""


class NativeBackend:
    """Plain successes tallied natively; the rest decoded and decided by the engine (see the module docs)."""

    name = "native"
    note = ""

    def __init__(self, engine: Engine) -> None:
        module = _native_module()
        assert module is not None, "coolant_native is not built"
        # the native side takes a deployment it has no entry for as new: a state the engine holds already
        # would be met again from a fresh one (its hw, windows and seen ids lost)
        assert not engine.states, "the native path starts from an engine with no deployment states"
        o = engine.policy.options
        self.engine = engine
        self.native = cast(
            _Native, module.FastPath(o.late_after, o.slot_width, o.litellm_counters, COUNTER_TTL, PodCounters)
        )
        self.decoded = 0

    @property
    def records(self) -> int:
        return self.decoded + self.native.tallied

    def run(
        self, block: Block, on_invalid: Callable[[str], None], decoded: Sequence[Record | None] | None = None
    ) -> Iterator[tuple[Record, Step]]:
        """`decoded`: the block's records already decoded, one per line (`one_per_line`): a line the scan hands
        back is looked up there instead of decoded again (tuning decodes a recording once for every policy)."""
        yield from self.engine.feed_all(self._handed(block, on_invalid, decoded))
        for raw in self.native.take_met():  # the first record of a deployment the native side met: the engine
            yield decode(raw, True), COUNTED  # yields its step (COUNTED) rather than adding it to `counted` (FP1)

    def _handed(
        self, block: Block, on_invalid: Callable[[str], None], decoded: Sequence[Record | None] | None
    ) -> Iterator[Record]:
        return self._records(self._scanned(block, decoded), on_invalid)

    def _scanned(self, block: Block, decoded: Sequence[Record | None] | None) -> Iterator[_Handed]:
        """The block's lines the native side did not tally, in order."""
        source, first, data = block
        scan = self.native.scan
        pos, line, size = 0, 0, len(data)
        while pos < size:
            pos, line, lineno, raw, names_distinct = scan(data, pos, line)
            if raw is None:
                break
            yield source, first, lineno, raw, names_distinct, decoded

    def _compacted(
        self, compact: Any, blocks: Sequence[Block], decoded: Sequence[Sequence[Record | None] | None]
    ) -> Iterator[_Handed]:
        """`_scanned` over every block, read once as `compact`."""
        scan = self.native.scan_compact
        pos = 0
        while True:
            pos, b, lineno, raw, names_distinct = scan(compact, pos)
            if raw is None:
                break
            source, first, _ = blocks[b]
            yield source, first, lineno, raw, names_distinct, decoded[b]

    def _records(self, lines: Iterator[_Handed], on_invalid: Callable[[str], None]) -> Iterator[Record]:
        """The records of the lines the native side did not tally, decoded (or looked up in what was decoded
        already), in order: the deployment is pulled before the engine sees each and pushed (taken back when
        nothing is pending) after. A deployment the native side met first gets its state here, as the engine
        would have at its first record."""
        native = self.native
        pull, push, is_new = native.pull, native.push, native.is_new
        engine = self.engine
        states = engine.states
        for source, first, lineno, raw, names_distinct, decoded in lines:
            rec = None if decoded is None else decoded[lineno]
            if rec is None:  # not decoded already (a plain success where only the others were)
                try:
                    rec = decode(raw, names_distinct)
                except InvalidRecord as exc:
                    on_invalid(f"{source}:{first + lineno}: {exc}")
                    continue
            self.decoded += 1
            dep = rec.deployment_id
            st = states.get(dep)
            if st is None and is_new(dep):
                st = engine.state(dep)
            if st is not None and (owed := pull(dep, st)) is not None:
                self._discard(st, owed)
            yield rec
            st = states.get(dep)
            if st is not None and st.request.hold is None:  # RC5: a success on hold is the engine's to judge
                push(dep, st, (rec.gateway or "") if type(rec) is Outcome else None)

    def run_compact(
        self,
        compact: Any,
        blocks: Sequence[Block],
        decoded: Sequence[Sequence[Record | None] | None],
        on_invalid: Callable[[str], None],
    ) -> Iterator[tuple[Record, Step]]:
        """`run_all` over `blocks` read once already as `compact` (`compact_of` the same blocks) for the runs of
        many policies; `decoded` as `run`'s, per block. The same steps, except that the first records of the
        deployments the native side met (COUNTED steps) come last rather than after their block's."""
        self.native.adopt(compact)
        yield from self.engine.feed_all(self._records(self._compacted(compact, blocks, decoded), on_invalid))
        for raw in self.native.take_met():
            yield decode(raw, True), COUNTED
        self.finish()

    def _discard(self, st: DeploymentState, hw: float) -> None:
        """The rest of an L3 the native side ran at high-water mark `hw` on the seen ids only: the engine's own
        `windows.discard` on the windows and counters, as of that mark (FP2)."""
        o = self.engine.policy.options
        windows.discard(st.request, o.late_after, o.slot_width, hw)

    def finish(self) -> None:
        pull = self.native.pull
        for dep in self.native.new_ids():  # met only by the native side: their states start here
            self.engine.state(dep)
        for dep, st in self.engine.states.items():
            if (owed := pull(dep, st)) is not None:
                self._discard(st, owed)


def run_multi(
    multi: MultiEngine,
    compact: Any,
    blocks: Sequence[Block],
    decoded: Sequence[Sequence[Record | None] | None],
    on_invalid: Callable[[str], None],
) -> Iterator[tuple[Record, tuple[Step, ...]]]:
    """`NativeBackend.run_compact` for the policies of a `MultiEngine`: one native side tallies the plain successes
    of the deployments it holds into the shared state (`MultiEngine.states`), which it takes only while no policy
    has anything pending on the deployment (`probation` of the shared state is any policy's); every other line is
    `MultiEngine.feed`'s, in file order, pulled before and pushed after as `NativeBackend` does. Yields (record,
    each policy's step) for the records `MultiEngine.feed_all` yields; the first records of the deployments the
    native side met only count, for every policy, and are not yielded."""
    module = _native_module()
    assert module is not None, "coolant_native is not built"
    assert not multi.states, "the native path starts from an engine with no deployment states"
    o = multi.options
    native = cast(_Native, module.FastPath(o.late_after, o.slot_width, o.litellm_counters, COUNTER_TTL, PodCounters))
    native.adopt(compact)
    scan, pull, push, is_new = native.scan_compact, native.pull, native.push, native.is_new
    states, feed, state, discard, counted = multi.states, multi.feed, multi.state, multi.discard, multi.counted
    pos = 0
    while True:
        pos, b, lineno, raw, names_distinct = scan(compact, pos)
        if raw is None:
            break
        recs = decoded[b]
        rec = None if recs is None else recs[lineno]
        if rec is None:
            try:
                rec = decode(raw, names_distinct)
            except InvalidRecord as exc:
                source, first, _ = blocks[b]
                on_invalid(f"{source}:{first + lineno}: {exc}")
                continue
        dep = rec.deployment_id
        st = states.get(dep)
        if st is None and is_new(dep):
            st = state(dep)
        if st is not None and (owed := pull(dep, st)) is not None:
            discard(st, dep, owed)
        steps = feed(rec)
        if steps is not counted:
            yield rec, steps
        st = states.get(dep)
        if st is not None:  # no hold: MultiEngine serves no policy with recovery that probes
            push(dep, st, (rec.gateway or "") if type(rec) is Outcome else None)
    native.take_met()  # first records of deployments met natively: counted, no cooldown (as `run_compact`'s)
    for dep in native.new_ids():
        state(dep)
    for dep, st in states.items():
        if (owed := pull(dep, st)) is not None:
            discard(st, dep, owed)


def one_per_line(data: bytes, records: int) -> bool:
    """Whether a block of `records` valid records holds exactly one per line (no blank or invalid line), so that
    the record of the scan's line n is the n-th: what `NativeBackend.run` needs of its `decoded`."""
    lines = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    return lines == records


def compact_of(blocks: Sequence[Block]) -> Any | None:
    """`blocks` read once by the native reader (`coolant_native.Compact`) for `NativeBackend.run_compact`, or None
    where the native backend is not built (or was built before it had one)."""
    module = _native_module()
    kind = getattr(module, "Compact", None)
    return None if kind is None else kind([data for _, _, data in blocks])


def available() -> bool:
    """The native backend is built and importable."""
    return _native_module() is not None


def resolve(backend: str) -> str:
    """What `--backend` runs before any policy is looked at: "native" when asked for or (auto) when built,
    else "python"; a `BackendError` for an unknown name or for native where it is not built."""
    if backend not in BACKENDS:
        raise BackendError(f"--backend {backend}: expected one of {', '.join(BACKENDS)}")
    if backend == "python":
        return "python"
    if _native_module() is None:
        if backend == "native":
            raise BackendError(NOT_BUILT)
        return "python"
    return "native"


NATIVE_NOT_BUILT = "coolant_native is not built"
QUOTA_RULES = "quota rules read every success"
OUTLIER_PROFILE = "the outlier profile reads every success"


def on_python(policy: Policy) -> str | None:
    """Why a policy runs on python even where native was chosen, or None: X6 reads a success's announced budget,
    and under the outlier profile a success ends a streak and counts in the recent buckets (X10.2, X11.1), so
    every success is the engine's."""
    o = policy.options
    if o.quota is not None:
        return QUOTA_RULES
    if o.outlier is not None:
        return OUTLIER_PROFILE
    return None


def for_policy(policy: Policy, backend: str = "auto") -> Backend:
    """A fresh engine for `policy` behind the backend `resolve` picks, except for a policy `on_python` names."""
    engine = Engine(policy)
    if resolve(backend) == "python":
        return PythonBackend(engine, NATIVE_NOT_BUILT if backend == "auto" else "")
    why = on_python(policy)
    if why is not None:
        return PythonBackend(engine, why)
    return NativeBackend(engine)


def run_all(path: Backend, blocks: Iterable[Block], on_invalid: Callable[[str], None]) -> Iterator[
    tuple[Record, Step]
]:
    """Every block through `path`, then `finish`: the steps of a whole recording (consume it inside
    `collector_paused`)."""
    for block in blocks:
        yield from path.run(block, on_invalid)
    path.finish()


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic collector off for a whole run (replay, a tuning policy): the states grow by thousands of
    objects (deployments, windows, publisher counters) that each full collection walks again, about 0.1 s a run
    at 10,000 deployments, and none of it is cyclic garbage (records, steps and cooldowns are freed by reference
    count). A context around the consuming loop, not inside the generator: a generator left suspended (an
    exception kept with its traceback) would keep the collector off."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()

