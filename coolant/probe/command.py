"""`coolant probe`: the CLI shell over `coolant.probe.service.Prober`."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from coolant.config.errors import ConfigError
from coolant.io import logs
from coolant.probe.http import Engine
from coolant.probe.targets import load_targets

err = Console(stderr=True)
MIN_COOLED_INTERVAL = 0.2
"""Seconds: extra probes of a cooled deployment any closer together would only load the deployment."""


def default_prober_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def _say(message: str, kind: str = "error") -> None:
    err.print(f"coolant: {kind}: {message}", highlight=False, markup=False, soft_wrap=True)


def probe_command(
    config: Annotated[
        Path, typer.Option("--config", "-c", help="LiteLLM proxy config YAML (its model_list is probed).")
    ],
    bootstrap: Annotated[
        str | None,
        typer.Option("--bootstrap", envvar="KAFKA_BOOTSTRAP", help="Kafka bootstrap servers (host:port[,host:port])."),
    ] = None,
    redis_url: Annotated[
        str | None,
        typer.Option("--redis-url", envvar="REDIS_URL",
                     help="Redis the LiteLLM proxies read; without it LiteLLM's shared results key is not written."),
    ] = None,
    topic_prefix: Annotated[str | None, typer.Option(help="Topic name prefix (default `coolant.`).")] = None,
    redis_key_prefix: Annotated[
        str | None, typer.Option(help="Prefix of the Redis keys (a LiteLLM RedisCache namespace `ns` is `ns:`).")
    ] = None,
    interval: Annotated[float, typer.Option(min=0.5, help="Seconds per probe round (same on every prober).")] = 60.0,
    timeout: Annotated[float, typer.Option(min=0.1, help="Seconds before a probe call counts as a Timeout.")] = 10.0,
    group: Annotated[str, typer.Option(help="Consumer group of the probers; probers sharing it split the fleet.")]
    = "coolant-probers",
    prober_id: Annotated[
        str | None, typer.Option(help="This instance's id in records and logs (default hostname-pid).")
    ] = None,
    session_timeout: Annotated[
        float, typer.Option(min=6.0, help="Seconds without heartbeat before a prober's deployments move on.")
    ] = 10.0,
    concurrency: Annotated[int, typer.Option(min=1, help="Probe calls in flight at once per prober.")] = 16,
    cooled_interval: Annotated[
        float, typer.Option(min=0.0, help="Seconds between extra probes of a deployment routers see cooled (its "
                            "cooldown key in --redis-url), which recovery that probes decides from "
                            "(docs/outlier.md); 0 turns them off. Needs --redis-url.")
    ] = 1.0,
    engine: Annotated[
        str, typer.Option(help="http: OpenAI-compatible calls; litellm: litellm.ahealth_check (needs litellm's "
                          "proxy extra); auto: http where it applies, litellm for the rest when installed.")
    ] = "auto",
    once: Annotated[bool, typer.Option("--once", help="Probe one round of this prober's share, then exit.")] = False,
    metrics_port: Annotated[
        int | None,
        typer.Option(min=0, max=65535, help="Serve Prometheus /metrics (coolant_probe_*) on this port (off without "
                     "one)."),
    ] = None,
    metrics_bind: Annotated[str, typer.Option(help="Address the /metrics server listens on.")] = "127.0.0.1",
    loglevel: Annotated[str, typer.Option("--loglevel", "-l", help="debug, info, warning or error.")] = "info",
) -> None:
    """Probe every deployment once per interval across the whole fleet, however many probers run.

    Probers split the deployments through Kafka consumer-group partition assignment; a dead prober's share
    moves to the survivors after --session-timeout. A probe is one cheap call per deployment, by its
    `model_info.mode`: chat with max_tokens 1 (the default), a one-word embedding, or a completion.
    Publishes `coolant.health/1` records to `<prefix>health` and keeps LiteLLM's shared
    `health_check_results` Redis key fresh, so proxies running with `use_shared_health_check` probe nothing
    themselves. Wildcard deployments are not probed. The worker turns the records into LiteLLM's health-state
    map and `<prefix>health.transitions`, and into `health_check` cooldowns only with
    `coolant.health.cooldown: true` in its config (docs/probe.md). With --redis-url, a deployment routers see
    cooled is also probed every --cooled-interval seconds: under `coolant.recovery` those probes hold the
    cooldown or release it early (docs/outlier.md). Stop with Ctrl-C or SIGTERM.
    """
    from dataclasses import replace

    from coolant.io.connect import ConnectionFailed, kafka_client_args, kafka_preflight, redis_preflight
    from coolant.probe.service import Prober, ProbeSettings

    if 0 < cooled_interval < MIN_COOLED_INTERVAL:
        _say(f"--cooled-interval must be 0 (off) or at least {MIN_COOLED_INTERVAL:g} s, got {cooled_interval:g}")
        raise typer.Exit(2)
    if engine not in ("http", "litellm", "auto"):
        _say(f"--engine must be http, litellm or auto, got {engine!r}")
        raise typer.Exit(2)
    logs.install()
    logging.basicConfig(level=loglevel.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("aiokafka").setLevel(logging.WARNING)
    try:
        cfg, targets, notes = load_targets(config)
    except ConfigError as exc:
        _say(str(exc))
        raise typer.Exit(2) from None
    for warning in cfg.warnings:
        _say(warning, "warning")
    for note in notes:
        _say(note, "note")
    rt = cfg.runtime
    kafka = replace(rt.kafka, bootstrap_servers=bootstrap) if bootstrap else rt.kafka
    engine_choice: Engine = "http" if engine == "http" else ("litellm" if engine == "litellm" else "auto")
    settings = ProbeSettings(
        prober_id=prober_id or default_prober_id(),
        interval=interval,
        timeout=timeout,
        group=group,
        topic_prefix=topic_prefix if topic_prefix is not None else rt.topic_prefix,
        redis=None if not redis_url else replace(
            rt.redis, url=redis_url,
            key_prefix=redis_key_prefix if redis_key_prefix is not None else rt.redis.key_prefix,
        ),
        session_timeout=session_timeout,
        concurrency=concurrency,
        engine=engine_choice,
        once=once,
        cooled_interval=cooled_interval or None,
    )
    try:
        client_args = kafka_client_args(kafka)
    except ConfigError as exc:
        _say(str(exc))
        raise typer.Exit(2) from None

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await kafka_preflight(kafka, client_args)
        if settings.redis is not None:
            await redis_preflight(settings.redis)
        if metrics_port is None:
            await Prober(targets, settings, client_args).run(stop)
            return
        from coolant.probe.metrics import ProbeMetrics

        metrics = ProbeMetrics()
        runner = await metrics.serve(metrics_port, metrics_bind)
        try:
            await Prober(targets, settings, client_args, on_round=metrics.record).run(stop)
        finally:
            await runner.cleanup()

    try:
        asyncio.run(main())
    except ConfigError as exc:  # e.g. an unreadable ssl_cafile of coolant.redis
        _say(str(exc))
        raise typer.Exit(2) from None
    except ConnectionFailed as exc:  # a wrong password, a certificate that does not verify, nothing listening
        _say(str(exc))
        raise typer.Exit(1) from None
    except ImportError as exc:
        _say(f"--engine {engine} needs litellm: {exc}")
        raise typer.Exit(2) from None
