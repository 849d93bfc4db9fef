"""`coolant worker` with diagnostic probes inside it, for `bench/live_bench.py` (never for production).

    python bench/worker_probes.py worker --config ... (the arguments of `coolant worker`)

Each probe is switched on by an environment variable naming the file it writes; creating `<file>.want` makes it
write a fresh report there (a file, not a signal: the worker's runtime, mode, takes SIGUSR2 for its debugger),
and `<file>.reset` makes it start counting again.

- COOLANT_BENCH_MEMORY: tracemalloc on (COOLANT_BENCH_MEMORY_FRAMES frames, default 1); the traced heap by package
  and its largest allocation sites, and the sites that grew most since the previous report (the first report is
  the baseline of the second, and so on): what still grows in a long run.
- COOLANT_BENCH_LOOP: every event-loop step timed (`Handle._run`), per thread, in wall and thread CPU time; the
  slowest steps by what ran; every garbage collection timed; and the hand-over delay from another thread into
  each loop (`call_soon_threadsafe` to the callback running, sampled every 5 ms), which is what a fetched batch
  waits for between Faust's consumer thread and the main loop. JSON.

- COOLANT_BENCH_CENSUS: no tracing; the RSS, glibc's heap (in use, free but kept, mmapped), pymalloc's blocks and
  the object count of each type with its change since the previous report (a pause of a few hundred ms each).

The first two cost time and memory: the worker's latency and RSS in such a run are not the figures.
"""

from __future__ import annotations

import asyncio
import asyncio.events
import collections
import gc
import json
import os
import runpy
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

BOUNDS_MS = (0.5, 1, 2, 5, 10, 20, 50, 100, float("inf"))
SLOW_MS = 5.0
"""Steps at least this long (wall) are named in the report."""


def _watch(path: str, report: Callable[[], str], reset: Callable[[], None] | None = None) -> None:
    """A daemon thread: `<path>.want` -> `report()` written to `path`; `<path>.reset` -> `reset()`."""

    def loop() -> None:
        while True:
            time.sleep(0.25)
            if reset is not None and os.path.exists(path + ".reset"):
                os.unlink(path + ".reset")
                reset()
            if os.path.exists(path + ".want"):
                os.unlink(path + ".want")
                text = report()
                with open(path + ".tmp", "w") as out:
                    out.write(text)
                os.replace(path + ".tmp", path)

    threading.Thread(target=loop, daemon=True, name="bench-probe").start()


def memory_probe(path: str) -> None:
    frames = int(os.environ.get("COOLANT_BENCH_MEMORY_FRAMES", "1"))
    tracemalloc.start(frames)
    previous: list[tracemalloc.Snapshot] = []

    def report() -> str:
        snap = tracemalloc.take_snapshot()
        by: collections.Counter[str] = collections.Counter()
        for stat in snap.statistics("filename"):
            name = stat.traceback[0].filename
            if "/coolant/" in name:
                key = "coolant/" + name.rsplit("/coolant/", 1)[1]
            elif "site-packages/" in name:
                key = name.split("site-packages/", 1)[1].split("/")[0]
            else:
                key = "stdlib/" + name.rsplit("/", 1)[-1]
            by[key.removesuffix(".py")] += stat.size
        lines = [f"traced {tracemalloc.get_traced_memory()[0] / 2**20:.1f} MB"]
        lines += [f"{size / 2**20:8.1f} MB  {key}" for key, size in by.most_common(16)]
        for stat in snap.statistics("lineno")[:12]:
            frame = stat.traceback[0]
            where = "/".join(frame.filename.rsplit("/", 2)[-2:])
            lines.append(f"{stat.size / 2**20:8.1f} MB  {where}:{frame.lineno} ({stat.count:,} blocks)")
        if previous:
            lines.append("grew most since the previous report (MB, blocks):")
            key = "traceback" if frames > 1 else "lineno"
            for diff in snap.compare_to(previous[0], key)[:15]:
                where = " < ".join(
                    "/".join(f.filename.rsplit("/", 2)[-2:]) + f":{f.lineno}" for f in diff.traceback[:frames])
                lines.append(f"{diff.size_diff / 2**20:+8.2f} MB {diff.count_diff:+9,}  {where}")
        previous[:] = [snap]
        return "\n".join(lines) + "\n"

    _watch(path, report)


