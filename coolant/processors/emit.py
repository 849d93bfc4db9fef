"""From candidate to cooldown record: backoff (X2), re-cool (E2, X8), the record itself (E3, E4)."""

from __future__ import annotations

import hashlib

from coolant.processors.decide import Candidate
from coolant.processors.policy import Backoff, DeploymentEntry, Options
from coolant.processors.redact import redact
from coolant.processors.state import PathState
from coolant.schemas import Cooldown
from coolant.schemas.cooldown import whole_as_int

MASK_KEEP = 50
MASK_MAX = 1024


def backoff_duration(b: Backoff, ps: PathState, ts: float, duration: float) -> tuple[float, int]:
    """X2 steps 1-4: the lengthened duration and the streak it would set."""
    end = ps.end
    if end is not None and ts < end:
        n = max(ps.streak, 1)
    elif end is not None and ps.streak >= 1 and ts < end + b.reset_after:
        n = ps.streak + 1
    else:
        n = 1
    try:
        grown = b.base * b.factor ** (n - 1)
    except OverflowError:  # a streak long enough to overflow a double is long past the cap
        grown = b.max
    return max(duration, min(b.max, grown)), n


def admit(
    o: Options, ps: PathState, ts: float, duration: float, *, backoff: bool = True
) -> tuple[float, float] | None:
    """Backoff then E2 (and X8) on the path state: (final duration, until), or None when absorbed.

    `backoff=False` for durations the provider announced (X6), which backoff must not lengthen.
    """
    streak = ps.streak
    if backoff and o.backoff is not None:
        duration, streak = backoff_duration(o.backoff, ps, ts, duration)
    until = ts + duration  # E1: computed once, in doubles
    end = ps.end
    if o.recool == "extend" and end is not None:
        if until <= end:
            return None
        # X8: while the cooldown is in force, an extension shorter than `recool_coalesce` is absorbed too.
        coalesce = o.recool_coalesce
        if coalesce is not None and ts < end and until - end < coalesce:
            return None
    ps.end = until
    ps.streak = streak
    return duration, until


def mask(text: str | None) -> str | None:
    """S1 then E4: secrets redacted (`redact`), then cut to 1,024 code points, the first 50 kept, the rest
    starred (length unchanged). A text without a secret masks exactly as before S1 existed."""
    if text is None:
        return None
    text = redact(text)[:MASK_MAX]
    if len(text) <= MASK_KEEP:
        return text
    return text[:MASK_KEEP] + "*" * (len(text) - MASK_KEEP)


def cooldown_id(schema: str, deployment_id: str, event_id: str) -> str:
    """E3: deterministic id from the trigger, so replay and live agree and duplicates show."""
    digest = hashlib.sha256(f"{schema}\n{deployment_id}\n{event_id}".encode()).hexdigest()
    return "cd-" + digest[:32]


_Texts = tuple[str, str | None, str]
_LAST: list[tuple[tuple[str, str, str, str | None, str | None], _Texts] | None] = [None]
"""The last trigger `_trigger_texts` made texts for, with them: the policies of a tuning pass (MultiEngine) cool
on the same record one after another."""


def _trigger_texts(
    schema: str, deployment_id: str, event_id: str, name: str | None, message: str | None
) -> _Texts:
    """A cooldown's id (E3), masked exception type and received text (E4): a function of the trigger alone."""
    key = (schema, deployment_id, event_id, name, message)
    last = _LAST[0]  # one read and one write of the slot: another thread sees a whole entry or the previous one
    if last is not None and last[0] == key:
        return last[1]
    texts = (cooldown_id(schema, deployment_id, event_id), mask(name),
             mask(message if message is not None else name) or "")
    _LAST[0] = (key, texts)
    return texts


def build(
    entry: DeploymentEntry,
    candidate: Candidate,
    duration: float,
    until: float,
    *,
    trigger_schema: str,
    trigger_event_id: str,
    ts: float,
    status: int | None,
    name: str | None,
    message: str | None,
) -> Cooldown:
    event_id, exception_type, received = _trigger_texts(
        trigger_schema, entry.deployment_id, trigger_event_id, name, message
    )
    return Cooldown(
        event_id=event_id,
        deployment_id=entry.deployment_id,
        model_group=entry.model_group,
        ts=ts,
        until=until,
        cooldown_time=whole_as_int(duration),
        reason=candidate.reason,
        status_code=status,
        exception_type=exception_type,
        exception_received=received,
        trigger_event_id=trigger_event_id,
        window=candidate.window,
    )
