"""The recording a tuning run replays: read once, decoded once, indexed once for the metrics.

Which records the metrics count (the engine itself sees every valid record, in file order):
- outcome records (`coolant.outcome/1`), each (deployment_id, event_id) once: a republished copy
  is the same attempt (the engine drops it too, L2);
- `ok: false` is a failure, `ok: true` a success; a successful `pre_call_check` is not an attempt
  on the provider (N2 ignores it) and counts as neither;
- health probes drive probe cooldowns when `coolant.health.cooldown` is on, but are not traffic.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from coolant.io.sources import Block, decode_records
from coolant.native_backend import available, compact_of, one_per_line
from coolant.schemas import Health, InvalidRecord, Outcome, Record, decode
from coolant.tuning.metrics import DeploymentTraffic, incidents

__all__ = ["MAX_INVALID_SAMPLES", "Recording", "index_traffic", "load_recording"]

MAX_INVALID_SAMPLES = 20

EngineInput = Outcome | Health
_DEPLOYMENT, _EVENT, _TS = attrgetter("deployment_id"), attrgetter("event_id"), attrgetter("ts")
_OK, _SOURCE = attrgetter("ok"), attrgetter("source")


@dataclass(slots=True)
class Recording:
    """Decoded records (outcomes and probes, file order) plus what the metrics need of them."""

    records: list[EngineInput] = field(default_factory=list)
    blocks: list[Block] | None = None
    """The raw blocks, kept when the native success path is built: each policy's run reads its plain successes
    from them (coolant.native_backend) instead of from the decoded records."""
    decoded: list[Sequence[Record | None] | None] | None = None
    """With `blocks`: each block's valid records when it holds one per line (`one_per_line`), else None. The lines
    the native scan hands back are looked up there: every policy's run decodes nothing again."""
    engine_records: int = 0
    """Valid outcome and probe records (those `records` holds unless it was read `lean`)."""
    compact: Any | None = None
    """With `blocks`: the blocks read once by the native reader (`coolant.native_backend.compact_of`) for every
    policy's run, where it is built."""
    lines: int = 0
    invalid: int = 0
    invalid_samples: list[str] = field(default_factory=list)
    ignored: int = 0
    """Valid records the engine does not decide on in replay (deployment and cooldown records)."""
    traffic: dict[str, DeploymentTraffic] = field(default_factory=dict)
    first_ts: float | None = None
    last_ts: float | None = None

    @property
    def failures(self) -> int:
        return sum(len(t.failures) for t in self.traffic.values())

    @property
    def successes(self) -> int:
        return sum(len(t.successes) for t in self.traffic.values())

    @property
    def incidents(self) -> int:
        return sum(len(t.incidents) for t in self.traffic.values())

    def busiest(self, n: int) -> list[str]:
        """The `n` deployments with the most failures (ties: the most records, then by id)."""
        ranked = sorted(
            self.traffic.items(), key=lambda kv: (-len(kv[1].failures), -len(kv[1].successes), kv[0])
        )
        return [dep for dep, t in ranked[:n] if t.failures or t.successes]


def index_traffic(records: Iterable[EngineInput], quiet_gap: float) -> dict[str, DeploymentTraffic]:
    """Per deployment: sorted failure and success times of the counted outcomes, and the incidents. Columns are
    read with `map` and republished copies found with one set: a loop per record over a million records is most
    of a tuning run's reading."""
    outs = [r for r in records if type(r) is Outcome]
    keys = list(zip(map(_DEPLOYMENT, outs), map(_EVENT, outs), strict=True))
    if len(set(keys)) < len(keys):  # republished copies: the first of each is the attempt
        first = dict(zip(reversed(keys), range(len(keys) - 1, -1, -1), strict=True))
        outs = [outs[i] for i in sorted(first.values())]
    failures: defaultdict[str, list[float]] = defaultdict(list)
    successes: defaultdict[str, list[float]] = defaultdict(list)
    columns = map(_DEPLOYMENT, outs), map(_TS, outs), map(_OK, outs), map(_SOURCE, outs)
    for dep, ts, ok, source in zip(*columns, strict=True):
        if not ok:
            failures[dep].append(ts)
        elif source != "pre_call_check":
            successes[dep].append(ts)
    out: dict[str, DeploymentTraffic] = {}
    for dep in sorted(failures.keys() | successes.keys()):
        f = tuple(sorted(failures.get(dep, ())))
        s = tuple(sorted(successes.get(dep, ())))
        out[dep] = DeploymentTraffic(f, s, tuple(incidents(f, quiet_gap)))
    return out


