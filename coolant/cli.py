"""The `coolant` command line (contract §5). Each command is a thin shell over a library function."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated

import orjson
import typer
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn, TransferSpeedColumn

from coolant.config import Config, ConfigError, load_config
from coolant.replay import replay
from coolant.report import render_summary
from coolant.schemas import Cooldown, encode
from coolant.sources import SourceError, check_readable, read_lines, total_size

PROGRESS_MIN_BYTES = 4 * 1024 * 1024

app = typer.Typer(
    name="coolant",
    help="The shared cooldown brain for LLM gateways: fleet-wide LiteLLM cooldown decisions.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err = Console(stderr=True)


def fail(message: str, code: int = 2) -> typer.Exit:
    """One line on stderr, then exit: the contract's way to report a bad config or file."""
    err.print(f"coolant: error: {message}", highlight=False, markup=False)
    return typer.Exit(code)


def load(config: Path) -> Config:
    try:
        cfg = load_config(config)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    for warning in cfg.warnings:
        err.print(f"coolant: warning: {warning}", highlight=False, markup=False)
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
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No summary on stderr.")] = False,
    progress: Annotated[
        bool | None, typer.Option("--progress/--no-progress", help="Progress bar (default: on for files over 4 MB).")
    ] = None,
) -> None:
    """Run the cooldown policy offline over recorded outcome/health records, in file order.

    Writes one `coolant.cooldown/1` JSON line per cooldown and a summary to stderr: records read,
    invalid records with their line numbers, what each record did (counted, skip reasons, absorbed),
    cooldowns by reason, and a per-deployment table. Invalid records are reported, never fatal:
    the exit status is 0 when the replay ran, 2 on a bad config or an unreadable file.
    """
    cfg = load(config)
    try:
        check_readable(events)
    except SourceError as exc:
        raise fail(str(exc)) from None
    sink = open(out, "wb") if out is not None else sys.stdout.buffer  # noqa: SIM115 - closed below

    def emit(cd: Cooldown) -> None:
        sink.write(encode(cd) + b"\n")

    size = total_size(events)
    show = progress if progress is not None else (size >= PROGRESS_MIN_BYTES and err.is_terminal)
    started = time.perf_counter()
    try:
        if show:
            columns = (BarColumn(), DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn())
            with Progress(*columns, console=err, transient=True) as bar:
                task = bar.add_task("replay", total=size or None)
                summary = replay(read_lines(events, lambda n: bar.advance(task, n)), cfg.policy, emit)
        else:
            summary = replay(read_lines(events), cfg.policy, emit)
    except SourceError as exc:
        raise fail(str(exc)) from None
    finally:
        sink.flush()
        if out is not None:
            sink.close()
    seconds = time.perf_counter() - started
    if summary_json is not None:
        summary_json.write_bytes(orjson.dumps(summary.to_dict(), option=orjson.OPT_INDENT_2))
    if not quiet:
        render_summary(summary, err, seconds)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
