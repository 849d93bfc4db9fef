"""The Faust boundary: every reach into faust-streaming's and aiokafka's internals, in one subpackage.

Why each reach is made, and what Faust gets wrong that some of them fix, is in docs/faust-boundary.md; each
module's header says the same for its own. `tests/streams/test_faust_tripwire.py` lists every touched name and
fingerprints the upstream code copied or relied on, so a version bump that moves any of it fails a named test.
- `version.py`: the tested faust-streaming versions; an untested one is refused unless allowed.
- `install.py`: what is put in place on an app before it starts.
- `consumer.py`: the lanes' fetch loop, the failover guards, the fetch settings, committed offsets.
- `producer.py`: every topic tracked by the producer's metadata before its first send; its batches for the stall log.
- `recovery.py`: table recovery's state for the stall log, and the recovery watch.
- `tables.py`: tables as changelogged dicts of bytes (`Table.data`, the changelog topic).
- `messages.py`: consumer-group generations and a message's acknowledgement flag (the rebalance fence).
- `app.py`: the app, its settings and credentials, and the drain before Faust stops the consumer.
- `worker.py`: Faust's worker, its process ended within STOP_WITHIN seconds of SIGTERM whatever is stuck.
"""

from coolant.streams.faust.app import CoolantApp, build_app
from coolant.streams.faust.consumer import FetchTuning, committed_offsets, partition_count
from coolant.streams.faust.install import AGENTS_NOTICE, install
from coolant.streams.faust.messages import current_generation, generation_of, keep_unacknowledged
from coolant.streams.faust.producer import producer_state
from coolant.streams.faust.recovery import recovery_state
from coolant.streams.faust.tables import RawTable, sized
from coolant.streams.faust.version import TESTED_FAUST, UntestedFaust, check_faust, faust_version
from coolant.streams.faust.worker import OVERDUE_EXIT, STOP_WITHIN, BoundedStopWorker

__all__ = [
    "AGENTS_NOTICE",
    "OVERDUE_EXIT",
    "STOP_WITHIN",
    "TESTED_FAUST",
    "BoundedStopWorker",
    "CoolantApp",
    "FetchTuning",
    "RawTable",
    "UntestedFaust",
    "build_app",
    "check_faust",
    "committed_offsets",
    "current_generation",
    "faust_version",
    "generation_of",
    "install",
    "keep_unacknowledged",
    "partition_count",
    "producer_state",
    "recovery_state",
    "sized",
]
