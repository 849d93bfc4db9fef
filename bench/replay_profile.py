"""Where replay's time goes: the share of read, decode, the engine's fast and general paths, summary and output.

    .venv/bin/python bench/replay_profile.py [--data bench/out/fleet.jsonl] [--config bench/out/fleet.yaml]
                                             [--backend python|native]

Runs on bench/replay_bench.py's stream (generate it with that script first) and prints CPU seconds per stage,
each as a share of the whole replay and as a multiple of the parse floor (read + orjson.loads):
  read      reading the file in blocks (`read_blocks`);
  decode    decoding and validating them (`decode_records`: msgspec plus the input bounds B1-B7);
  fast      the engine's fast path for plain successes (FP1): dedup, window, D7 counter, tally;
  general   the engine's general path for every other record (`Engine.feed`), split by cProfile into the
            gate (G rules), the decision (M rules, V counters), emit (backoff, re-cool, the cooldown record),
            the L3 discard and the rest of `step_outcome` (late, dedup, window and counter bookkeeping);
  summary   the replay loop's own bookkeeping (dispositions, per-deployment totals);
  output    encoding each cooldown as JSON and writing it (to /dev/null).
Stages are timed separately (so their sum is a little above a full run) with `time.process_time`, best of 3.

With --backend native (coolant.native_backend's native success path, FP2) the stages of one replay are instead:
  read      as above;
  native    the native scan: reading every line, tallying the plain successes it owns (L1, L2, O5, LC2);
  decode    msgspec decoding of the lines it hands to the engine;
  sync      writing a deployment's tallies into its state before the engine's step and taking it back after;
  engine    the engine's steps for the handed records, the replay summary and the end-of-run tallies (the rest).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from pathlib import Path
from typing import Any

import orjson

from coolant import native_backend
from coolant.config.loader import load_config
from coolant.io.sources import decode_records, read_blocks, read_lines
from coolant.processors import Engine, Policy
from coolant.replay import run as run_module
from coolant.replay.run import ReplaySummary, replay
from coolant.schemas import Cooldown, encode

OUT = Path(__file__).parent / "out"
CLOCK = time.process_time
GENERAL = {  # cProfile function name -> stage of the general path
    "gate": "gate",
    "decide": "decide",
    "_emit": "emit",
    "_quota_step": "emit",
    "discard": "discard",
}


def best(fn: object, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        t = CLOCK()
        fn()  # type: ignore[operator]
        times.append(CLOCK() - t)
    return min(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=OUT / "fleet.jsonl")
    p.add_argument("--config", type=Path, default=OUT / "fleet.yaml")
    p.add_argument("--backend", choices=("python", "native"), default="python")
    a = p.parse_args()
    path = [str(a.data)]
    policy = load_config(a.config).policy
    if a.backend == "native":
        native_profile(a.data, policy)
        return

    def floor() -> None:
        _floor(path)

    def read() -> None:
        _read(path)

    def decode() -> None:
        summary = ReplaySummary()
        for block in read_blocks(path):
            decode_records(block, summary.add_invalid)

    blocks = list(read_blocks(path))
    summary = ReplaySummary()
    decoded = [decode_records(b, summary.add_invalid) for b in blocks]

    def engine() -> None:
        e = Engine(policy)
        for recs in decoded:
            for _ in e.feed_all(recs):
                pass

    def general_only() -> float:
        """CPU time inside `feed` for the records the fast path hands to it."""
        e = Engine(policy)
        inner = e.feed
        spent = 0.0

        def timed(rec: object) -> object:
            nonlocal spent
            t = CLOCK()
            step = inner(rec)  # type: ignore[arg-type]
            spent += CLOCK() - t
            return step

        e.feed = timed  # type: ignore[method-assign, assignment]
        for recs in decoded:
            for _ in e.feed_all(recs):
                pass
        return spent

    def full() -> None:
        out: list[Cooldown] = []
        replay(read_blocks(path), policy, out.append, backend="python")

    cooldowns: list[Cooldown] = []
    replay(iter(blocks), policy, cooldowns.append, backend="python")

    def output() -> None:
        with open("/dev/null", "wb") as sink:
            for cd in cooldowns:
                sink.write(encode(cd) + b"\n")

    t_floor = best(floor)
    t_read = best(read)
    t_decode = best(decode) - t_read
    t_engine = best(engine)
    t_general = min(general_only() for _ in range(3))
    t_fast = t_engine - t_general
    t_summary = max(0.0, best(full) - t_read - t_decode - t_engine)  # replay() reads and decodes itself
    t_output = best(output)
    total = t_read + t_decode + t_engine + t_summary + t_output

    prof = cProfile.Profile()
    e = Engine(policy)
    inner = e.feed

    def profiled(rec: object) -> object:
        prof.enable()
        try:
            return inner(rec)  # type: ignore[arg-type]
        finally:
            prof.disable()

    e.feed = profiled  # type: ignore[method-assign, assignment]
    for recs in decoded:
        for _ in e.feed_all(recs):
            pass
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    cum: dict[str, float] = {}
    whole = 0.0
    for (_, _, name), (_, _, _, ct, _) in stats.items():
        if name in GENERAL:
            cum[GENERAL[name]] = cum.get(GENERAL[name], 0.0) + ct
        if name == "feed":
            whole += ct
    n = sum(len(r) for r in decoded)
    fast = sum(s.counted for s in e.states.values())
    print(f"{a.data}: {n:,} records, {fast:,} on the fast path ({fast / n:.1%}), {len(cooldowns):,} cooldowns")
    print(f"{'stage':<24} {'CPU s':>7} {'share':>7} {'× floor':>8}")
    rows = [("read", t_read), ("decode", t_decode), ("engine, fast path", t_fast), ("engine, general path", t_general)]
    for name, t in rows:
        print(f"{name:<24} {t:>7.2f} {t / total:>7.1%} {t / t_floor:>8.2f}")
    if whole:
        rest = 1.0 - sum(cum.values()) / whole
        for stage in ("gate", "decide", "emit", "discard"):
            share = cum.get(stage, 0.0) / whole
            print(f"{'  ' + stage:<24} {t_general * share:>7.2f} {t_general * share / total:>7.1%}")
        print(f"{'  late/dedup/windows':<24} {t_general * rest:>7.2f} {t_general * rest / total:>7.1%}")
    for name, t in (("summary", t_summary), ("output (JSON, /dev/null)", t_output)):
        print(f"{name:<24} {t:>7.2f} {t / total:>7.1%} {t / t_floor:>8.2f}")
    print(f"{'total':<24} {total:>7.2f} {1:>7.1%} {total / t_floor:>8.2f}")
    print(f"{'floor':<24} {t_floor:>7.2f}")


class _Timed:
    """The native side with its calls timed (CPU s per method); `decode` is timed through the module's name."""

    def __init__(self, native: Any, spent: dict[str, float]) -> None:
        self._native, self._spent = native, spent

    def __getattr__(self, name: str) -> Any:
        inner = getattr(self._native, name)
        if not callable(inner):
            return inner
        spent, stage = self._spent, "native" if name == "scan" else "sync"

        def timed(*args: Any) -> Any:
            t = CLOCK()
            try:
                return inner(*args)
            finally:
                spent[stage] += CLOCK() - t

        return timed