def load_recording(
    blocks: Iterable[Block], quiet_gap: float, keep_blocks: bool | None = None, lean: bool = False
) -> Recording:
    """Decode every record once, a block at a time; invalid lines are counted (first few kept with their
    position). The raw blocks are kept for the native backend (`keep_blocks`; default: when it is built).

    `lean`: every policy runs on the native backend, so `records` is left empty: where the native reader is built,
    only the lines that are not plain successes are decoded (`decoded` holds them, None at the others) and the
    plain successes are counted in the traffic natively (`_lean`)."""
    keep = available() if keep_blocks is None else keep_blocks
    if keep and lean:
        kept = list(blocks)
        compact = compact_of(kept)
        if compact is not None:
            return _lean(kept, compact, quiet_gap)
        blocks = kept
    rec = Recording(blocks=[] if keep else None, decoded=[] if keep else None)
    records = rec.records

    def invalid(where_and_problem: str) -> None:
        rec.invalid += 1
        if len(rec.invalid_samples) < MAX_INVALID_SAMPLES:
            rec.invalid_samples.append(where_and_problem)

    valid = 0
    for block in blocks:
        decoded = decode_records(block, invalid)
        if rec.blocks is not None and rec.decoded is not None:
            rec.blocks.append(block)
            rec.decoded.append(decoded if one_per_line(block[2], len(decoded)) else None)
        valid += len(decoded)
        records.extend(r for r in decoded if type(r) is Outcome or type(r) is Health)
    if rec.blocks is not None:
        rec.compact = compact_of(rec.blocks)
    rec.lines = valid + rec.invalid
    rec.ignored = valid - len(records)
    rec.engine_records = len(records)
    if records:
        stamps = [r.ts for r in records]
        rec.first_ts, rec.last_ts = min(stamps), max(stamps)
    rec.traffic = index_traffic(records, quiet_gap)
    return rec


def _lean(blocks: list[Block], compact: Any, quiet_gap: float) -> Recording:
    """`load_recording` for native runs only: the lines `compact` did not read as plain successes decoded here, in
    file order (each as `decode` reads it alone, so the invalid ones are reported as a block's are; B11 not looked
    for again where the native reader found no name twice), their
    outcomes handed to `compact.traffic` with their kind; the plain successes stay native."""
    rec = Recording(blocks=blocks, decoded=[], compact=compact)
    assert rec.decoded is not None
    for _, _, data in blocks:
        rec.decoded.append([None] * (data.count(b"\n") + 1))  # a line of each number the scan can give
    others: list[tuple[int, str, str, float, int]] = []
    valid = stamped = 0
    lo, hi = math.inf, -math.inf
    for n, b, lineno, raw, names_distinct in compact.python_lines():
        try:
            r = decode(raw, names_distinct)
        except InvalidRecord as exc:
            source, first, _ = blocks[b]
            rec.invalid += 1
            if len(rec.invalid_samples) < MAX_INVALID_SAMPLES:
                rec.invalid_samples.append(f"{source}:{first + lineno}: {exc}")
            continue
        valid += 1
        rec.decoded[b][lineno] = r
        if type(r) is Outcome:
            kind = 0 if not r.ok else 1 if r.source != "pre_call_check" else 2
            others.append((n, r.deployment_id, r.event_id, r.ts, kind))
        elif type(r) is not Health:
            continue
        stamped += 1
        lo, hi = min(lo, r.ts), max(hi, r.ts)
    by_dep, successes, s_lo, s_hi = compact.traffic(others)
    rec.lines = valid + successes + rec.invalid
    rec.ignored = valid - stamped
    rec.engine_records = stamped + successes
    if rec.engine_records:
        rec.first_ts, rec.last_ts = min(lo, s_lo), max(hi, s_hi)
    rec.traffic = {
        dep: DeploymentTraffic(f := tuple(sorted(fails)), tuple(sorted(oks)), tuple(incidents(f, quiet_gap)))
        for dep, fails, oks in sorted(by_dep)
    }
    return rec
