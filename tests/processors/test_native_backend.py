"""FP2 (docs/engine-fast-path.md): the native success path gives what the pure-Python one gives.

The streams are the engine's property-test streams (every config preset, duplicates, late records, pre-call
checks, non-final attempts, quota headers), thickened with runs of plain successes and written as JSONL the way
files differ: other key orders and spacing, escapes, unknown fields, nulls, repeated keys, bad lines and blank
ones, exact re-sends, cut into blocks at random lines. Both backends run `coolant.replay.run.replay` on the same
blocks; cooldowns (with their trigger event ids), the summary and every deployment's state must be identical.
"""

from __future__ import annotations

import gc
import json
import os
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st
from test_properties import Case, _dense, cases

from coolant import native_backend, schemas
from coolant.io.sources import Block
from coolant.processors import Engine, Policy
from coolant.processors.state import PodCounters
from coolant.replay import run
from tests.support.hypothesis import examples
from tests.support.records import T0, outcome

if not native_backend.available() and os.environ.get("REQUIRE_NATIVE") == "1":  # scripts/test, where cargo is present
    raise RuntimeError("REQUIRE_NATIVE=1 but coolant_native is not built (see .local/install.log)")
pytestmark = pytest.mark.skipif(not native_backend.available(), reason="coolant_native is not built (no cargo)")

NATIVE = native_backend.NativeBackend
SETTINGS = settings(max_examples=examples(250), deadline=None, suppress_health_check=[HealthCheck.too_slow])

BAD_LINES = [
    b"not json",
    b'{"schema":"coolant.outcome/1","event_id":"x"}',  # missing fields
    b'{"schema":"coolant.outcome/1","event_id":"m","ts":1700000000000,"deployment_id":"d0",'
    b'"model_group":"g1","ok":true}',  # ts in milliseconds (B2)
    b'{"schema":"coolant.outcome/1","event_id":"","ts":1.0,"deployment_id":"d0","model_group":"g1","ok":true}',
    b'{"schema":"coolant.outcome/2","event_id":"v","ts":1.0,"deployment_id":"d1","model_group":"g1","ok":true}',
    b'{"schema":"coolant.outcome/1","event_id":"n","ts":1.0,"deployment_id":"d0","model_group":"g1","ok":1}',
    b'{"schema":"coolant.outcome/1","event_id":"z","ts":01,"deployment_id":"d0","model_group":"g1","ok":true}',
    b"[1, 2]",
    b"\xff\xfe{}",
]


def _variant(rec: schemas.Outcome | schemas.Health, rnd: random.Random) -> bytes:
    """One record as some writer might put it on a line (all decode to the same record)."""
    d = schemas.to_dict(rec)
    k = rnd.randrange(10)
    if k < 5:
        return schemas.encode(rec)
    items = list(d.items())
    rnd.shuffle(items)
    d = dict(items)
    if k == 5:
        d["extra"] = rnd.choice([1, "x", None, {"nested": [1, {"a": 2}]}, [1, 2]])
    elif k == 6 and type(rec) is schemas.Outcome:
        d.setdefault("final", None)
        d.setdefault("gateway", None)
        d.setdefault("latency_ms", rnd.choice([None, 12, 0.5, -3e14]))
    elif k == 7:
        return json.dumps(d).replace('"event_id": "e', '"event_id": "\\u0065', 1).encode()  # the same id
    elif k == 8:
        return (" " + json.dumps(d, separators=(" , ", " : ")) + " \r").encode()
    return json.dumps(d).encode()


def _lines(records: list[schemas.Outcome | schemas.Health], rnd: random.Random) -> list[bytes]:
    out: list[bytes] = []
    for rec in records:
        line = _variant(rec, rnd)
        out.append(line)
        r = rnd.random()
        if r < 0.05:
            out.append(line)  # an exact re-send
        elif r < 0.08:
            out.append(rnd.choice(BAD_LINES))
        elif r < 0.10:
            out.append(rnd.choice([b"", b"   ", b"\t"]))
        elif r < 0.11 and line.startswith(b'{"schema"'):
            out.append(line[:-1] + b',"deployment_id":"d1"}')  # a repeated key
        elif r < 0.12 and line.startswith(b'{"schema"'):  # a repeated unknown name, a repeated null (B11)
            again = rnd.choice([b',"x":1,"x":2}', b',"x":1,"y":2,"x":null}', b',"source":null,"source":null}'])
            out.append(line[:-1] + again)
    return out