def _native_run(path: list[str], policy: Policy) -> tuple[float, dict[str, float], native_backend.NativeBackend, int]:
    """One native replay with its stages timed: (CPU s, stage -> CPU s, the path, cooldowns)."""
    spent = {"native": 0.0, "decode": 0.0, "sync": 0.0}
    made: list[native_backend.NativeBackend] = []
    real_decode, real_for_policy = getattr(native_backend, "decode"), getattr(run_module, "for_policy")  # noqa: B009

    def decode(raw: bytes) -> Any:
        t = CLOCK()
        try:
            return real_decode(raw)
        finally:
            spent["decode"] += CLOCK() - t

    def for_policy(p: Policy, b: str = "auto") -> Any:
        fp = native_backend.NativeBackend(Engine(p))
        fp.native = _Timed(fp.native, spent)
        made.append(fp)
        return fp

    setattr(native_backend, "decode", decode)  # noqa: B010
    setattr(run_module, "for_policy", for_policy)  # noqa: B010
    try:
        t = CLOCK()
        out: list[Cooldown] = []
        replay(read_blocks(path), policy, out.append)
        whole = CLOCK() - t
    finally:
        setattr(native_backend, "decode", real_decode)  # noqa: B010
        setattr(run_module, "for_policy", real_for_policy)  # noqa: B010
    return whole, spent, made[0], len(out)


def _floor(path: list[str]) -> None:
    """The parse floor: read the lines and `orjson.loads` each."""
    loads = orjson.loads
    for _, _, line in read_lines(path):
        loads(line)


def _read(path: list[str]) -> None:
    for _ in read_blocks(path):
        pass


def native_profile(data: Path, policy: Policy) -> None:
    path = [str(data)]
    t_floor, t_read = best(lambda: _floor(path)), best(lambda: _read(path))
    whole, spent, fp, cooldowns = min((_native_run(path, policy) for _ in range(3)), key=lambda r: r[0])
    engine = whole - t_read - sum(spent.values())
    n, tallied = fp.records, fp.native.tallied
    print(f"{data}: {n:,} records, {tallied:,} tallied natively ({tallied / n:.1%}), "
          f"{fp.decoded:,} handed to the engine, {cooldowns:,} cooldowns")
    print(f"{'stage':<24} {'CPU s':>7} {'share':>7} {'× floor':>8}")
    for name, t in (("read", t_read), ("native scan + tally", spent["native"]), ("decode (handed)", spent["decode"]),
                    ("sync (pull, push)", spent["sync"]), ("engine + summary", engine)):
        print(f"{name:<24} {t:>7.2f} {t / whole:>7.1%} {t / t_floor:>8.2f}")
    print(f"{'total':<24} {whole:>7.2f} {1:>7.1%} {whole / t_floor:>8.2f}")
    print(f"{'floor':<24} {t_floor:>7.2f}")

if __name__ == "__main__":
    main()
