"""What a record did (`Step.disposition`) and why a failure cooled nothing (`Skip`), as typed names.

The values are the words of the spec, the replay summary and the `disposition` label of the worker's metrics;
they are `StrEnum`s, so they compare, hash and print as those strings and no record or metric changes.
"""

from __future__ import annotations

from enum import StrEnum


class Skip(StrEnum):
    """The rule that stopped a failure (or an X6 success) from cooling its deployment."""

    UNKNOWN_DEPLOYMENT = "unknown_deployment"  # G1
    NO_STATUS = "no_status"  # G2
    EXCLUDED_TYPE = "excluded_type"  # G3
    DISABLED = "disabled"  # G4
    ZERO_DURATION = "zero_duration"  # G5
    STATUS_EXEMPT = "status_exempt"  # G6
    WILDCARD = "wildcard"  # G7
    SINGLE_402 = "single_402"  # M1
    LONE_EXEMPT = "lone_exempt"  # Q1, P1, X6.3
    BELOW_THRESHOLD = "below_threshold"  # V2.5, Q4/P4


class Disposition(StrEnum):
    """What a record did when no skip reason applies (a `Step` holds one of these or a `Skip`)."""

    COUNTED = "counted"  # a success, counted in its window (O5)
    LATE = "late"  # L1
    DUPLICATE = "duplicate"  # L2
    IGNORED = "ignored"  # O3, N2, N4, and deployment/cooldown records in replay
    PROBE = "probe"  # a probe with no cooldown decision (H1 only)
    ABSORBED = "absorbed"  # E2: a cooldown ending later is in force
    COOLED = "cooled"  # a cooldown emitted (or a candidate for X3)
    SUPPRESSED = "suppressed"  # X3 held the cooldown back
    HELD = "held"  # RC3, RC4: a probe of a cooled deployment that wrote no record (hold kept, streak counted)
    RELEASED = "released"  # RC4: a probe released a cooled deployment
    # the live shell's, for records no policy step decided (coolant_records_total's `disposition` label)
    INVALID = "invalid"  # not a valid record of the topic's type: dead-lettered (contract §2)
    FAILED = "failed"  # a stage raised on it (B8): dead-lettered with the reason
    TOMBSTONE = "tombstone"  # a record with no value (B1): nothing to decide
    STALE = "stale"  # fetched before a rebalance (the fence): left for the partition's next reader
