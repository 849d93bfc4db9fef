"""The tripwire on the Faust boundary: every internal of faust-streaming and aiokafka the worker reaches into
still exists on the installed versions, and the upstream code the worker copies or relies on step by step is
still the code it was written against.

A version bump that moves any of it fails here, by name, in CI, instead of in a worker that loses records on
its next rebalance. Two parts:
- `REACHES`: each touched name, where it lives, and why the worker touches it. A name the boundary's modules
  reach for (a private attribute) that is not listed fails `test_every_private_reach_is_listed`.
- `FINGERPRINTS`: a digest of the normalized source (the AST, without docstrings, comments or layout) of each
  upstream function the boundary copies (the fetch loop) or whose order of calls its guards depend on. A
  changed digest means: read the new upstream code, port the change into the boundary, then update the digest.
"""

from __future__ import annotations

import ast
import asyncio
import hashlib
import importlib
import inspect
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import faust
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from faust.transport.drivers import aiokafka as faust_aiokafka

from coolant.streams.faust import TESTED_FAUST, faust_version

ROOT = Path(__file__).resolve().parents[2]
BOUNDARY = sorted((ROOT / "coolant" / "streams" / "faust").glob("*.py"))
"""The modules that hold every reach into Faust's and aiokafka's internals (coolant/streams/faust/)."""

