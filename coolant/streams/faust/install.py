"""Putting the boundary in place on one app, before it starts: the lanes' consumer (or the agents' intake with the
failover guards alone), the flow-control guard, the tracked producer, the recovery watch, the fetch settings; or,
on an untested faust-streaming that the operator allowed, nothing at all."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from coolant.streams.faust.consumer import FetchTuning, SeekSafeConsumer, consumer_class, guard_flow_control, tuned
from coolant.streams.faust.producer import TrackedProducer
from coolant.streams.faust.recovery import REWIND_AFTER, RecoveryWatch
from coolant.streams.faust.version import check_faust
from coolant.streams.lane import Lane

log = logging.getLogger(__name__)

AGENTS_NOTICE = "input lanes off: "
"""How the one log line that says Faust's agents decide begins (the live tests check which intake ran)."""


def install(
    app: Any, lanes: Mapping[str, Lane], fetch: FetchTuning | None = None, *, use_lanes: bool = True,
    allow_untested: bool = False,
) -> str | None:
    """Install the boundary on `app`; returns why the input lanes are off (None: they are on).

    On a tested faust-streaming: the failover guards, the recovery watch and `fetch` always (they fix that
    version's failover bugs, which Faust's agents would hit too), and the lanes' consumer when `use_lanes`. On an
    untested one: `UntestedFaust` unless `allow_untested`, else nothing is installed and Faust's agents decide.
    The reason is logged in one line once the worker has started (a line logged while the app is being built is
    lost: logging is set up later).
    """
    untested = check_faust(allow_untested)
    if untested is not None:
        why = untested
    else:
        app.transport.Consumer = tuned(consumer_class(lanes) if use_lanes else SeekSafeConsumer, fetch)
        app.transport.Producer = TrackedProducer
        guard_flow_control(app, lanes if use_lanes else {})
        app.timer(REWIND_AFTER, name="recovery-watch")(RecoveryWatch(app).tick)
        if use_lanes:
            return None
        why = "--intake agents: Faust's agents decide over take_events batches (failover guards kept)"

    async def announce() -> None:
        log.warning("%s%s", AGENTS_NOTICE, why)

    app.task(announce)
    return why