def census_probe(path: str) -> None:
    """Cheap enough for a run at full rate (no tracing): per report, the RSS, glibc's heap (`mallinfo2`: in use,
    free but kept, mmapped), pymalloc's blocks, and the object count of each type with its change since the
    previous report (one pass over the collector's objects: a pause of a few hundred ms)."""
    import ctypes
    import ctypes.util

    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
            "keepcost")]

    libc_name = ctypes.util.find_library("c")
    mallinfo2 = None
    if libc_name is not None:
        libc = ctypes.CDLL(libc_name)
        mallinfo2 = getattr(libc, "mallinfo2", None)
        if mallinfo2 is not None:
            mallinfo2.restype = MallInfo2
    previous: dict[str, int] = {}

    def report() -> str:
        with open("/proc/self/status") as f:
            rss = next(line.split()[1] for line in f if line.startswith("VmRSS"))
        lines = [f"rss {int(rss) / 1024:.1f} MB; pymalloc blocks {sys.getallocatedblocks():,}"]
        if mallinfo2 is not None:
            m = mallinfo2()
            lines.append(f"glibc: heap {m.arena / 2**20:.1f} MB (in use {m.uordblks / 2**20:.1f}, free "
                         f"{m.fordblks / 2**20:.1f}, top pad {m.keepcost / 2**20:.1f}), mmapped {m.hblkhd / 2**20:.1f} "
                         f"MB in {m.hblks} blocks")
        counts: collections.Counter[str] = collections.Counter(type(o).__qualname__ for o in gc.get_objects())
        lines.append(f"objects tracked by the collector {sum(counts.values()):,}")
        grown = sorted(counts, key=lambda k: -(counts[k] - previous.get(k, 0)))
        for name in grown[:20]:
            lines.append(f"{counts[name]:10,} {counts[name] - previous.get(name, 0):+9,}  {name}")
        previous.clear()
        previous.update(counts)
        return "\n".join(lines) + "\n"

    _watch(path, report)


class _Steps:
    """One thread's event-loop steps."""

    def __init__(self) -> None:
        self.wall = [0] * len(BOUNDS_MS)
        self.cpu = [0] * len(BOUNDS_MS)
        self.n = 0
        self.wall_s = 0.0
        self.cpu_s = 0.0
        self.slow: collections.Counter[str] = collections.Counter()
        self.slow_wall: dict[str, float] = collections.defaultdict(float)
        self.slow_cpu: dict[str, float] = collections.defaultdict(float)
        self.longest: list[tuple[float, float, str]] = []
        self.by_what: collections.Counter[str] = collections.Counter()
        self.cpu_by_what: dict[str, float] = collections.defaultdict(float)


def _bucket(ms: float) -> int:
    for i, bound in enumerate(BOUNDS_MS):
        if ms < bound:
            return i
    return len(BOUNDS_MS) - 1


def _what(handle: Any) -> str:
    """What a step ran: a task's coroutine chain where it stopped (outermost > ... > innermost), or the callback."""
    callback = handle._callback
    owner = getattr(callback, "__self__", None)
    if isinstance(owner, asyncio.Task):
        parts: list[str] = []
        coro: Any = owner.get_coro()
        while coro is not None and len(parts) < 6:
            code = getattr(coro, "cr_code", None) or getattr(coro, "gi_code", None) or getattr(coro, "ag_code", None)
            if code is not None:
                parts.append(code.co_qualname)
            coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
        return "task " + " > ".join(parts)
    return getattr(callback, "__qualname__", type(callback).__name__)