# (owner, attribute, why). An owner is a "module:Class" path; one of `instances`' names for attributes that only
# exist once an object is built (set in `__init__`); or a "module:Class.method" path whose code must assign
# `self.<attribute>` (objects the test cannot build without a broker).
REACHES: list[tuple[str, str, str]] = [
    # the lane consumer's fetch loop (a copy of Consumer._drain_messages)
    ("faust.transport.consumer:Consumer", "_drain_messages", "the fetch loop the lanes' consumer replaces"),
    ("consumer", "callback", "the conductor: messages of topics no lane reads"),
    ("consumer", "getmany", "the fetch"),
    ("consumer", "_read_offset", "skip what was read already; record what was read"),
    ("consumer", "_add_gap", "an offset gap, committed as Faust does"),
    ("consumer", "_n_acked", "commit every broker_commit_every acks"),
    ("consumer", "_commit_every", "broker_commit_every"),
    ("consumer", "commit", "the periodic commit inside the loop"),
    ("consumer", "_stopped", "the loop's stop condition"),
    ("consumer", "diag", "Faust's CONSUMER_FETCHING flag"),
    ("consumer", "sleep", "yield to the loop after a fetch"),
    ("consumer", "should_stop", "skip a batch fetched while stopping"),
    ("consumer", "wait_first", "Faust's delivery to the conductor, abandoned when flow is suspended"),
    ("consumer", "suspend_flow", "a rebalance suspends flow"),
    ("consumer", "flow_active", "lanes drop what arrives while flow is suspended"),
    ("consumer", "consumer_stopped_errors", "the errors that end the loop on a stop"),
    ("consumer", "transport", "transport.app.should_stop"),
    ("faust.transport.consumer:CONSUMER_FETCHING", "", "the diag flag"),
    ("faust.topics:Topic", "get_topic_name", "the lanes' topics"),
    ("faust.app.base:App", "topics", "app.topics.acks_enabled_for in the fetch loop, and .add to subscribe"),
    ("faust.transport.conductor:Conductor", "acks_enabled_for", "gaps are recorded only for acked topics"),
    ("fetcher", "_stopped", "the Fetcher service's stop flag, the loop's other stop condition"),
    # the failover guards (SeekSafeConsumer, guard_flow_control) and the fetch settings (_TunedThread)
    ("faust.transport.drivers.aiokafka:Consumer", "_new_consumer_thread", "create the tuned consumer thread"),
    ("faust.transport.drivers.aiokafka:Consumer", "resume_partitions", "held back until the seek completed"),
    ("faust.transport.drivers.aiokafka:Consumer", "seek_to_committed", "rewind partitions with no commit"),
    ("faust.transport.drivers.aiokafka:Consumer", "perform_seek", "resume the held partitions after it"),
    ("faust.transport.drivers.aiokafka:Consumer", "assignment", "only partitions still assigned resume"),
    ("faust.transport.drivers.aiokafka:Consumer", "seek", "the recovery watch's rewind"),
    ("faust.transport.drivers.aiokafka:Consumer", "highwater", "the lag gauge"),
    ("consumer", "_thread", "Faust's consumer thread: seek_to_beginning, and its aiokafka consumer"),
    ("consumer", "_committed_offset", "the lag gauge and the stall watch"),
    ("faust.transport.drivers.aiokafka:AIOKafkaConsumerThread", "_create_worker_consumer", "the fetch settings"),
    ("faust.transport.drivers.aiokafka:AIOKafkaConsumerThread", "seek_to_beginning", "rewind with no commit"),
    ("faust.transport.drivers.aiokafka:AIOKafkaConsumerThread", "_consumer", "the aiokafka consumer"),
    ("aiokafka", "_fetch_max_wait_ms", "--fetch-max-wait-ms, read by the Fetcher at start"),
    ("aiokafka", "_fetch_min_bytes", "--fetch-min-bytes, read by the Fetcher at start"),
    ("aiokafka", "_subscription", "fetch positions (recovery watch, stall diagnosis)"),
    ("aiokafka", "paused", "the stall diagnosis"),
    ("aiokafka", "partitions_for_topic", "the misrouting check's partition count"),
    ("aiokafka.consumer.subscription_state:SubscriptionState", "subscription", "its assignment"),
    ("aiokafka.consumer.subscription_state:Subscription", "assignment", "the partitions' states"),
    ("aiokafka.consumer.subscription_state:Assignment", "state_value", "one partition's state"),
    ("aiokafka.consumer.subscription_state:TopicPartitionState", "position", "the fetch position"),
    ("app", "flow_control", "resume and clear are guarded"),
    ("mode.utils.queues:FlowControlEvent", "resume", "a resume of running flow must not clear the queues"),
    ("mode.utils.queues:FlowControlEvent", "clear", "clearing the queues clears the lanes too"),
    ("mode.utils.queues:FlowControlEvent", "is_active", "is flow running"),
    # table recovery (recovery watch, stall diagnosis)
    ("faust.tables.recovery:Recovery", "in_recovery", "is a recovery running"),
    ("faust.tables.recovery:Recovery", "active_remaining", "changelog partitions still to recover"),
    ("recovery", "active_offsets", "how far each got"),
    ("recovery", "active_highwaters", "the end each recovers to"),
    ("app", "tables", "app.tables.recovery"),
    ("faust.tables.manager:TableManager", "recovery", "the recovery service"),
    # tables written outside Faust's per-event path (path stores, cooldown history, repair)
    ("table", "data", "the table's in-memory store, read and written directly"),
    ("faust.tables.base:Collection", "changelog_topic", "where the path stores and the history write"),
    ("faust.tables.base:Collection", "on_recover", "forget cached states after a recovery"),
    ("faust.transport.producer:Producer", "send", "send(topic, key, value, partition, timestamp, headers)"),
    # rebalance fences
    ("app", "consumer_generation_id", "a batch fetched in another generation is stale"),
    ("faust.types.tuples:Message", "generation_id", "the generation a message was fetched in"),
    ("faust.types.tuples:Message", "acked", "a stale message of a take_events batch is marked acknowledged"),
    # the tracked producer and the producer's part of the stall line
    ("faust.transport.drivers.aiokafka:Producer", "send", "each topic tracked before its first send"),
    ("faust.transport.drivers.aiokafka:Producer", "_ensure_producer", "the aiokafka producer, started"),
    ("faust.transport.drivers.aiokafka:Producer", "_producer", "the aiokafka producer, if started"),
    ("app", "producer", "the app's producer"),
    ("producer", "client", "the aiokafka producer's Kafka client"),
    ("producer", "_message_accumulator", "its batches, for the stall line"),
    ("aiokafka.producer.message_accumulator:MessageAccumulator.__init__", "_batches", "queued batches"),
    ("aiokafka.producer.message_accumulator:MessageAccumulator.__init__", "_pending_batches", "batches in flight"),
    ("aiokafka.producer.message_accumulator:MessageBatch.__init__", "_ctime", "a batch's age"),
    ("aiokafka.producer.message_accumulator:MessageBatch", "tp", "a batch's partition"),
    ("client", "_topics", "the topics its metadata tracks"),
    ("client", "add_topic", "track a topic before its first send"),
    ("client", "cluster", "the metadata"),
    ("aiokafka.cluster:ClusterMetadata", "leader_for_partition", "a waiting batch's partition has a leader"),
    ("aiokafka.cluster:ClusterMetadata", "topics", "the topics the metadata knows"),
    # the bounded stop
    ("faust.worker:Worker", "_schedule_shutdown", "SIGTERM/SIGINT start the stop watchdog"),
    # the web server's bad requests answered in JSON (aiohttp's internals too: they come with Faust's driver)
    ("web", "_runner", "Faust's aiohttp runner, replaced before it starts"),
    ("aiohttp.web_runner:AppRunner", "_make_server", "its server's connections answer bad requests"),
    ("aiohttp.web_runner:BaseRunner.__init__", "_kwargs", "the runner's settings, kept"),
    ("aiohttp.web_server:Server.__init__", "_kwargs", "a connection's settings"),
    ("aiohttp.web_server:Server.__init__", "_loop", "a connection's loop"),
    ("aiohttp.web_protocol:RequestHandler", "handle_error", "the answer to a request aiohttp cannot handle"),
]

