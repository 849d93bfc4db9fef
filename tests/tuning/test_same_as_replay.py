"""Each policy of a tuning grid cools exactly what `coolant replay` with that policy cools.

The runner's ways of replaying (the native path over the blocks read once for every policy, `Recording.compact`, or
scanning each block; given each block's records decoded once, or decoding what its scan hands back; every record
through the engine) against `replay` on both backends, over traffic with incidents, probes, duplicates, late
records, a blank and an invalid line.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import yaml

from coolant import native_backend
from coolant.io.sources import Block
from coolant.native_backend import one_per_line
from coolant.processors.policy import Policy
from coolant.replay.run import replay
from coolant.schemas import Cooldown
from coolant.tuning.grid import build_grid, parse_axis
from coolant.tuning.runner import Inputs, Interval, evaluate, evaluate_many, tasks
from coolant.tuning.traffic import load_recording
from tests.support.records import DEPLOYMENTS, fleet_traffic, probe_traffic, write_config

GRID = (  # bench/tune_bench.py's grid, with probe cooldowns on
    "router_settings.allowed_fails=null,0,3",
    "coolant.window=tumbling,sliding",
    "coolant.backoff=null,{}",
)


def _blocks() -> list[Block]:
    lines = fleet_traffic(3000, seed=3)
    lines = lines[:1000] + probe_traffic(12, seed=3) + lines[1000:]
    third = len(lines) // 3
    parts = [lines[:third], lines[third : 2 * third], lines[2 * third :]]
    parts[1] = [*parts[1][:50], b"", b'{"schema": "coolant.outcome/1"}', *parts[1][50:]]  # a blank, an invalid line
    blocks: list[Block] = []
    first = 1
    for part in parts:
        blocks.append(("f", first, b"\n".join(part) + b"\n"))
        first += len(part)
    return blocks


def _replayed(blocks: list[Block], policy: Policy, backend: str) -> tuple[dict[str, list[Interval]], int]:
    out: list[Cooldown] = []
    summary = replay(blocks, policy, out.append, backend=backend)
    by_dep: defaultdict[str, list[Interval]] = defaultdict(list)
    for cd in out:
        by_dep[cd.deployment_id].append((cd.ts, cd.until, cd.reason))
    return dict(by_dep), sum(summary.suppressed.values())


@pytest.mark.parametrize("health", [False, True])
def test_each_policy_cools_what_replay_cools(tmp_path: Path, health: bool) -> None:
    raw = yaml.safe_load(write_config(tmp_path / "c.yaml").read_text())
    raw["coolant"] = {"health": {"cooldown": health}, "max_ejection_percent": 25}
    points = build_grid(raw, [parse_axis(a) for a in GRID], "c.yaml")
    assert len(points) == 12
    blocks = _blocks()
    native = native_backend.available()
    recording = load_recording(blocks, quiet_gap=60, keep_blocks=native)
    lean = load_recording(blocks, quiet_gap=60, keep_blocks=native, lean=True)
    if native:
        assert recording.decoded is not None
        assert [d is not None for d in recording.decoded] == [True, False, True]  # the blank and invalid lines
        if hasattr(native_backend._native_module(), "Compact"):  # a build from before it has none
            assert recording.compact is not None  # one entry a line but the blank one
            assert len(recording.compact) == sum(len(b[2].splitlines()) for b in blocks) - 1
    charted = [*DEPLOYMENTS, "dep-unknown"]
    backends = ["python", "native"] if native else ["python"]
    ways: list[tuple[Any, Any, Any]] = [(None, None, None)]
    if native:
        bl, dec, compact = recording.blocks, recording.decoded, recording.compact
        ways += [(bl, None, None), (bl, dec, None), (bl, dec, compact), (bl, None, compact)]
        if lean.compact is not None:  # only the lines that are not plain successes decoded
            ways += [(lean.blocks, lean.decoded, lean.compact), (lean.blocks, lean.decoded, None)]
    together = [  # each way, the policies that share a pass (MultiEngine) in one: what GridRun runs
        dict(zip(task, evaluate_many([points[i].policy for i in task], Inputs(
            recording.records, recording.traffic, 30, tuple(charted), bl, dec, compact)), strict=True))
        for bl, dec, compact in ways
        for task in tasks([pt.policy for pt in points], 2)
    ]
    assert len(together) == 2 * len(ways)  # tumbling and sliding
    cooled = held = 0
    for n, pt in enumerate(points):
        want, suppressed = _replayed(blocks, pt.policy, "python")
        for b in backends[1:]:
            assert _replayed(blocks, pt.policy, b) == (want, suppressed), (pt.label, b)
        for way, (bl, dec, compact) in enumerate(ways):
            ev = evaluate(pt.policy, recording.records, recording.traffic, 30, charted, bl, dec, compact)
            got = {d: spans for d, spans in ev.timelines.items() if spans}
            assert got == {d: spans for d, spans in want.items() if d in charted}, (pt.label, way)
            assert set(want) <= set(charted)
            assert (ev.figures.cooldowns, ev.figures.suppressed) == (sum(map(len, want.values())), suppressed)
            shared = next(t[n] for t in together[2 * way : 2 * way + 2] if n in t)
            assert (shared.figures, shared.timelines) == (ev.figures, ev.timelines), (pt.label, way)
        cooled += sum(map(len, want.values()))
        held += suppressed
    assert cooled > 100 and held > 0  # the grid cools and X3 holds some back: there is something to compare


def test_a_lean_reading_counts_what_a_full_one_counts() -> None:
    """`load_recording(lean=True)`: the plain successes counted natively, the rest decoded; the same traffic and
    totals as decoding every record, with republished copies that the native reader reads and copies it leaves
    to Python (an escaped id: the same attempt), either first."""
    if not hasattr(native_backend._native_module(), "Compact"):
        pytest.skip("coolant_native is not built, or built before it read recordings once")
    blocks = _blocks()
    source, first, data = blocks[2]
    lines = data.split(b"\n")
    escaped = [line.replace(b'"event_id":"ev', b'"event_id":"\\u0065v', 1) for line in lines[:40]]
    assert escaped[0] != lines[0]
    blocks[2] = (source, first, b"\n".join([*lines[:20], *escaped, *lines[20:]]))
    blocks.append(("g", 1, b"\n".join(escaped[::-1]) + b"\n" + b"\n".join(lines[::-1][:30])))
    full = load_recording(blocks, quiet_gap=60, keep_blocks=True)
    lean = load_recording(blocks, quiet_gap=60, keep_blocks=True, lean=True)
    assert lean.records == [] and lean.compact is not None
    for name in ("lines", "invalid", "invalid_samples", "ignored", "engine_records", "first_ts", "last_ts"):
        assert getattr(lean, name) == getattr(full, name), name
    assert lean.traffic == full.traffic
    assert list(lean.traffic) == list(full.traffic)
    assert (full.invalid, full.engine_records) == (1, len(full.records))
    assert full.successes > 2000 and full.failures > 100


@pytest.mark.parametrize(
    ("data", "records", "expected"),
    [
        (b"a\nb\n", 2, True),
        (b"a\nb", 2, True),
        (b"a\n\nb\n", 2, False),  # a blank line
        (b"a\nb\nc\n", 2, False),  # an invalid line
        (b"", 0, True),
    ],
)
def test_one_per_line(data: bytes, records: int, expected: bool) -> None:
    assert one_per_line(data, records) is expected
