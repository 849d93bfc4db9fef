"""Which faust-streaming the boundary was written and tested against, and what an untested one costs.

The boundary copies Faust's fetch loop and overrides its rebalance steps (`consumer.py`), so on another version
its code may be wrong in ways no error shows: records skipped at a failover. The worker therefore refuses an
untested version unless it is told to run on one (`coolant worker --allow-untested-faust`), and then runs
without anything of the boundary and says what that loses (`LOST`).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from coolant.errors import CoolantError

TESTED_FAUST = frozenset({"0.15.3"})
"""faust-streaming versions the boundary was tested on (tests/streams/test_faust_tripwire.py checks its reaches)."""

LOST = (
    "the input lanes (plain Faust agents decide instead, several times slower), the failover guards (a worker "
    "taking over partitions may skip records, so cooldowns are missed), the producer's topic tracking (a send to "
    "a topic created while the worker runs may wait 20 minutes), the table recovery watch (a stalled recovery is "
    "not rewound), --fetch-max-wait-ms and --fetch-min-bytes, the consumer lag gauge and the stall "
    "watch"
)
"""What a worker on an untested faust-streaming runs without (it installs nothing of the boundary)."""


class UntestedFaust(CoolantError):
    """The installed faust-streaming is not one the boundary was tested on, and running on it was not allowed."""


def faust_version() -> str:
    try:
        return version("faust-streaming")
    except PackageNotFoundError:
        return "unknown"


def untested_faust() -> str | None:
    """Why nothing of the boundary may be installed (an untested faust-streaming), or None."""
    installed = faust_version()
    if installed not in TESTED_FAUST:
        return f"faust-streaming {installed} is not a version coolant was tested on ({', '.join(sorted(TESTED_FAUST))})"
    return None


def check_faust(allow_untested: bool) -> str | None:
    """None on a tested faust-streaming. On an untested one: `UntestedFaust` unless `allow_untested`, else the
    warning the worker logs (what runs, and what is lost)."""
    refusal = untested_faust()
    if refusal is None:
        return None
    if not allow_untested:
        raise UntestedFaust(
            f"{refusal}: its internals the worker relies on may have moved (records lost at a failover). Install a "
            "tested version, or run anyway with --allow-untested-faust, without " + LOST)
    return f"{refusal}; --allow-untested-faust: running without {LOST}"