FINGERPRINTS: dict[str, str] = {
    # copied: LaneConsumer._drain_messages is this loop with the lanes' hand-over added
    "faust.transport.consumer:Consumer._drain_messages": "534d036692b697d3",
    # SeekSafeConsumer holds resumed stream partitions until perform_seek: both callers must resume, then seek
    "faust.tables.recovery:Recovery._resume_streams": "bde618122767c875",
    "faust.tables.recovery:Recovery.on_recovery_completed": "f101c61e28a0dfcc",
    "faust.transport.consumer:Consumer.perform_seek": "b497a1e5339310a5",
    "faust.transport.drivers.aiokafka:Consumer.seek_to_committed": "be8b69f72055ef5e",
    # guard_flow_control: resume clears the queues unconditionally
    "mode.utils.queues:FlowControlEvent.resume": "d27a80790ce27873",
    "mode.utils.queues:FlowControlEvent.clear": "ce4325c6cf17ec6e",
    # _TunedThread: the aiokafka consumer is created here and not started yet
    "faust.transport.drivers.aiokafka:AIOKafkaConsumerThread._create_worker_consumer": "f65f5b3633975b70",
    # ...and its fetch settings are read only when it starts
    "aiokafka.consumer.consumer:AIOKafkaConsumer.start": "27ef4ec8db169c4c",
    # TrackedProducer: a refresh covers the tracked topics only once one is tracked; add_topic asks for one
    "aiokafka.client:AIOKafkaClient.add_topic": "91486186055a9df8",
    "aiokafka.client:AIOKafkaClient._metadata_update": "36beb74aff3795ef",
    # BoundedStopWorker: the signal handlers' one way into a stop
    "mode.worker:Worker._schedule_shutdown": "6a0c746ee3bf9426",
    "mode.worker:Worker._on_sigterm": "c093400c140cc8dd",
    "mode.worker:Worker._on_sigint": "3f2ed9b7e17fc281",
    "aiokafka.client:AIOKafkaClient._md_synchronizer": "fb43066fd1b6755c",
    # answer_bad_requests: a server's connections are built here, with its settings
    "aiohttp.web_server:Server.__call__": "4f5b05560fea572e",
    "aiohttp.web_runner:AppRunner._make_server": "0c0e8ca7dad6ed45",
    "mode.worker:Worker._install_signal_handlers_unix": "e0e7e20bf7d02ef0",
}


def _resolve(path: str) -> Any:
    module, _, qualname = path.partition(":")
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = inspect.getattr_static(obj, part) if inspect.isclass(obj) else getattr(obj, part)
    return obj


def fingerprint(fn: Any) -> str:
    """A digest of `fn`'s code that ignores layout, comments and docstrings (its AST without them)."""
    fn = getattr(fn, "__func__", fn)  # staticmethod/classmethod
    fn = getattr(fn, "fget", fn)  # property
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return hashlib.sha256(ast.dump(tree).encode()).hexdigest()[:16]


