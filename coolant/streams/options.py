"""How a worker runs (from `coolant worker`'s options), as opposed to what the policy decides (the config)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from coolant.streams.admin_views import WRITE_RATE
from coolant.streams.routing import Mode

Intake = Literal["lanes", "agents"]
"""How input records reach the deciders: `lanes` (the boundary's fetch loop hands them over in batches) or
`agents` (Faust's agents over `take_events` batches: slower, no Faust internals in the fetch path)."""

MAX_TS_AHEAD = 60.0
"""B6 (docs/input-bounds.md): clock skew allowed to publishers; below L1's default late_after of 180 s, so a
record accepted ahead of time never makes correct records late."""

MAX_POLL_RECORDS = 1000
"""Records per fetch from the consumer (Faust's default: no limit). Unbounded, a catch-up turned every record
prefetched for every partition into message objects at once: about 70 MB of a 10,000-deployment worker's peak
RSS (bench/live_bench.py). `BROKER_MAX_POLL_RECORDS` in the environment still overrides it."""

FETCH_MAX_WAIT_MS = 1500
FETCH_MIN_BYTES = 1
"""Faust's own fetch settings, kept as the defaults: a fetch is answered at its first record, or after 1.5 s with
none. A shorter wait bounds how long a partition aiokafka left out of the fetch in flight (its earlier records not
consumed yet) waits for that fetch, for more fetches when idle (100 ms: 3.5% of a core idle, against 1.6%); it was
not made the default because one SIGTERM handover test run with it stalled in recovery (cause not found).
`--fetch-min-bytes 65536 --fetch-max-wait-ms 5` makes the broker gather records: fewer fetch round trips (Python
protocol work in Faust's consumer thread, most of a lightly loaded worker's CPU), at up to 5 ms more per record
and ~14% of a core on an idle worker (docs/performance.md)."""


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    """How this worker runs (from the CLI), as opposed to what the policy decides (the config)."""

    app_id: str = "coolant"
    partitions: int = 8
    web_port: int = 6066
    web_bind: str = "127.0.0.1"
    datadir: str = ".local/worker"
    materialize: bool = True
    admin_rate: float = WRITE_RATE
    """Admin API writes per second (bursts of `admin_views.WRITE_BURST`); beyond it they answer 429."""
    admin_token: str | None = field(default=None, repr=False)
    """Bearer token of the admin API's writes; None turns them off. Kept out of repr so it is never logged."""
    session_timeout: float = 10.0
    """Seconds without a heartbeat before the group takes a crashed worker's partitions (Faust's default, 60 s,
    leaves half a fleet's deployments undecided for a minute). The broker accepts 6 s and more by default."""
    heartbeat_interval: float = 1.0
    """How often a member heartbeats; it also learns of a rebalance this quickly."""
    rebalance_timeout: float = 20.0
    """How long the group waits for members to rejoin a rebalance before dropping the slow ones."""
    shutdown_timeout: float = 10.0
    """On SIGTERM or a rebalance, how long to let the batches being decided (and on SIGTERM the early Redis writes)
    finish before the partitions go; below `faust.STOP_WITHIN`, the bound on the whole stop."""
    keep_raw_deadletters: bool = False
    """S2 (docs/input-bounds.md): dead letters keep the raw record unredacted."""
    max_ts_ahead: float = MAX_TS_AHEAD
    """B6: input records dated more than this many seconds ahead of this host's clock are dead-lettered."""
    misrouted: Mode = "republish"
    """What to do with an input record on the wrong partition (see `routing.py`)."""
    fetch_max_wait_ms: int = FETCH_MAX_WAIT_MS
    """How long the broker may hold a fetch while it gathers `fetch_min_bytes` (see FETCH_MAX_WAIT_MS)."""
    fetch_min_bytes: int = FETCH_MIN_BYTES
    """How much a fetch waits for (up to `fetch_max_wait_ms`) before the broker answers."""
    intake: Intake = "lanes"
    """`--intake`: how input records reach the deciders (see `Intake`)."""
    allow_untested_faust: bool = False
    """`--allow-untested-faust`: run on a faust-streaming the boundary was not tested on, without the boundary
    (coolant/streams/faust/version.py says what that loses); otherwise such a worker refuses to start."""
