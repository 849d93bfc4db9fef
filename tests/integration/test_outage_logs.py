"""Issue 26 live: a broker outage is a few log lines, not thousands (about 2,200 ERRORs per worker before)."""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter

import pytest

from coolant.io.logs import REPEAT_QUIET
from tests.support.kafka import produce_lines, wait_caught_up
from tests.support.records import fleet_traffic
from tests.support.worker import Case

pytestmark = pytest.mark.integration

OUTAGE = 20.0
"""Seconds the broker stays away: long enough for every retry loop of the Kafka client to go round many times."""
COUNTED = "(held back, one line per outage)"
"""The end of the line that counts a kind of line held back (`coolant.io.logs.Repeats.report`)."""
LINE = re.compile(r"^\[[^]]+\] \[\d+\] \[(WARNING|ERROR)\] (.*)$")


async def test_a_broker_outage_is_one_line_per_kind_then_a_count(case: Case) -> None:
    lines = fleet_traffic(400, seed=8)
    broker = case.broker()
    w = await case.worker("a", broker.bootstrap)
    await w.wait_ready()
    await produce_lines(broker.bootstrap, case.outcomes, lines)
    await wait_caught_up(broker.bootstrap, case.app_id, case.outcomes, on_timeout=case.logs)
    before = len(w.log_path.read_text().splitlines())
    broker.stop()
    await asyncio.sleep(OUTAGE)
    broker.start()
    await produce_lines(broker.bootstrap, case.outcomes, fleet_traffic(50, seed=9, tag="after"))
    await wait_caught_up(broker.bootstrap, case.app_id, case.outcomes, timeout=120, on_timeout=case.logs)
    assert w.alive, w.log_tail()

    during = w.log_path.read_text().splitlines()[before:]
    problems = [m.groups() for m in map(LINE.match, during) if m]
    kinds = Counter(re.sub(r"\d+", "N", text)[:60] for _, text in problems)
    print(f"broker outage of {OUTAGE:.0f} s: {len(problems)} warning/error lines "
          f"({sum(1 for lvl, _ in problems if lvl == 'ERROR')} ERROR), {len(kinds)} kinds")
    for kind, n in kinds.most_common(10):
        print(f"  {n:4d}  {kind}")
    assert len(problems) <= 60, "\n".join(text for _, text in problems[:80])
    assert all(n <= 3 for n in kinds.values()), kinds.most_common(5)
    # the outage over, what was held back is counted in a line of its own (not only at the next outage's first)
    deadline = time.monotonic() + REPEAT_QUIET + 30
    while COUNTED not in w.log_path.read_text() and time.monotonic() < deadline:
        await asyncio.sleep(0.5)
    counted = [line for line in w.log_path.read_text().splitlines()[before:] if COUNTED in line]
    assert counted, w.log_tail()
    assert all(line.split("[", 3)[3].startswith("WARNING]") for line in counted), counted