@pytest.fixture
def instances() -> Iterator[dict[str, Any]]:
    """The objects whose attributes are set only when built: a Faust app (never started), its consumer, a table,
    the recovery service, an aiokafka consumer (never started) and a fetcher."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        app = faust.App("coolant-tripwire", broker="kafka://127.0.0.1:9", store="memory://", autodiscover=False)

        async def conductor(message: Any) -> None:
            """Never called: the consumer is not started."""

        consumer = faust_aiokafka.Consumer(
            app.transport, callback=conductor, on_partitions_revoked=None, on_partitions_assigned=None)
        table = app.Table("tripwire", partitions=1, key_type=bytes, value_type=bytes)

        async def clients() -> tuple[AIOKafkaConsumer, AIOKafkaProducer]:
            return AIOKafkaConsumer(bootstrap_servers="127.0.0.1:9"), AIOKafkaProducer(bootstrap_servers="127.0.0.1:9")

        kafka_consumer, kafka_producer = loop.run_until_complete(clients())
        yield {
            "app": app, "consumer": consumer, "table": table, "recovery": app.tables.recovery,
            "aiokafka": kafka_consumer, "fetcher": app._fetcher, "producer": kafka_producer,
            "client": kafka_producer.client, "web": app.web,
        }
    finally:
        asyncio.set_event_loop(None)
        loop.close()


@pytest.mark.parametrize(("owner", "name", "why"), REACHES, ids=[f"{o}.{n}".rstrip(".") for o, n, _ in REACHES])
def test_each_touched_internal_exists(owner: str, name: str, why: str, instances: dict[str, Any]) -> None:
    if owner in instances:
        holder = instances[owner]
        assert hasattr(holder, name), f"{type(holder).__module__}.{type(holder).__qualname__} has no {name!r} ({why})"
        return
    obj = _resolve(owner)
    if inspect.isfunction(obj):
        assert f"self.{name} =" in inspect.getsource(obj), f"{owner} no longer sets self.{name} ({why})"
    elif name:
        assert hasattr(obj, name), f"{owner} has no {name!r} ({why})"


@pytest.mark.parametrize("path", sorted(FINGERPRINTS))
def test_the_upstream_code_relied_on_is_unchanged(path: str) -> None:
    assert fingerprint(_resolve(path)) == FINGERPRINTS[path], (
        f"{path} changed upstream: read it, port the change into the Faust boundary "
        f"({', '.join(str(p.relative_to(ROOT)) for p in BOUNDARY)}), then update its fingerprint here"
    )


def _overrides(path: Path) -> set[str]:
    """Private methods the boundary's classes override on a class of Faust, mode or aiokafka (reaches too)."""
    module = importlib.import_module(".".join(path.relative_to(ROOT).with_suffix("").parts))
    out: set[str] = set()
    for cls in vars(module).values():
        if not inspect.isclass(cls) or cls.__module__ != module.__name__:
            continue
        upstream = [base for base in cls.__mro__[1:] if not base.__module__.startswith(("coolant", "builtins"))]
        out |= {name for name in vars(cls) if name.startswith("_") and not name.startswith("__") and name != "_abc_impl"
                and any(name in vars(base) for base in upstream)}
    return out


def _own_names(tree: ast.AST) -> set[str]:
    """Names the boundary defines itself (its functions, classes and attributes it assigns)."""
    own: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            own.add(node.name)
        elif isinstance(node, ast.AnnAssign | ast.Assign):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Name):
                    own.add(target.id)
                elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and \
                        target.value.id == "self":
                    own.add(target.attr)
    return own


def test_every_private_reach_is_listed() -> None:
    """A private name of Faust or aiokafka used in the boundary must be in REACHES (and so checked above)."""
    listed = {name for _, name, _ in REACHES}
    unlisted: dict[str, set[str]] = {}
    for path in BOUNDARY:
        tree = ast.parse(path.read_text())
        own = _own_names(tree)
        used = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
                and node.attr.startswith("_") and not node.attr.startswith("__")
                and not (isinstance(node.value, ast.Name) and node.value.id == "os")}
        missing = (used - own - listed) | (_overrides(path) - listed)
        if missing:
            unlisted[str(path.relative_to(ROOT))] = missing
    assert not unlisted, f"private names reached for but not in REACHES: {unlisted}"


def test_the_pinned_faust_is_a_tested_one() -> None:
    """pyproject pins the version the boundary was written and tested against; the worker refuses others."""
    pyproject = (ROOT / "pyproject.toml").read_text()
    pins = [line.split("==")[1].strip('", ') for line in pyproject.splitlines() if '"faust-streaming==' in line]
    assert pins and set(pins) <= TESTED_FAUST
    assert faust_version() in TESTED_FAUST


OUTSIDE_FORBIDDEN = frozenset({"changelog_topic", "generation_id", "consumer_generation_id", "acked", "flow_control"})
"""Faust internals with public names that only the boundary may touch (besides every private name)."""


def test_no_reach_outside_the_boundary() -> None:
    """The rest of coolant reaches Faust's internals only through coolant/streams/faust/."""
    forbidden = OUTSIDE_FORBIDDEN | {name for _, name, _ in REACHES if name.startswith("_")}
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / "coolant").rglob("*.py")):
        if path in BOUNDARY:
            continue
        tree = ast.parse(path.read_text())
        used = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)} & forbidden
        if used - _own_names(tree):
            found[str(path.relative_to(ROOT))] = used - _own_names(tree)
    assert not found, f"Faust internals touched outside coolant/streams/faust/: {found}"