def _blocks(lines: list[bytes], rnd: random.Random) -> list[Block]:
    blocks: list[Block] = []
    i, first = 0, 1
    while i < len(lines):
        n = rnd.choice([1, 5, 40, 200, 1000])
        chunk = lines[i : i + n]
        data = b"\n".join(chunk) + (b"\n" if rnd.random() < 0.9 or i + n < len(lines) else b"")
        blocks.append(("s.jsonl", first, data))
        first += len(chunk)
        i += n
    return blocks


def _outcome(policy: Policy, blocks: list[Block], backend: str) -> dict[str, Any]:
    """Cooldowns, summary and end states of one replay of `blocks` on `backend`."""
    cooldowns: list[bytes] = []
    engines: list[Any] = []

    def keep(p: Policy, b: str = "auto") -> native_backend.Backend:
        path = native_backend.for_policy(p, b)
        engines.append(path.engine)
        return path

    original, run.for_policy = run.for_policy, keep
    try:
        summary = run.replay(blocks, policy, lambda cd: cooldowns.append(schemas.encode(cd)), backend=backend)
    finally:
        run.for_policy = original
    (engine,) = engines
    late_after = policy.options.late_after
    states = {
        dep: [_spent_f_cleared(st.request.to_dict(), late_after), st.health.to_dict(), dict(st.health.seen),
              st.counted]
        for dep, st in engine.states.items()
    }
    return {"cooldowns": cooldowns, "summary": summary.to_dict(), "states": states, "ejections": engine.ejections}


def _thick(records: list[schemas.Outcome | schemas.Health], rnd: random.Random) -> list[Any]:
    """Runs of the plainest successes (no attempt, final or source; seconds apart) after many outcomes, some of
    them re-sends of an earlier id or far behind (late): what the native side owns, and its edges."""
    out: list[Any] = []
    ids: list[str] = []
    for i, rec in enumerate(records):
        out.append(rec)
        if type(rec) is not schemas.Outcome or rnd.random() < 0.3:
            continue
        for j in range(rnd.randrange(1, 12)):
            r = rnd.random()
            ts = rec.ts + rnd.choice([0, 0.1, 0.5, 1, 2]) * j
            event_id = f"p{i}.{j}"
            if r < 0.05 and ids:
                event_id = rnd.choice(ids)  # a re-send
            elif r < 0.08:
                ts -= rnd.choice([179.5, 181, 400])  # at and past late_after
            ids.append(event_id)
            out.append(schemas.Outcome(event_id, ts, rec.deployment_id, rec.model_group, True,
                                       gateway=rnd.choice([rec.gateway, None, "gw-z"])))
    return out


def _spent_f_cleared(state: dict[str, Any], late_after: float) -> dict[str, Any]:
    """A state with each publisher's spent failure counter as a new one's (anchor None, count 0). L3 drops a spent
    publisher pair; when its success half is re-anchored before the engine's L3 runs (the native side defers
    that L3 to the next pull, FP2), the pair stays with its failure half spent: never read again (the next
    failure re-anchors it, LC2), so it is the same counter."""
    hw = state["hw"]
    if hw is None:
        return state
    horizon = hw - late_after
    pods = {}
    for gw, (sa, sc, fa, fc) in state["litellm"].items():
        pods[gw] = [sa, sc, None, 0] if fa is not None and fa + 60 <= horizon else [sa, sc, fa, fc]
    return {**state, "litellm": pods}


def _stream(case: Case, rnd: random.Random) -> list[Block]:
    return _blocks(_lines(_thick(_dense(case, rnd), rnd), rnd), rnd)


