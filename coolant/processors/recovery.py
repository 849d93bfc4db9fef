"""Recovery that probes (RC1-RC5, docs/probe.md): probe records hold a cooled deployment or release it early.

A cooldown's length is a guess. While a deployment is cooled, the one prober that owns it (`coolant probe`) calls
it every few seconds; its `coolant.health/1` records enter the pure core like any other record, so `coolant
replay` of the same records makes the same holds and releases as the live worker:

- RC1: only a probe of a known deployment whose request-path cooldown is in force at the probe's `ts` counts;
  any other probe is H1-H3's alone, as before.
- RC2: a probe after the cooldown ended closes the hold (its bound and its healthy streak start again).
- RC3: a failed probe that G6 passes holds the cooldown `extend` seconds past the probe, never past the hold's
  first failing probe + `max_hold` (the bound); a new record only when that moves the end by at least
  `extend / 2`, so a prober calling every second writes one record per `extend / 2` seconds, not one per probe.
  A probe refused for its request (a 400, 403, 409, 422 without the deployment's own policy entry) was answered:
  it is H1-H3's alone, so a probe the deployment cannot take never holds a healthy deployment cooled.
- RC4: `release_after` healthy probes in a row release the deployment at the last probe's `ts`: the cooldown
  in force ends there (Redis and every pod's copy, through the push), and cooldowns that started at or before it
  stay released.
- RC5: half-open after a release is X7's: with `backoff.probation` (the outlier profile's default, X13) the
  release starts probation, so the first counted real failure re-cools at once and a success ends it.

The state is the request path's (`PathState.hold`, `PathState.end`, `PathState.probation`): the cooldown a probe
holds or releases is the one the request path decided, and the half-open failure is a request-path record.
Pure: no clock, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from coolant.processors.categories import exception_name
from coolant.processors.decide import Candidate, Failure, exempt
from coolant.processors.dispositions import Disposition
from coolant.processors.emit import build
from coolant.processors.policy import DeploymentEntry, Options
from coolant.processors.state import Hold, PathState
from coolant.schemas import Cooldown, Health, Window

__all__ = ["Release", "Verdict", "on_probe"]


@dataclass(frozen=True, slots=True)
class Release:
    """RC4: a deployment's cooldown ended early by its probes. The live shell deletes its Redis keys, leaves the
    release marker at `ts` (so no cooldown that started by then is written back) and tells every pod."""

    deployment_id: str
    model_group: str
    ts: float
    trigger_event_id: str
    """The probe that completed the healthy streak."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a counted probe did to the cooldown in force."""

    disposition: Disposition
    cooldown: Cooldown | None = None
    release: Release | None = None


HELD = Verdict(Disposition.HELD)


def on_probe(o: Options, entry: DeploymentEntry, ps: PathState, rec: Health) -> Verdict | None:
    """RC1-RC5 for one probe on the request path state `ps`; None when the deployment is not cooled (RC1)."""
    r = o.recovery
    assert r is not None
    ts = rec.ts
    end = ps.end
    hold = ps.hold
    if end is None or ts >= end:  # RC1, RC2
        if hold is not None:
            hold.since, hold.good = None, 0
        return None
    if not rec.healthy and exempt(entry, Failure(rec.status_code, exception_name(rec.exception_type), ts)):
        return None  # RC3: G6 stops it, as H2's gate does
    if hold is None:
        hold = ps.hold = Hold()
    if rec.healthy:  # RC4
        hold.good += 1
        if hold.good < r.release_after:
            return HELD
        ps.end = ts
        hold.since, hold.good = None, 0
        if o.backoff is not None and o.backoff.probation:
            ps.probation = True  # RC5: X7's half-open, from the release on
        return Verdict(Disposition.RELEASED,
                       release=Release(entry.deployment_id, entry.model_group, ts, rec.event_id))
    hold.good = 0  # RC3
    if hold.since is None:
        hold.since = ts
    until = min(ts + r.extend, hold.since + r.max_hold)
    if until - end < r.extend / 2:
        return HELD
    duration = until - ts
    cooldown = build(
        entry,
        Candidate("health_check", duration, Window(ts, 0, 1)),
        duration,
        until,
        trigger_schema=rec.schema,
        trigger_event_id=rec.event_id,
        ts=ts,
        status=rec.status_code,
        name=rec.exception_type,
        message=rec.exception_message,
    )
    ps.end = until
    return Verdict(Disposition.COOLED, cooldown)

