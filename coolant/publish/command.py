"""`coolant publish` and `coolant deployments sync`: records from files and configs onto Kafka.

Plain typer-compatible functions; `coolant.cli` registers them:

    app.command("publish")(publish_command)
    deployments = typer.Typer(help="The deployments topic: the live registry (contract §1.3).")
    deployments.command("sync")(deployments_sync_command)
    app.add_typer(deployments, name="deployments")

Unlike the gateway `Publisher`, these commands want backpressure and a verdict, not fire-and-forget:
they send with an aiokafka producer directly (`acks="all"`: operator tools favour durability over
availability), wait for every acknowledgement and exit 1 if Kafka could not take the records.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn

from coolant.config.errors import ConfigError
from coolant.config.loader import Config, load_config
from coolant.config.runtime import DEFAULT_KAFKA_BOOTSTRAP
from coolant.io.admin import create_missing
from coolant.io.connect import ConnectConfig, KafkaDiagnosis, kafka_client_args, kafka_problem, kafka_settings
from coolant.io.sources import Line, SourceError, check_readable, read_lines, total_size
from coolant.io.terminal import err, fail, say
from coolant.processors.policy import POLICY_KEY_SUFFIX
from coolant.publish.publisher import route
from coolant.schemas import Cooldown, DeploymentRecord, HealthTransition, InvalidRecord, decode, encode
from coolant.topics import Topics, TopicSpec

__all__ = [
    "PublishSummary",
    "deployment_records",
    "deployments_sync_command",
    "publish_command",
    "publish_lines",
    "read_deployments",
]

MAX_INVALID_SHOWN = 20
_TOPIC_PREFIX = re.compile(r"[A-Za-z0-9._-]*")
_RATE = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*(?:/\s*s)?\s*")



def _check_prefix(prefix: str) -> str:
    if not _TOPIC_PREFIX.fullmatch(prefix):
        raise typer.BadParameter(f"may only hold letters, digits, '.', '_' and '-', got {prefix!r}")
    return prefix


def _parse_rate(value: str | None) -> float | None:
    if value is None:
        return None
    m = _RATE.fullmatch(value)
    if m is None or float(m.group(1)) <= 0:
        raise typer.BadParameter(f"must be a number of records per second > 0, like 200 or 200/s, got {value!r}")
    return float(m.group(1))


def _specs(topics: Topics, names: Iterable[str]) -> list[TopicSpec]:
    wanted = set(names)
    return [s for s in topics.specs() if s.name in wanted]


# --------------------------------------------------------------------------------------------
# coolant publish


@dataclass(slots=True)
class PublishSummary:
    sent: Counter[str] = field(default_factory=Counter)
    """Acknowledged records per topic."""
    invalid: int = 0
    invalid_samples: list[str] = field(default_factory=list)
    failed: int = 0
    seconds: float = 0.0

    @property
    def total(self) -> int:
        return sum(self.sent.values())


async def publish_lines(
    lines: Iterable[Line],
    producer: Any,
    topics: Topics,
    *,
    rate: float | None = None,
    retime: bool = False,
    speed: float = 1.0,
    wait: bool = True,
    on_record: Callable[[int], None] | None = None,
    on_invalid: Callable[[str], None] | None = None,
    monotonic: Callable[[], float] = time.monotonic,
    wall: Callable[[], float] = time.time,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> PublishSummary:
    """Send every valid input record of `lines` to its topic, keyed by deployment_id, in file order.

    `producer` is a started `AIOKafkaProducer` (anything with its `send`). Values are the lines as
    written (unknown fields kept); with `retime` every `ts` is shifted so the first record's is now,
    and unless `wait` is False records are sent when their shifted time comes, `speed` times faster
    than recorded (timestamps keep their spacing). `rate` caps records per second. Invalid lines
    and cooldown records (outputs, not inputs) are counted and reported, never sent. The pacing reads
    `monotonic` and `wall` and waits with `sleep` (tests pass a simulated clock).
    """
    summary = PublishSummary()
    outstanding: set[asyncio.Future[Any]] = set()
    started = monotonic()
    first_ts: float | None = None
    shift = paced_from = 0.0
    sent = 0

    def done(topic: str, fut: asyncio.Future[Any]) -> None:
        outstanding.discard(fut)
        if fut.cancelled() or fut.exception() is not None:
            summary.failed += 1
        else:
            summary.sent[topic] += 1

    def invalid(problem: str) -> None:
        summary.invalid += 1
        if len(summary.invalid_samples) < MAX_INVALID_SHOWN:
            summary.invalid_samples.append(problem)
        if on_invalid is not None:
            on_invalid(problem)

    for path, lineno, data in lines:
        try:
            rec = decode(data)
        except InvalidRecord as exc:
            invalid(f"{path}:{lineno}: {exc}")
            continue
        if isinstance(rec, Cooldown | HealthTransition):
            invalid(f"{path}:{lineno}: schema: {rec.schema} is an output record, not published")
            continue
        value = data.strip()
        due = started + sent / rate if rate else 0.0
        if retime and not isinstance(rec, DeploymentRecord):
            if first_ts is None:
                first_ts = rec.ts
                shift = wall() - first_ts
                paced_from = monotonic()
            obj = orjson.loads(value)
            obj["ts"] = rec.ts + shift
            value = orjson.dumps(obj)
            if wait:
                due = max(due, paced_from + (rec.ts - first_ts) / speed)
        delay = due - monotonic()
        if delay > 0.001:
            await sleep(delay)
        topic = route(rec, topics)
        fut = await producer.send(topic, value, key=rec.deployment_id.encode())
        outstanding.add(fut)
        fut.add_done_callback(lambda f, t=topic: done(t, f))
        sent += 1
        if on_record is not None:
            on_record(sent)
    if outstanding:
        await asyncio.wait(set(outstanding))
    await asyncio.sleep(0)  # run the last done callbacks
    summary.seconds = monotonic() - started
    return summary


def publish_command(
    file: Annotated[
        str, typer.Argument(metavar="FILE|-", help="JSONL records (.gz read transparently), or - for stdin.")
    ],
    bootstrap: Annotated[
        str | None,
        typer.Option("--bootstrap", envvar="KAFKA_BOOTSTRAP", show_default=False,
                     help=f"Kafka bootstrap servers (host:port[,host:port]; default: the config's, else "
                     f"{DEFAULT_KAFKA_BOOTSTRAP})."),
    ] = None,
    topic_prefix: Annotated[
        str, typer.Option(callback=_check_prefix, help="Topic name prefix (default `coolant.`).")
    ] = "coolant.",
    rate: Annotated[
        str | None,
        typer.Option("--rate", metavar="N[/s]", help="Send at most N records per second (default: no limit)."),
    ] = None,
    retime: Annotated[
        bool,
        typer.Option(
            "--retime",
            help="Shift every `ts` so the first record is now, keeping the spacing, and send each record "
            "when its time comes (see --speed, --no-wait).",
        ),
    ] = False,
    speed: Annotated[
        float,
        typer.Option(
            min=0.001,
            help="With --retime: pace F times faster than recorded (timestamps keep their spacing, so they "
            "run ahead of the clock when F > 1).",
        ),
    ] = 1.0,
    wait: Annotated[
        bool, typer.Option("--wait/--no-wait", help="With --retime: pace in (scaled) real time, or send at once.")
    ] = True,
    progress: Annotated[
        bool | None,
        typer.Option("--progress/--no-progress", help="Progress bar (default: on when stderr is a terminal)."),
    ] = None,
    config: ConnectConfig = None,
) -> None:
    """Publish recorded outcome, health and deployment records (JSONL) to their Kafka topics.

    Each line is validated as the worker validates it; invalid lines are reported with their line
    number and skipped. Records go to `<prefix>outcomes`, `<prefix>health` or `<prefix>deployments`
    by their `schema`, keyed by `deployment_id`, in file order, with the line's JSON as the value.
    Missing topics are created as `coolant worker` creates them. Prints a summary: records sent
    per topic, invalid lines, seconds. Exit status: 0 when it ran (even with invalid lines), 1 when
    Kafka could not be reached or refused records, 2 on an unreadable file or a bad option.
    """
    per_second = _parse_rate(rate)
    if not retime and (speed != 1.0 or not wait):
        raise typer.BadParameter("--speed and --no-wait need --retime", param_hint="--speed/--no-wait")
    try:
        kafka, client_args = kafka_settings(config, bootstrap)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    try:
        check_readable([file])
    except SourceError as exc:
        raise fail(str(exc)) from None
    topics = Topics(topic_prefix)
    size = total_size([file])
    show = progress if progress is not None else err.is_terminal

    shown = Counter[str]()

    def report(problem: str) -> None:
        if shown["invalid"] < MAX_INVALID_SHOWN:
            say(f"coolant: invalid: {problem}")
        shown["invalid"] += 1

    async def run(bar: Progress | None) -> PublishSummary:
        task = bar.add_task("publish", total=size or None, records=0) if bar is not None else None

        def on_bytes(n: int) -> None:
            if bar is not None and task is not None:
                bar.advance(task, n)

        def on_record(n: int) -> None:
            if bar is not None and task is not None and not n & 0xFF:
                bar.update(task, records=n)

        await create_missing(_specs(topics, (topics.outcomes, topics.health, topics.deployments)), client_args)
        producer = AIOKafkaProducer(**client_args, acks="all", linger_ms=20)
        await producer.start()
        try:
            summary = await publish_lines(
                read_lines([file], on_bytes), producer, topics, rate=per_second, retime=retime, speed=speed,
                wait=wait, on_record=on_record, on_invalid=report,
            )
        finally:
            await producer.stop()
        if bar is not None and task is not None:
            bar.update(task, records=summary.total + summary.failed)
        return summary

    try:
        with KafkaDiagnosis() as diagnosis:
            if show:
                columns = (
                    BarColumn(), DownloadColumn(), TextColumn("{task.fields[records]:,} records"), TimeElapsedColumn()
                )
                with Progress(*columns, console=err, transient=True) as bar:
                    summary = asyncio.run(run(bar))
            else:
                summary = asyncio.run(run(None))
    except SourceError as exc:
        raise fail(str(exc)) from None
    except (KafkaError, OSError) as exc:
        raise fail(f"kafka {kafka.bootstrap_servers}: {kafka_problem(exc, diagnosis)}", 1) from None
    _print_publish_summary(summary, topics)
    if summary.failed:
        raise fail(f"kafka {kafka.bootstrap_servers}: {summary.failed} records were not acknowledged", 1)


def _print_publish_summary(s: PublishSummary, topics: Topics) -> None:
    say(f"coolant publish: {s.total:,} records sent in {s.seconds:.1f} s")
    for topic in (topics.outcomes, topics.health, topics.deployments):
        say(f"  {topic:<32} {s.sent[topic]:>10,}")
    if s.invalid > MAX_INVALID_SHOWN:
        say(f"  ({s.invalid - MAX_INVALID_SHOWN:,} more invalid lines not shown)")
    say(f"  {'invalid lines':<32} {s.invalid:>10,}")
    if s.failed:
        say(f"  {'not acknowledged':<32} {s.failed:>10,}")


# --------------------------------------------------------------------------------------------
# coolant deployments sync


def deployment_records(cfg: Config) -> list[DeploymentRecord]:
    """One `coolant.deployment/1` record per config deployment, policy keys spelled as LiteLLM spells them.

    `cooldown_time` is the deployment (`model_info`) level: records have no params level (R2).
    """
    out = []
    for entry in cfg.policy.registry.entries.values():
        policy = entry.allowed_fails_policy
        out.append(
            DeploymentRecord(
                deployment_id=entry.deployment_id,
                model_group=entry.model_group,
                wildcard=entry.wildcard,
                cooldown_time=entry.cooldown_time,
                allowed_fails=entry.allowed_fails,
                allowed_fails_policy=(
                    None if policy is None else {c + POLICY_KEY_SUFFIX: n for c, n in policy.items()}
                ),
            )
        )
    return out


async def read_deployments(
    topic: str, client_args: Mapping[str, Any], timeout: float = 30.0
) -> dict[str, DeploymentRecord]:
    """The live deployment records on the (compacted) topic: read from the beginning to its current end.

    Returns deployment_id -> its latest `DeploymentRecord`, without deleted ones (a `deleted: true`
    record or a tombstone removes the id). Invalid records are skipped. {} if the topic is missing.
    """
    admin = AIOKafkaAdminClient(**client_args)
    await admin.start()
    try:
        described = await admin.describe_topics([topic])
    finally:
        await admin.close()
    live: dict[str, DeploymentRecord] = {}
    partitions = [p["partition"] for d in described if d["error_code"] == 0 for p in d["partitions"]]
    if not partitions:  # no such topic: nothing published yet
        return live
    tps = [TopicPartition(topic, p) for p in sorted(partitions)]
    consumer = AIOKafkaConsumer(**client_args, group_id=None, enable_auto_commit=False, auto_offset_reset="earliest")
    await consumer.start()
    try:
        consumer.assign(tps)
        end = await consumer.end_offsets(tps)
        await consumer.seek_to_beginning(*tps)
        deadline = time.monotonic() + timeout
        remaining = set(tps)
        while True:
            for tp in list(remaining):
                if await consumer.position(tp) >= end[tp]:
                    remaining.discard(tp)
            if not remaining:
                return live
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: not read to its end within {timeout:.0f} s")
            batches = await consumer.getmany(*remaining, timeout_ms=500)
            for tp, messages in batches.items():
                for msg in messages:
                    if msg.offset >= end[tp]:
                        continue
                    key = msg.key.decode("utf-8", "replace") if msg.key is not None else None
                    if msg.value is None:
                        if key is not None:
                            live.pop(key, None)
                        continue
                    try:
                        rec = decode(msg.value)
                    except InvalidRecord:
                        continue
                    if not isinstance(rec, DeploymentRecord):
                        continue
                    if rec.deleted:
                        live.pop(rec.deployment_id, None)
                    else:
                        live[rec.deployment_id] = rec
    finally:
        await consumer.stop()


def deployments_sync_command(
    config: Annotated[
        Path, typer.Argument(metavar="CONFIG.yaml", help="LiteLLM proxy config YAML (its model_list).")
    ],
    bootstrap: Annotated[
        str | None,
        typer.Option(
            "--bootstrap", envvar="KAFKA_BOOTSTRAP",
            help="Kafka bootstrap servers (default: coolant.kafka.bootstrap_servers of the config).",
        ),
    ] = None,
    topic_prefix: Annotated[
        str | None,
        typer.Option(help="Topic name prefix (default: coolant.topic_prefix of the config, else `coolant.`)."),
    ] = None,
    delete_missing: Annotated[
        bool,
        typer.Option(
            "--delete-missing",
            help="Also publish `deleted: true` for deployments on the topic that the config no longer has.",
        ),
    ] = False,
) -> None:
    """Publish the config's deployments to the compacted deployments topic (the workers' live registry).

    One `coolant.deployment/1` record per `model_list` entry, keyed by its deployment id (LiteLLM's
    derived id when `model_info.id` is absent): model group, wildcard, `model_info.cooldown_time`,
    `model_info.allowed_fails` and `model_info.allowed_fails_policy` (LiteLLM's key names). A record
    replaces the whole registry entry for its id in every worker. Kafka security settings come from
    the config's `coolant.kafka` section. Exit status: 0 when every record was acknowledged, 1 when
    Kafka could not be reached or refused them, 2 on a bad config.
    """
    try:
        cfg = load_config(config)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    for warning in cfg.warnings:
        say(f"coolant: warning: {warning}")
    prefix = _check_prefix(topic_prefix) if topic_prefix is not None else cfg.runtime.topic_prefix
    kafka = cfg.runtime.kafka if not bootstrap else replace(cfg.runtime.kafka, bootstrap_servers=bootstrap)
    try:
        client_args = kafka_client_args(kafka)
    except ConfigError as exc:  # an unset os.environ/ variable, an SSL file that cannot be read
        raise fail(str(exc)) from None
    topic = Topics(prefix).deployments
    records = deployment_records(cfg)
    for entry in cfg.policy.registry.entries.values():
        if entry.cooldown_time is None and entry.params_cooldown_time is not None:
            say(
                f"coolant: warning: {entry.deployment_id}: litellm_params.cooldown_time "
                f"({entry.params_cooldown_time:g}) cannot be carried by a deployment record (R2: no params level), "
                "so workers stop using it once this record is applied; set model_info.cooldown_time to keep it"
            )

    async def run() -> tuple[list[DeploymentRecord], int]:
        await create_missing(_specs(Topics(prefix), (topic,)), client_args)
        deletions: list[DeploymentRecord] = []
        if delete_missing:
            wanted = {r.deployment_id for r in records}
            live = await read_deployments(topic, client_args)
            deletions = [
                DeploymentRecord(deployment_id=i, model_group=r.model_group, deleted=True)
                for i, r in sorted(live.items())
                if i not in wanted
            ]
        producer = AIOKafkaProducer(**client_args, acks="all")
        await producer.start()
        try:
            futures = [
                await producer.send(topic, encode(rec), key=rec.deployment_id.encode()) for rec in records + deletions
            ]
            results = await asyncio.gather(*futures, return_exceptions=True)
        finally:
            await producer.stop()
        return deletions, sum(isinstance(r, BaseException) for r in results)

    try:
        with KafkaDiagnosis() as diagnosis:
            deletions, failed = asyncio.run(run())
    except (KafkaError, OSError, TimeoutError) as exc:
        raise fail(f"kafka {kafka.bootstrap_servers}: {kafka_problem(exc, diagnosis)}", 1) from None
    if failed:
        raise fail(f"kafka {kafka.bootstrap_servers}: {failed} deployment records were not acknowledged", 1)
    say(f"coolant deployments sync: {len(records)} deployment records published to {topic}")
    for rec in deletions:
        say(f"  deleted {rec.deployment_id} ({rec.model_group})")
    if delete_missing and not deletions:
        say("  nothing to delete")

