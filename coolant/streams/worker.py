"""Starting a worker: check the Faust version, resolve the Kafka connection once, create missing topics, connect
Redis, build the pipeline, hand over to Faust."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import pickle
from collections.abc import MutableMapping
from dataclasses import replace
from pathlib import Path

from aiokafka.errors import KafkaError
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from coolant.config.errors import ConfigError
from coolant.config.loader import Config, load_config
from coolant.io import logs
from coolant.io.admin import ensure_topics
from coolant.io.connect import ConnectionFailed, KafkaDiagnosis, kafka_problem, redis_client
from coolant.streams import heap, metrics
from coolant.streams.app import Pipeline
from coolant.streams.connections import Connections
from coolant.streams.faust import BoundedStopWorker, check_faust
from coolant.streams.options import WorkerOptions
from coolant.topics import CHANGELOG_SUFFIX, Topics

log = logging.getLogger(__name__)

FAUST_ENV_SET_BY_COOLANT = (
    "APP_DATADIR", "APP_STORE", "BROKER_URL", "BROKER_CONSUMER_URL", "BROKER_PRODUCER_URL",
    "CONSUMER_AUTO_OFFSET_RESET", "TOPIC_PARTITIONS", "TOPIC_REPLICATION_FACTOR", "WEB_BIND", "WEB_HOST", "WEB_PORT",
    "BROKER_SESSION_TIMEOUT", "BROKER_HEARTBEAT_INTERVAL", "BROKER_REBALANCE_TIMEOUT",
)
"""Faust settings that Faust lets its environment variables override, although coolant sets them from its own
options (`--bootstrap`, `--web-port`, `--session-timeout`, ...): left in place they would silently win. Other
Faust variables (e.g. BROKER_MAX_POLL_RECORDS, CONSUMER_MAX_FETCH_SIZE) are tuning knobs, and still work."""


GC_THRESHOLD = 100_000
"""Allocations between young-generation collections (CPython's default: 700)."""


def drop_conflicting_env(environ: MutableMapping[str, str]) -> list[str]:
    """Remove (and return) the Faust variables that would override coolant's options."""
    return [name for name in FAUST_ENV_SET_BY_COOLANT if environ.pop(name, None) is not None]


def load_config_in_child(path: Path) -> Config:
    """`load_config` in a short-lived forked child, the result sent back pickled.

    Parsing YAML builds a node for every scalar (about 65 MB at 10,000 deployments, even with libyaml); freed,
    that memory stays fragmented in the worker's heap for good (about 58 MB of RSS). In a child it is returned
    with the child; the worker unpickles only the compact Config (a few MB). A config that fails to load is
    loaded again here, so the error is raised exactly as `load_config` raises it.
    """
    if not hasattr(os, "fork"):
        return load_config(path)
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: parse, send, exit without running the parent's cleanup
        status = 1
        try:
            os.close(read_fd)
            with os.fdopen(write_fd, "wb") as out:
                pickle.dump(load_config(path), out, protocol=pickle.HIGHEST_PROTOCOL)
            status = 0
        except BaseException:  # the parent loads again and reports the problem itself
            pass
        finally:
            os._exit(status)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as inp:
        data = inp.read()
    _, status = os.waitpid(pid, 0)
    if status != 0 or not data:
        return load_config(path)
    cfg = pickle.loads(data)  # our own child's output
    if not isinstance(cfg, Config):
        raise ConfigError(str(path), None, "the config loader returned no config")
    return cfg


def build_pipeline(
    cfg: Config, opts: WorkerOptions, loop: asyncio.AbstractEventLoop, shadow: Config | None = None
) -> Pipeline:
    """Topics first (their partition counts decide the tables'), then the app."""
    names = Topics(cfg.runtime.topic_prefix)
    extra = (names.cooldowns + ".shadow", names.candidates + ".shadow") if shadow is not None else ()
    k = cfg.runtime.kafka
    check_faust(opts.allow_untested_faust)  # UntestedFaust before connecting (the worker logs the allowed case)
    connections = Connections.resolve(k)  # a ConfigError (unset variable, unreadable CA file) before connecting
    with KafkaDiagnosis() as diagnosis:
        try:
            counts = loop.run_until_complete(ensure_topics(names, connections.kafka_args(), opts.partitions, extra))
        except (KafkaError, OSError) as exc:
            raise ConnectionFailed(f"kafka {k.bootstrap_servers}: {kafka_problem(exc, diagnosis)}") from None
    partitions = counts[names.outcomes]
    if counts[names.health] != partitions:
        log.warning("%s has %d partitions but %s has %d; health tables use the outcomes count",
                    names.health, counts[names.health], names.outcomes, partitions)
    sink = None
    if opts.materialize:
        from coolant.io.materializer import RedisSink

        # the sink's own backoff (logged, counted) is the only retry loop
        client = redis_client(cfg.runtime.redis, health_check_interval=10, retry=Retry(NoBackoff(), 0))
        sink = RedisSink(client, cfg.runtime.redis.key_prefix, on_write=_observe_write)
    shadow_policy = None if shadow is None else shadow.policy
    return Pipeline(cfg, replace(opts, partitions=partitions), sink, shadow_policy, connections=connections)


def _observe_write(kind: str, seconds: float) -> None:
    metrics.REDIS_WRITE_SECONDS.labels(kind).observe(seconds)


LIBRARY_LOGGERS = ("faust", "mode", "aiokafka")
"""Loggers whose INFO output (start-up and recovery tables, every service start and stop: hundreds of lines)
is for debugging Faust, not for running coolant: warnings only, unless `coolant worker -v`."""


class _StartupNoise(logging.Filter):
    """ERRORs the Kafka client logs on every first start, then retries and recovers by itself: the group
    coordinator asked for before a fresh broker has elected one, and the table changelog topics Faust is just
    creating. (The worker's own topics exist before it starts, so their absence is still reported.)"""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        if record.msg == "Group Coordinator Request failed: %s" and args:
            return type(args[0]).__name__ != "GroupCoordinatorNotAvailableError"
        if record.msg == "Topic %s not found in cluster metadata" and args:
            return not str(args[0]).endswith(CHANGELOG_SUFFIX)
        return True


def quiet_libraries() -> None:
    """Library logs at WARNING and without the start-up noise (`coolant worker` without -v)."""
    for name in LIBRARY_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    for name in ("aiokafka.consumer.group_coordinator", "aiokafka.cluster"):
        logging.getLogger(name).addFilter(_StartupNoise())


def run(cfg: Config, opts: WorkerOptions, loglevel: str = "info", shadow: Config | None = None,
        verbose: bool = False) -> None:
    """Blocks until the worker stops (SIGTERM/SIGINT shut it down cleanly). `verbose`: Faust's and the Kafka
    client's own logs at `loglevel` too (otherwise warnings only, see `quiet_libraries`)."""
    logs.install()
    logs.start_reporting(logs.hold_repeats())
    if not verbose:
        quiet_libraries()
    heap.tune()  # before any thread starts (see coolant/streams/heap.py)
    for name in drop_conflicting_env(os.environ):
        log.warning("ignoring environment variable %s: coolant sets it from its own options", name)
    if opts.keep_raw_deadletters:
        log.warning("--keep-raw-deadletters: dead letters keep invalid records UNREDACTED, secrets included "
                    "(labelled raw_unredacted); restrict who can read %s", Topics(cfg.runtime.topic_prefix).deadletter)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    pipeline = build_pipeline(cfg, opts, loop, shadow)
    # Full (generation 2) collections walk every live object and freed almost nothing in a profile of the
    # worker (records and states hold no cycles); they ran 25-150 ms each, the tail of the decision latency.
    # Collect far less often, and leave what start-up built out of every collection.
    gc.set_threshold(GC_THRESHOLD, 50, 100)
    gc.freeze()
    worker = BoundedStopWorker(pipeline.app, loop=loop, loglevel=loglevel, quiet=not verbose)
    worker.diagnose = pipeline.diagnosis
    # Faust's terminal spinner puts a DEBUG handler on the root logger so it can spin on every log
    # call, which makes every library debug() build a record: a tenth of the worker's CPU.
    worker.spinner = None
    heap.start_trimming()
    worker.execute_from_commandline()
