"""The `coolant` command line (contract §5). Each command is a thin shell over a library function."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn, TransferSpeedColumn

from coolant.config.errors import ConfigError
from coolant.config.loader import Config, load_config
from coolant.io.connect import (
    ConnectConfig,
    ConnectionFailed,
    probed_redis_problem,
    redis_client,
    redis_problem,
    runtime_settings,
    safe_url,
)
from coolant.io.sources import SourceError, check_readable, open_output, read_blocks, total_size
from coolant.io.terminal import err, fail
from coolant.native_backend import BACKEND_HELP, BackendError, resolve
from coolant.replay.report import render_summary
from coolant.replay.run import replay
from coolant.schemas import Cooldown, HealthTransition, encode

PROGRESS_MIN_BYTES = 4 * 1024 * 1024

app = typer.Typer(
    name="coolant",
    help="The shared cooldown brain for LLM gateways: fleet-wide LiteLLM cooldown decisions.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # click's plain help: paragraphs re-flowed to the terminal width and flags shown without a value type (rich
    # mode keeps every docstring line break, and labels `--help` and other flags `<bool>`)
    rich_markup_mode=None,
)


def load(config: Path, loader: Callable[[Path], Config] = load_config) -> Config:
    try:
        cfg = loader(config)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    for warning in cfg.warnings:
        err.print(f"coolant: warning: {warning}", highlight=False, markup=False, soft_wrap=True)
    return cfg


@app.command("replay")
def replay_command(
    events: Annotated[list[str], typer.Argument(help="JSONL record files (.gz read transparently), or - for stdin.")],
    config: Annotated[Path, typer.Option("--config", "-c", help="LiteLLM proxy config YAML (plus `coolant:`).")],
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write cooldown records (JSONL) here instead of stdout.")
    ] = None,
    summary_json: Annotated[
        Path | None, typer.Option("--summary-json", help="Also write the summary as JSON to this file.")
    ] = None,
    transitions_out: Annotated[
        Path | None,
        typer.Option(
            "--transitions-out",
            help="Also write the health transitions (JSONL `coolant.health_transition/1`, the records the live "
            "worker publishes on `<prefix>health.transitions`) to this file.",
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No summary on stderr.")] = False,
    progress: Annotated[
        bool | None, typer.Option("--progress/--no-progress", help="Progress bar (default: on for files over 4 MB).")
    ] = None,
    backend: Annotated[str, typer.Option("--backend", help=BACKEND_HELP)] = "auto",
) -> None:
    """Run the cooldown policy offline over recorded outcome/health records, in file order.

    Writes one `coolant.cooldown/1` JSON line per cooldown and a summary to stderr: records read,
    invalid records with their line numbers, what each record did (counted, skip reasons, absorbed),
    cooldowns by reason, and a per-deployment table. `--transitions-out` also writes the health
    transitions the live worker would publish for the same records. Invalid records are reported, never fatal:
    the exit status is 0 when the replay ran, 1 when the input held no valid record at all (an
    empty or binary file), 2 on a bad config or an unreadable file.
    """
    cfg = load(config)
    try:
        resolve(backend)
    except BackendError as exc:
        raise fail(str(exc)) from None
    try:
        check_readable(events)
        flips = open_output(transitions_out) if transitions_out is not None else None
        try:
            sink = open_output(out) if out is not None else sys.stdout.buffer
        except SourceError:
            if flips is not None:
                flips.close()
            raise
    except SourceError as exc:
        raise fail(str(exc)) from None

    def emit(cd: Cooldown) -> None:
        sink.write(encode(cd) + b"\n")

    def emit_transition(ht: HealthTransition) -> None:
        assert flips is not None
        flips.write(encode(ht) + b"\n")

    on_transition = None if flips is None else emit_transition

    size = total_size(events)
    show = progress if progress is not None else (size >= PROGRESS_MIN_BYTES and err.is_terminal)
    started = time.perf_counter()
    try:
        if show:
            columns = (BarColumn(), DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn())
            with Progress(*columns, console=err, transient=True) as bar:
                task = bar.add_task("replay", total=size or None)
                blocks = read_blocks(events, lambda n: bar.advance(task, n))
                summary = replay(blocks, cfg.policy, emit, on_transition, backend)
        else:
            summary = replay(read_blocks(events), cfg.policy, emit, on_transition, backend)
    except SourceError as exc:
        raise fail(str(exc)) from None
    finally:
        sink.flush()
        if out is not None:
            sink.close()
        if flips is not None:
            flips.close()
    seconds = time.perf_counter() - started
    if summary_json is not None:
        summary_json.write_bytes(orjson.dumps(summary.to_dict(), option=orjson.OPT_INDENT_2))
    if not quiet:
        render_summary(summary, err, seconds)
    if summary.records == summary.invalid:  # a binary, empty or wrong file: say so rather than look like success
        what = f"all {summary.invalid:,} lines are invalid" if summary.invalid else "it is empty"
        raise fail(f"no valid record in the input ({what}); nothing was replayed", code=1)


@app.command("worker")
def worker_command(
    config: Annotated[Path, typer.Option("--config", "-c", help="LiteLLM proxy config YAML (plus `coolant:`).")],
    bootstrap: Annotated[
        str | None,
        typer.Option("--bootstrap", envvar="KAFKA_BOOTSTRAP", help="Kafka bootstrap servers (host:port[,host:port])."),
    ] = None,
    redis_url: Annotated[
        str | None, typer.Option("--redis-url", envvar="REDIS_URL", help="Redis the LiteLLM routers read.")
    ] = None,
    topic_prefix: Annotated[str | None, typer.Option(help="Topic name prefix (default `coolant.`).")] = None,
    redis_key_prefix: Annotated[
        str | None, typer.Option(help="Prefix of the Redis keys, if the routers use one.")
    ] = None,
    web_port: Annotated[
        int | None, typer.Option(help="Port of /healthz, /metrics and the admin API (default 6066).")
    ] = None,
    web_bind: Annotated[str, typer.Option(help="Address the web server listens on.")] = "127.0.0.1",
    partitions: Annotated[int, typer.Option(help="Partitions for topics this worker creates.")] = 8,
    app_id: Annotated[str, typer.Option(help="Consumer group and table namespace; workers sharing it split the work.")]
    = "coolant",
    data_dir: Annotated[Path, typer.Option(help="Local data directory of this worker.")] = Path(".local/worker"),
    materialize: Annotated[
        bool, typer.Option("--materialize/--no-materialize", help="Also write cooldowns to Redis.")
    ] = True,
    shadow_config: Annotated[
        Path | None,
        typer.Option(help="Also run this candidate policy on the same traffic; it writes only "
                     "`<prefix>cooldowns.shadow`, never Redis, to compare before promoting it."),
    ] = None,
    session_timeout: Annotated[
        float,
        typer.Option(min=1.0, help="Seconds without a heartbeat before the other workers take a crashed worker's "
                     "partitions. Until then its deployments get no cooldowns, so keep it short (the broker's "
                     "group.min.session.timeout.ms, 6 s by default, is the floor); a SIGTERMed worker hands its "
                     "partitions over at once."),
    ] = 10.0,
    heartbeat_interval: Annotated[
        float,
        typer.Option(min=0.1, help="Seconds between heartbeats; also how soon a worker joins a rebalance. At most a "
                     "third of --session-timeout."),
    ] = 1.0,
    rebalance_timeout: Annotated[
        float,
        typer.Option(min=1.0, help="Seconds the group waits for every worker to rejoin a rebalance before it drops "
                     "the slow ones; bounds how long a rebalance can stall the fleet."),
    ] = 20.0,
    misrouted: Annotated[
        str,
        typer.Option(help="An input record on another partition than murmur2 of its deployment id gives (a "
                     "publisher with another partitioner, e.g. librdkafka's CRC32 default) is counted "
                     "(coolant_misrouted_total) and warned about, then `republish`ed to the right partition and "
                     "decided there, or with `count` decided where it landed."),
    ] = "republish",
    loglevel: Annotated[str, typer.Option("--loglevel", "-l", help="debug, info, warning or error.")] = "info",
    admin_rate: Annotated[
        float, typer.Option(min=0.01, help="Admin API writes per second this worker accepts (bursts of 20); more "
                            "answer 429.")
    ] = 2.0,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Faust's and the Kafka client's own logs at --loglevel too "
                           "(without it: their warnings and errors only).")
    ] = False,
    admin_token: Annotated[
        str | None,
        typer.Option("--admin-token", envvar="COOLANT_ADMIN_TOKEN", show_default=False,
                     help="Bearer token for the admin API's POST/DELETE /cooldowns (off without one). Prefer the "
                     "environment variable: a command line is visible to every user of the host."),
    ] = None,
    keep_raw_deadletters: Annotated[
        bool,
        typer.Option("--keep-raw-deadletters", help="Dead letters keep invalid records as they came, secrets "
                     "included (each labelled raw_unredacted; the error text is still redacted). By default secrets "
                     "in them are redacted (docs/input-bounds.md S2). Only on a restricted dead-letter topic."),
    ] = False,
    max_ts_ahead: Annotated[
        float,
        typer.Option(min=0, help="Dead-letter input records dated more than this many seconds ahead of this host's "
                     "clock (a publisher with a wrong clock would make later records late; B6)."),
    ] = 60.0,
    fetch_max_wait_ms: Annotated[
        int,
        typer.Option(min=1, max=1500, help="Milliseconds the broker may hold a fetch that has less than "
                     "--fetch-min-bytes: an idle worker fetches this often; a partition left out of the fetch in "
                     "flight (its earlier records not consumed yet) waits up to this long for its new records. "
                     "The default is Faust's own."),
    ] = 1500,
    fetch_min_bytes: Annotated[
        int,
        typer.Option(min=1, help="Bytes a fetch waits for (up to --fetch-max-wait-ms) before the broker answers. 1: "
                     "at the first record, the lowest latency. With producers that send a few records at a time, "
                     "e.g. 65536 with --fetch-max-wait-ms 5 spends less CPU on fetch round trips, for up to 5 ms more "
                     "per record and more CPU when idle."),
    ] = 1,
    intake: Annotated[
        str,
        typer.Option(help="How input records reach the deciders: `lanes` (the worker's own fetch loop hands them "
                     "over in batches; the default, several times faster) or `agents` (Faust's agents over its "
                     "batches: slower, no Faust internals in the fetch path). Both decide the same records the same "
                     "way."),
    ] = "lanes",
    allow_untested_faust: Annotated[
        bool,
        typer.Option("--allow-untested-faust", help="Run on a faust-streaming version coolant was not tested on. "
                     "Without it such a worker refuses to start; with it, it runs without the input lanes, the "
                     "failover guards (records may be skipped when a worker takes over partitions), the recovery "
                     "watch, the fetch settings, the lag gauge and the stall watch (docs/faust-boundary.md)."),
    ] = False,
) -> None:
    """Run the live processor: Kafka in, the cooldown topic and Redis out.

    Creates missing topics, consumes outcome, health and deployment records, decides with the
    same policy as `coolant replay`, publishes cooldown records and writes LiteLLM's
    `deployment:<id>:cooldown` keys. Serves /healthz, Prometheus /metrics and the admin API
    (docs/admin-api.md) on --web-port.
    Stop with Ctrl-C or SIGTERM: the worker finishes the batch in hand, commits and leaves its
    consumer group, so the others take its partitions at once (a rolling restart leaves no gap).
    """
    from dataclasses import replace

    from coolant.streams.faust import UntestedFaust
    from coolant.streams.options import WorkerOptions
    from coolant.streams.worker import load_config_in_child, run

    if heartbeat_interval * 3 > session_timeout:
        raise typer.BadParameter(
            f"{heartbeat_interval:g} s is more than a third of --session-timeout {session_timeout:g} s: one late "
            "heartbeat would cost the worker its partitions", param_hint="--heartbeat-interval")
    cfg = load(config, load_config_in_child)  # a worker keeps nothing of the parse (see there)
    rt = cfg.runtime
    rt = replace(
        rt,
        topic_prefix=topic_prefix if topic_prefix is not None else rt.topic_prefix,
        web_port=web_port if web_port is not None else rt.web_port,
        kafka=replace(rt.kafka, bootstrap_servers=bootstrap) if bootstrap else rt.kafka,
        redis=replace(
            rt.redis,
            url=redis_url or rt.redis.url,
            key_prefix=redis_key_prefix if redis_key_prefix is not None else rt.redis.key_prefix,
        ),
    )
    shadow = load(shadow_config, load_config_in_child) if shadow_config is not None else None
    data_dir.mkdir(parents=True, exist_ok=True)  # Faust creates only the last level (a fresh container has no .local)
    if misrouted not in ("republish", "count"):
        raise typer.BadParameter(f"must be republish or count, got {misrouted!r}", param_hint="--misrouted")
    if intake not in ("lanes", "agents"):
        raise typer.BadParameter(f"must be lanes or agents, got {intake!r}", param_hint="--intake")
    opts = WorkerOptions(
        app_id=app_id, partitions=partitions, web_port=rt.web_port, web_bind=web_bind, datadir=str(data_dir),
        materialize=materialize, admin_token=admin_token or None, admin_rate=admin_rate,
        session_timeout=session_timeout,
        heartbeat_interval=heartbeat_interval, rebalance_timeout=rebalance_timeout,
        keep_raw_deadletters=keep_raw_deadletters, max_ts_ahead=max_ts_ahead,
        misrouted="republish" if misrouted == "republish" else "count",
        fetch_max_wait_ms=fetch_max_wait_ms, fetch_min_bytes=fetch_min_bytes,
        intake="lanes" if intake == "lanes" else "agents", allow_untested_faust=allow_untested_faust,
    )
    try:
        run(replace(cfg, runtime=rt), opts, loglevel, shadow, verbose)
    except (ConfigError, UntestedFaust) as exc:  # an unset os.environ/ variable, an unreadable CA file
        raise fail(str(exc)) from None
    except ConnectionFailed as exc:  # e.g. a wrong SASL password: Kafka refused us before the worker started
        raise fail(str(exc), 1) from None


@app.command("status")
def status_command(
    redis_url: Annotated[
        str | None,
        typer.Option("--redis-url", envvar="REDIS_URL", show_default=False,
                     help="The Redis the LiteLLM routers read (default: coolant.redis.url of --config, else "
                     "redis://127.0.0.1:16379/0)."),
    ] = None,
    key_prefix: Annotated[
        str | None, typer.Option(help="Prefix of the Redis keys, if the routers use one (default: the config's).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per active cooldown instead of a table.")]
    = False,
    config: ConnectConfig = None,
) -> None:
    """Which deployments are cooled right now, why, and until when (read from Redis, as routers read it).

    Shows every `deployment:<id>:cooldown` key in force, including ones LiteLLM routers wrote
    themselves (their group and reason are unknown and shown as "-"). Exit status 2 when Redis cannot
    be read (the message names the setting to check, never a password).
    """
    import asyncio
    from dataclasses import asdict, replace

    from redis.exceptions import RedisError

    from coolant.cli.status import render
    from coolant.io.cooldowns import active_cooldowns

    try:
        settings = runtime_settings(config).redis
    except ConfigError as exc:
        raise fail(str(exc)) from None
    prefix = key_prefix if key_prefix is not None else settings.key_prefix
    settings = replace(settings, url=redis_url or settings.url, key_prefix=prefix)

    async def read() -> list[Any]:
        client = redis_client(settings)
        try:
            return await active_cooldowns(client, settings.key_prefix)
        except (RedisError, OSError) as exc:
            raise fail(f"redis {safe_url(settings.url)}: {await probed_redis_problem(exc, client)}") from None
        finally:
            await client.aclose()

    try:
        cooldowns = asyncio.run(read())
    except ConfigError as exc:
        raise fail(str(exc)) from None
    except (RedisError, OSError) as exc:
        raise fail(f"redis {safe_url(settings.url)}: {redis_problem(exc)}") from None
    if as_json:
        for c in cooldowns:
            sys.stdout.buffer.write(orjson.dumps(asdict(c)) + b"\n")
    else:
        render(cooldowns, Console())


@app.command("demo")
def demo_command(
    bootstrap: Annotated[str, typer.Option("--bootstrap", envvar="KAFKA_BOOTSTRAP", help="Kafka bootstrap servers.")]
    = "127.0.0.1:19092",
    redis_url: Annotated[str, typer.Option("--redis-url", envvar="REDIS_URL", help="Redis URL.")]
    = "redis://127.0.0.1:16379/0",
    minutes: Annotated[float, typer.Option(min=1.0, help="Minutes of simulated gateway traffic (at least 1).")] = 2.0,
    seed: Annotated[int, typer.Option(help="Simulation seed.")] = 1,
) -> None:
    """A live demo: a worker, three simulated LiteLLM pods, free-tier keys drained by coding agents.

    Needs Kafka and Redis (`scripts/demo` starts both). Shows cooldowns appearing in Redis and
    expiring, then stops the worker it started. Exit 0 when cooldowns were emitted and expired.
    """
    from coolant.sim.demo import run_demo

    raise typer.Exit(run_demo(Console(), bootstrap, redis_url, minutes, seed))


def _register_extra_commands() -> None:
    """Commands whose code lives in their own packages (the CLI stays a thin shell)."""
    from coolant.alerts.command import alerts_command, tail_command
    from coolant.probe.command import probe_command
    from coolant.publish.command import deployments_sync_command, publish_command
    from coolant.tuning.command import tune_command

    app.command("tune")(tune_command)
    app.command("publish")(publish_command)
    app.command("tail")(tail_command)
    app.command("alerts")(alerts_command)
    app.command("probe")(probe_command)
    deployments = typer.Typer(
        help="The deployments topic: the workers' live registry.", no_args_is_help=True,
        rich_markup_mode=None,
    )
    deployments.command("sync")(deployments_sync_command)
    app.add_typer(deployments, name="deployments")


_register_extra_commands()


def main() -> None:
    app()

