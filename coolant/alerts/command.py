"""`coolant tail` and `coolant alerts`: typer commands over `feed`, `render`, `alerter` and `webhook`.

Plain typer-compatible functions; `coolant.cli` registers them (`app.command("tail")(tail_command)`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar
from urllib.parse import urlsplit

import aiohttp
import orjson
import typer
from aiokafka.errors import KafkaError
from rich.console import Console

from coolant.alerts import feed, render
from coolant.alerts.alerter import Alerter, AlertOptions, AlertStats
from coolant.alerts.retry import RetryPolicy
from coolant.alerts.slack import Payload
from coolant.alerts.webhook import Webhook, redact
from coolant.config.errors import ConfigError
from coolant.config.runtime import DEFAULT_KAFKA_BOOTSTRAP, KafkaSettings
from coolant.io import logs
from coolant.io.connect import ConnectConfig, ConnectionFailed, KafkaDiagnosis, kafka_problem, kafka_settings
from coolant.io.terminal import fail, say
from coolant.processors.redact import shown
from coolant.schemas import Cooldown, HealthTransition

__all__ = ["alerts_command", "tail_command"]

T = TypeVar("T")


async def _bounded(step: Callable[[], Awaitable[T]], bootstrap: str, seconds: float) -> T:
    """Run a connect step, turning "no broker" or a refused login into one `ConnectionFailed` line after at
    most `seconds` (aiokafka's own "Unable connect" log lines are kept back: they would repeat it)."""
    with KafkaDiagnosis() as diagnosis:
        try:
            async with asyncio.timeout(seconds):
                return await step()
        except TimeoutError:
            seen = kafka_problem(TimeoutError(), diagnosis)
            why = seen if seen != "TimeoutError" else f"no answer within {seconds:g} s"
            raise ConnectionFailed(f"kafka {bootstrap}: {why}") from None
        except (KafkaError, OSError) as exc:
            raise ConnectionFailed(f"kafka {bootstrap}: {kafka_problem(exc, diagnosis)}") from None


def _kafka(config: Path | None, bootstrap: str | None) -> tuple[KafkaSettings, dict[str, Any]]:
    try:
        return kafka_settings(config, bootstrap)
    except ConfigError as exc:
        raise fail(str(exc)) from None


def _topics(prefix: str, cooldowns: bool, transitions: bool) -> list[str]:
    topics = feed.topic_names(prefix, cooldowns, transitions)
    if not topics:
        raise fail("--no-cooldowns and --no-transitions leave nothing to follow")
    return topics


Bootstrap = Annotated[
    str | None,
    typer.Option("--bootstrap", envvar="KAFKA_BOOTSTRAP", show_default=False,
                 help=f"Kafka bootstrap servers (host:port[,host:port]; default: the config's, else "
                 f"{DEFAULT_KAFKA_BOOTSTRAP})."),
]
Prefix = Annotated[str, typer.Option(help="Topic name prefix (default `coolant.`).")]
Cooldowns = Annotated[bool, typer.Option("--cooldowns/--no-cooldowns", help="Follow `<prefix>cooldowns`.")]
Transitions = Annotated[
    bool, typer.Option("--transitions/--no-transitions", help="Follow `<prefix>health.transitions`.")
]
ConnectTimeout = Annotated[
    float, typer.Option(min=0.1, help="Seconds to wait for the broker before giving up (exit 2).")
]


# --------------------------------------------------------------------------------------------
# coolant tail


def tail_command(
    bootstrap: Bootstrap = None,
    topic_prefix: Prefix = "coolant.",
    from_beginning: Annotated[
        bool, typer.Option("--from-beginning", help="Start at the oldest retained record (default: only new ones).")
    ] = False,
    since: Annotated[
        str | None,
        typer.Option(metavar="DURATION", help="Start at records written this long ago: 90s, 10m, 2h, 1d."),
    ] = None,
    cooldowns: Cooldowns = True,
    transitions: Transitions = True,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line: each record as published.")]
    = False,
    connect_timeout: ConnectTimeout = 15.0,
    config: ConnectConfig = None,
) -> None:
    """Follow the cooldown and health-transition topics and print each record as it arrives.

    One line per record: deployment, group, reason, status, masked exception, start, until and what
    remains of it; health flips with their probe as evidence. With --json, each record exactly as it
    is on the topic (one per line). Messages that are not valid records are reported on stderr and
    skipped. Stop with Ctrl-C. Exit status 2 when the broker cannot be reached.
    """
    if from_beginning and since is not None:
        raise typer.BadParameter("use either --from-beginning or --since", param_hint="--since")
    start: str | float = "beginning" if from_beginning else "end"
    if since is not None:
        try:
            start = time.time() - feed.parse_duration(since)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--since") from None
    topics = _topics(topic_prefix, cooldowns, transitions)
    out = Console(highlight=False, soft_wrap=True)
    stdout = sys.stdout.buffer
    kafka, client_args = _kafka(config, bootstrap)

    def show(msg: feed.Decoded) -> None:
        rec = msg.record
        if rec is None or not isinstance(rec, Cooldown | HealthTransition):
            why = msg.invalid if rec is None else f"unexpected {rec.schema} record"
            say(f"coolant tail: warning: {msg.where}: skipped: {shown(why or '')}")
            return
        if as_json:
            value = msg.value.strip() if msg.value is not None else b""
            stdout.write((value if b"\n" not in value else orjson.dumps(orjson.loads(value))) + b"\n")
            stdout.flush()
        else:
            text = render.line(rec, time.time())
            if text is not None:
                out.print(text)

    async def run() -> None:
        async def connect() -> Any:
            partitions = await feed.ensure(topic_prefix, topics, client_args)
            return await feed.open_reader(client_args, partitions, start)

        consumer = await _bounded(connect, kafka.bootstrap_servers, connect_timeout)
        where = "from the beginning" if from_beginning else (f"since {since} ago" if since else "new records")
        say(f"coolant tail: following {', '.join(topics)} ({where}); Ctrl-C to stop")
        try:
            while True:
                for _tp, messages in (await consumer.getmany(timeout_ms=1000)).items():
                    for m in messages:
                        show(feed.decode_message(m.topic, m.partition, m.offset, m.value))
        finally:
            await consumer.stop()

    try:
        asyncio.run(run())
    except ConnectionFailed as exc:
        raise fail(str(exc)) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    except BrokenPipeError:  # `coolant tail --json | head`: the reader is gone, so are we
        with contextlib.suppress(OSError):  # as the Python docs advise: keep the final flush at exit quiet
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise typer.Exit(0) from None


# --------------------------------------------------------------------------------------------
# coolant alerts


def _summary(stats: AlertStats) -> str:
    return (
        f"coolant alerts: {stats.records:,} records, {stats.sent:,} alerts sent, {stats.suppressed:,} suppressed, "
        f"{stats.failed:,} not delivered, {stats.invalid:,} invalid records"
    )


def alerts_command(
    webhook: Annotated[
        str | None,
        typer.Option(
            "--webhook", envvar="COOLANT_ALERTS_WEBHOOK", metavar="URL",
            help="Slack-compatible incoming webhook URL (a secret: prefer the environment variable).",
        ),
    ] = None,
    bootstrap: Bootstrap = None,
    topic_prefix: Prefix = "coolant.",
    group: Annotated[
        str, typer.Option(help="Consumer group: its committed offsets let a restart resume without re-alerting.")
    ] = "coolant-alerts",
    cooldowns: Cooldowns = True,
    transitions: Transitions = True,
    suppress_period: Annotated[
        float, typer.Option(min=0.0, help="Seconds: at most one alert per deployment per period (0: off).")
    ] = 300.0,
    max_retries: Annotated[int, typer.Option(min=0, help="Retries of a failed post before giving up on it.")] = 5,
    max_delay: Annotated[
        float, typer.Option(min=0.0, help="Longest backoff and longest Retry-After honoured, in seconds.")
    ] = 60.0,
    timeout: Annotated[float, typer.Option(min=0.1, help="Seconds per webhook request.")] = 10.0,
    from_beginning: Annotated[
        bool,
        typer.Option("--from-beginning", help="A group without committed offsets starts at the oldest record "
                     "(default: only new ones)."),
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the payloads (JSON lines on stdout); post and commit nothing.")
    ] = False,
    connect_timeout: ConnectTimeout = 15.0,
    loglevel: Annotated[str, typer.Option("--loglevel", "-l", help="debug, info, warning or error.")] = "info",
    config: ConnectConfig = None,
) -> None:
    """Post an alert to a Slack-compatible webhook for every cooldown and health flip.

    Per cooldown: who (deployment, group), why (reason, status, masked exception), the evidence the
    decision saw and until when; a "cooldown over" notice at its end (later cooldowns of the same
    deployment push it back); "unhealthy" and "healthy again" for health transitions. Flapping is
    damped: at most one alert per deployment per --suppress-period, and the next one says how many were
    held back (a recovery answering an alert that went out is always sent). Failed posts are retried
    with backoff on connection errors, 5xx and 429 (Retry-After honoured), then given up and logged.
    Offsets are committed only past records whose alerts were delivered or given up on. Pending
    recovery notices and suppression counts live in memory: a restart loses them. Stop with Ctrl-C or
    SIGTERM. Exit status 2 on a bad option or when the broker cannot be reached.
    """
    if not dry_run:
        if not webhook:
            raise fail("--webhook URL (or COOLANT_ALERTS_WEBHOOK) is required unless --dry-run")
        if urlsplit(webhook).scheme not in ("http", "https") or not urlsplit(webhook).netloc:
            raise fail(f"--webhook: not an http(s) URL: {redact(webhook)}")
    level = getattr(logging, loglevel.upper(), None)
    if not isinstance(level, int):
        raise typer.BadParameter(f"unknown level {loglevel!r}", param_hint="--loglevel")
    logs.install()
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    logging.getLogger("aiokafka").setLevel(max(level, logging.WARNING))
    topics = _topics(topic_prefix, cooldowns, transitions)
    kafka, client_args = _kafka(config, bootstrap)
    opts = AlertOptions(
        client_args=client_args, topics=topics, prefix=topic_prefix, group=group,
        suppress_period=suppress_period, from_beginning=from_beginning, commit=not dry_run,
    )
    policy = RetryPolicy(max_retries=max_retries, max_delay=max_delay)
    stdout = sys.stdout.buffer

    stopping: list[int] = []

    async def run() -> AlertStats:
        task = asyncio.current_task()
        assert task is not None

        def stop(signum: int) -> None:
            stopping.append(signum)
            task.cancel()

        for signum in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().add_signal_handler(signum, stop, signum)
        async with aiohttp.ClientSession() as session:
            hook = Webhook(webhook or "", session, policy, timeout)

            async def send(payload: Payload, what: str) -> bool:
                if dry_run:
                    stdout.write(orjson.dumps(payload) + b"\n")
                    stdout.flush()
                    return True
                return (await hook.deliver(payload, what)).ok

            alerter = Alerter(opts, send)
            await _bounded(alerter.open, kafka.bootstrap_servers, connect_timeout)
            target = "stdout (dry run)" if dry_run else redact(webhook or "")
            say(f"coolant alerts: following {', '.join(topics)} as group {group}, posting to {target}")
            try:
                await alerter.serve()
            except asyncio.CancelledError:
                if not stopping:  # not our signal: let it surface
                    raise
            return alerter.stats  # Ctrl-C or SIGTERM: stopped cleanly, summarize

    try:
        stats = asyncio.run(run())
    except ConnectionFailed as exc:
        raise fail(str(exc)) from None
    except asyncio.CancelledError:  # a signal while still connecting
        if not stopping:
            raise
        raise typer.Exit(0) from None
    say(_summary(stats))