@SETTINGS
@given(cases(), st.integers(0, 2**32))
def test_native_and_python_backends_agree(case: Case, seed: int) -> None:
    policy = case.policy
    blocks = _stream(case, random.Random(seed))
    python = _outcome(policy, blocks, "python")
    native = _outcome(policy, blocks, "native")
    assert native["cooldowns"] == python["cooldowns"]
    assert native["summary"] == python["summary"]
    assert native["states"] == python["states"]
    assert native["ejections"] == python["ejections"]


class _Forgetful:
    """The native side with a no-op `pull`."""

    def __init__(self, native: Any) -> None:
        self._native = native

    def pull(self, deployment_id: str, st: Any) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._native, name)


class _Trusting(_Forgetful):
    """The native side saying of every line it hands back that it names nothing twice."""

    def scan(self, data: bytes, pos: int, line: int) -> tuple[int, int, int, bytes | None, bool]:
        pos, line, lineno, raw, _ = self._native.scan(data, pos, line)
        return pos, line, lineno, raw, raw is not None

    def pull(self, deployment_id: str, st: Any) -> Any:
        return self._native.pull(deployment_id, st)


def _names_distinct(engine: Any) -> native_backend.NativeBackend:
    """A mutant: B11 skipped on every handed line."""
    path = NATIVE(engine)
    path.native = _Trusting(path.native)
    return path


def _no_pull(engine: Any) -> native_backend.NativeBackend:
    """A mutant: the engine decides a handed record without the deployment's tallies written back."""
    path = NATIVE(engine)
    path.native = _Forgetful(path.native)
    return path


MUTANTS: dict[str, tuple[Any, tuple[str, ...]]] = {  # the mutant, and the presets it shows on
    "no pull": (_no_pull, ()),
    "late_after ignored": (lambda engine: _late_after(engine, 1e12), ()),
    "sliding buckets as windows": (lambda engine: _width(engine, 60), ("sliding",)),
}


def _late_after(engine: Any, late_after: float) -> native_backend.NativeBackend:
    path = NATIVE(engine)
    o = engine.policy.options
    import coolant_native

    path.native = coolant_native.FastPath(late_after, o.slot_width, o.litellm_counters, 60.0, PodCounters)
    return path


def _width(engine: Any, width: int) -> native_backend.NativeBackend:
    path = NATIVE(engine)
    o = engine.policy.options
    import coolant_native

    path.native = coolant_native.FastPath(o.late_after, width, o.litellm_counters, 60.0, PodCounters)
    return path