def loop_probe(path: str) -> None:
    threads: dict[str, _Steps] = collections.defaultdict(_Steps)
    gcs: list[tuple[int, float, float]] = []
    """(generation, wall ms, thread CPU ms) of every collection since the last reset."""
    handover: dict[str, list[float]] = collections.defaultdict(list)
    loops: dict[str, asyncio.AbstractEventLoop] = {}
    run = asyncio.events.Handle._run

    def timed_run(self: Any) -> None:
        w0, c0 = time.perf_counter(), time.thread_time()
        run(self)
        wall, cpu = (time.perf_counter() - w0) * 1000, (time.thread_time() - c0) * 1000
        steps = threads[threading.current_thread().name]
        steps.n += 1
        steps.wall_s += wall / 1000
        steps.cpu_s += cpu / 1000
        steps.wall[_bucket(wall)] += 1
        steps.cpu[_bucket(cpu)] += 1
        what = _what(self)
        steps.by_what[what] += 1
        steps.cpu_by_what[what] += cpu
        if wall >= SLOW_MS:
            steps.slow[what] += 1
            steps.slow_wall[what] += wall
            steps.slow_cpu[what] += cpu
            steps.longest.append((wall, cpu, what))
            if len(steps.longest) > 200:
                steps.longest.sort(reverse=True)
                del steps.longest[20:]

    asyncio.events.Handle._run = timed_run  # type: ignore[method-assign]

    started: dict[int, tuple[float, float]] = {}

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        ident = threading.get_ident()
        if phase == "start":
            started[ident] = (time.perf_counter(), time.thread_time())
        elif ident in started:
            w0, c0 = started.pop(ident)
            gcs.append((int(info["generation"]), (time.perf_counter() - w0) * 1000, (time.thread_time() - c0) * 1000))

    gc.callbacks.append(on_gc)

    new_loop = asyncio.new_event_loop

    def tracked_loop() -> asyncio.AbstractEventLoop:  # the worker's loop and Faust's consumer thread's
        loop = new_loop()
        loops[f"loop{len(loops)}"] = loop
        return loop

    asyncio.new_event_loop = tracked_loop

    def sample() -> None:
        while True:
            time.sleep(0.005)
            for name, loop in list(loops.items()):
                if loop.is_closed() or not loop.is_running():
                    continue
                sent = time.perf_counter()
                samples = handover[name]

                def arrived(sent: float = sent, samples: list[float] = samples) -> None:
                    samples.append((time.perf_counter() - sent) * 1000)

                try:
                    loop.call_soon_threadsafe(arrived)
                except RuntimeError:
                    continue

    threading.Thread(target=sample, daemon=True, name="bench-handover").start()

    def reset() -> None:
        threads.clear()
        gcs.clear()
        for samples in handover.values():
            samples.clear()

    def quantiles(values: list[float]) -> dict[str, float]:
        if not values:
            return {}
        s = sorted(values)
        return {f"p{q}": round(s[min(len(s) - 1, int(len(s) * q / 100))], 2) for q in (50, 90, 99, 100)} | {
            "n": len(s)}

    def report() -> str:
        out: dict[str, Any] = {"bounds_ms": [str(b) for b in BOUNDS_MS], "threads": {}}
        for name, steps in list(threads.items()):
            longest = sorted(steps.longest, reverse=True)[:12]
            out["threads"][name] = {
                "steps": steps.n, "wall_s": round(steps.wall_s, 2), "cpu_s": round(steps.cpu_s, 2),
                "wall_hist": steps.wall, "cpu_hist": steps.cpu,
                "slow": [{"what": w, "n": n, "wall_ms": round(steps.slow_wall[w], 1),
                          "cpu_ms": round(steps.slow_cpu[w], 1)} for w, n in steps.slow.most_common(15)],
                "longest": [{"wall_ms": round(w, 1), "cpu_ms": round(c, 1), "what": x} for w, c, x in longest],
                "cpu": [{"what": w, "n": steps.by_what[w], "cpu_ms": round(c, 1)} for w, c in sorted(
                    steps.cpu_by_what.items(), key=lambda item: -item[1])[:12]],
            }
        out["gc"] = {str(g): quantiles([w for gen, w, _ in gcs if gen == g]) for g in (0, 1, 2)}
        out["handover_ms"] = {name: quantiles(list(v)) for name, v in handover.items()}
        return json.dumps(out, indent=1)

    _watch(path, report, reset)


def main() -> None:
    if path := os.environ.get("COOLANT_BENCH_MEMORY"):
        memory_probe(path)
    if path := os.environ.get("COOLANT_BENCH_CENSUS"):
        census_probe(path)
    if path := os.environ.get("COOLANT_BENCH_LOOP"):
        loop_probe(path)
    sys.argv = ["coolant", *sys.argv[1:]]
    runpy.run_module("coolant.cli", run_name="__main__")


if __name__ == "__main__":
    main()