@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_a_mutant_native_path_is_caught(mutant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison above can fail: each mutant of the native side gives a stream on which it differs."""
    make, presets = MUTANTS[mutant]

    def differs(example: tuple[Case, int]) -> bool:
        case, seed = example
        policy = case.policy
        blocks = _stream(case, random.Random(seed))
        python = _outcome(policy, blocks, "python")
        monkeypatch.setattr(native_backend, "NativeBackend", make)
        try:
            native = _outcome(policy, blocks, "native")
        finally:
            monkeypatch.setattr(native_backend, "NativeBackend", NATIVE)
        return native != python

    find(
        st.tuples(cases(presets=presets), st.integers(0, 2**32)),
        differs,
        # generate only: any differing stream proves the mutant is caught, and shrinking one to the smallest took
        # from seconds to past the test's timeout (every step replays on both backends)
        settings=settings(max_examples=500, deadline=None, database=None, phases=[Phase.generate],
                          suppress_health_check=list(HealthCheck)),
    )


def test_the_collector_is_paused_for_a_run_and_on_again_after_it_even_when_the_run_fails() -> None:
    assert gc.isenabled()
    with pytest.raises(ValueError), native_backend.collector_paused():
        assert not gc.isenabled()
        raise ValueError("a run that fails")
    assert gc.isenabled()


def test_the_native_path_refuses_an_engine_that_holds_states() -> None:
    """The native side meets a deployment it has no entry for as new: a state the engine holds would be lost."""
    engine = Engine(Policy())
    engine.feed(schemas.decode(outcome("e1", T0, "dep-01", True)))
    with pytest.raises(AssertionError, match="no deployment states"):
        native_backend.NativeBackend(engine)


def test_a_deployment_on_hold_is_the_engines_until_the_hold_ends() -> None:
    """Recovery that probes (RC1-RC5): a success of a deployment on hold closes the half-open state, so the native
    side must not tally it. A cooled deployment, healthy probes that hold and release it, then successes and a
    failure: both backends leave the same states and say the same."""
    from tests.processors.test_recovery import failure, policy, probe, success

    pol = policy({"release_after": 2})
    records: list[Any] = [failure(1, 0), probe(1, 1, True), probe(2, 2, True)]
    records += [success(n, 2.5 + n * 0.1) for n in range(2, 12)]
    records += [failure(2, 4), success(20, 4.5), probe(3, 5, True)]
    records += [success(n, 6 + n * 0.1, dep) for n in range(30, 40) for dep in ("d0", "d1")]
    blocks = [("s.jsonl", 1, b"\n".join(schemas.encode(r) for r in records) + b"\n")]
    python = _outcome(pol, blocks, "python")
    native = _outcome(pol, blocks, "native")
    assert python["summary"]["dispositions"].get("counted")  # the native side had successes to take
    assert native == python


def test_a_line_that_names_a_field_twice_is_refused_on_both_backends(monkeypatch: pytest.MonkeyPatch) -> None:
    """B11 on the lines the native side hands back: it says which name nothing twice, and Python skips its screen
    only for those. Repeats of an unknown name, of a null and of a known field, among plain successes; the mutant
    that calls every handed line distinct lets them through."""
    lines = [outcome(f"e{n}", T0 + n, "dep-01", True) for n in range(6)]
    lines[1] = lines[1][:-1] + b',"x":1,"x":2}'
    lines[3] = lines[3][:-1] + b',"x":1,"y":{"a":1,"a":2}}'
    lines[4] = lines[4][:-1] + b',"retry_after":"1","retry_after":null}'
    blocks: list[Block] = [("s.jsonl", 1, b"\n".join(lines) + b"\n")]
    python = _outcome(Policy(), blocks, "python")
    assert python["summary"]["invalid"] == 3
    assert _outcome(Policy(), blocks, "native") == python
    monkeypatch.setattr(native_backend, "NativeBackend", _names_distinct)
    assert _outcome(Policy(), blocks, "native")["summary"]["invalid"] < 3


@pytest.mark.parametrize("shape", ["split", "two_on_a_line", "two_with_space", "split_and_two"])
def test_a_line_that_does_not_hold_exactly_one_record_is_invalid_on_both_backends(shape: str) -> None:
    """B9: one record per line. msgspec's block decoder splits by JSON value, so without the line check the pure
    backend took a record over two lines, or two on one line, that the native reader and `decode` refuse;
    `split_and_two` keeps the block's record count equal to its line count."""
    lines = [outcome(f"e{n}", T0 + n, "dep-01", n % 3 != 0) for n in range(8)]
    if shape == "split":
        cut = lines[2].index(b",")
        lines[2:3] = [lines[2][:cut + 1], lines[2][cut + 1:]]
    elif shape in ("two_on_a_line", "two_with_space"):
        lines[2:4] = [lines[2] + (b" " if shape == "two_with_space" else b"") + lines[3]]
    else:
        cut = lines[5].index(b",")
        lines[5:6] = [lines[5][:cut + 1], lines[5][cut + 1:]]
        lines[2:4] = [lines[2] + lines[3]]
    blocks: list[Block] = [("s.jsonl", 1, b"\n".join(lines) + b"\n")]
    python = _outcome(Policy(), blocks, "python")
    assert python["summary"]["invalid"] == {"split": 2, "split_and_two": 3}.get(shape, 1)
    if native_backend.available():
        assert _outcome(Policy(), blocks, "native") == python
