"""`coolant tune`: replay one recording through a grid of policies and rank them.

`tune_command` is a plain function with typer annotations; the CLI registers it with
`app.command("tune")(tune_command)`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from coolant.config.errors import ConfigError
from coolant.config.loader import load_config
from coolant.config.yaml_read import load_yaml
from coolant.io.sources import SourceError, check_readable, read_blocks, total_size
from coolant.native_backend import BACKEND_HELP, NATIVE_NOT_BUILT, BackendError, on_python, resolve
from coolant.tuning.grid import Axis, GridPoint, build_grid, identical, parse_axis
from coolant.tuning.report import OBJECTIVES, Result, csv_text, json_bytes, rank, render_table, to_document
from coolant.tuning.report_html import render_html
from coolant.tuning.runner import Evaluation, GridRun, Interval, default_jobs
from coolant.tuning.traffic import Recording, load_recording

__all__ = ["DEFAULT_CHARTED", "TABLE_ROWS", "tune_command"]

DEFAULT_CHARTED = 3
TABLE_ROWS = 40
"""The terminal table shows at most this many policies (all are in the CSV, JSON and HTML)."""


def _error(console: Console, message: str) -> typer.Exit:
    console.print(f"coolant: error: {message}", highlight=False, markup=False, soft_wrap=True)
    return typer.Exit(2)


def _warn(console: Console, message: str) -> None:
    console.print(f"coolant: warning: {message}", highlight=False, markup=False, soft_wrap=True)


def _raw_config(path: Path) -> Any:
    # load_config has already read and validated this file; this is the raw map override() edits
    return load_yaml(path.read_text(encoding="utf-8"))


def tune_command(
    events: Annotated[
        list[str], typer.Argument(help="JSONL record files (.gz read transparently), replayed in the order given.")
    ],
    config: Annotated[
        Path, typer.Option("--config", "-c", help="LiteLLM proxy config YAML (plus `coolant:`): the base policy.")
    ],
    grid: Annotated[
        list[str] | None,
        typer.Option(
            "--grid",
            "-g",
            help="KEY=V1,V2,... one axis of the grid (repeatable; the grid is their cartesian product). "
            "KEY is a dotted config key (`model_list.*.model_info.cooldown_time`, `router_settings.allowed_fails`, "
            "`coolant.window`); values are YAML (`null`, `{}`, `{base: 10, max: 600}`), split on commas outside "
            "{...}, [...] and quotes.",
        ),
    ] = None,
    objective: Annotated[
        str,
        typer.Option(
            "--objective",
            help="Ranking: "
            + "; ".join(f"{o.name} = {o.description}" for o in OBJECTIVES.values())
            + ".",
        ),
    ] = "net",
    quiet_gap: Annotated[
        float, typer.Option(help="Seconds without failures that end an incident (for detection delay).", min=0)
    ] = 60.0,
    flap_window: Annotated[
        float, typer.Option(help="A cooldown starting within this many seconds after the previous one ended flaps.",
                            min=0)
    ] = 30.0,
    out_csv: Annotated[
        Path | None, typer.Option("--out-csv", help="Write every figure of every policy as CSV.")
    ] = None,
    out_json: Annotated[Path | None, typer.Option("--out-json", help="Write every figure as JSON.")] = None,
    html: Annotated[
        Path | None,
        typer.Option("--html", help="Write a self-contained HTML report (scatter, Pareto front, table, timelines)."),
    ] = None,
    deployment: Annotated[
        list[str] | None,
        typer.Option(
            "--deployment",
            "-d",
            help="Chart this deployment's timeline (repeatable; default: the 3 with the most failures).",
        ),
    ] = None,
    jobs: Annotated[
        int | None, typer.Option("--jobs", "-j", help="Parallel worker processes (default: the CPU count).", min=1)
    ] = None,
    progress: Annotated[
        bool | None,
        typer.Option("--progress/--no-progress", help="Progress bars (default: when stderr is a terminal)."),
    ] = None,
    backend: Annotated[str, typer.Option("--backend", help=BACKEND_HELP)] = "auto",
) -> None:
    """Replay recorded traffic through a grid of cooldown policies and rank them.

    Every policy is the config with the --grid settings applied. All of them replay the same
    records (read and decoded once, files in order) in parallel processes. For each policy:
    cooldowns by reason; time cooled per deployment; failures avoided (failed records inside a
    would-be cooldown of their deployment, start <= ts < until, the trigger itself excluded);
    successes diverted (successful records inside one: capacity given up); detection delay per
    incident (a deployment's failures with no gap over --quiet-gap; delay = first cooldown start
    within the incident minus its first failure; undetected incidents counted apart); flaps
    (cooldowns starting within --flap-window s after the previous one of the deployment ended).

    Prints a table ranked by --objective (stdout); writes CSV, JSON and HTML on request.
    Example, the lesson of scenario S1 (30 s cooldowns flap, 60 s hardly; see examples/tuning):

    \b
        coolant tune s1.jsonl.gz -c s1.yaml -g 'model_list.*.model_info.cooldown_time=30,60' --objective flaps

    Exit status: 0 when it ran (invalid records are reported), 2 on a bad config, grid, option or file.
    """
    err = Console(stderr=True)
    out = Console()
    if not out.is_terminal and "COLUMNS" not in os.environ:
        out = Console(width=200)  # a file or a pipe: do not squeeze the table into 80 columns
    obj = OBJECTIVES.get(objective)
    if obj is None:
        raise _error(err, f"--objective {objective}: unknown, choose from {', '.join(OBJECTIVES)}")
    try:
        cfg = load_config(config)
        raw = _raw_config(config)
        axes: list[Axis] = [parse_axis(arg) for arg in grid or ()]
        points = build_grid(raw, axes, os.fspath(config))
        check_readable(events)
        ran = resolve(backend)
    except (ConfigError, SourceError, BackendError) as exc:
        raise _error(err, str(exc)) from None
    shown: set[str] = set()
    for w in cfg.warnings:
        _warn(err, w)
        shown.add(w.removeprefix(cfg.source + ": "))
    for p in points:
        for w in p.config.warnings:
            tail = w.removeprefix(p.config.source + ": ")  # the same finding for every point: report it once
            if tail not in shown:
                shown.add(tail)
                _warn(err, w)
    for a, b in identical(points):
        _warn(err, f"policies {a} and {b} are identical (is every --grid key spelt right?)")

    show = progress if progress is not None else err.is_terminal
    workers = min(jobs or default_jobs(), len(points))
    started = time.perf_counter()
    try:
        lean = ran == "native" and not any(on_python(p.policy) for p in points)  # no policy needs every record
        recording = _read(events, quiet_gap, err, show, ran == "native", lean)
    except SourceError as exc:
        raise _error(err, str(exc)) from None
    read_s = time.perf_counter() - started
    for sample in recording.invalid_samples:
        _warn(err, f"invalid record {sample}")
    if recording.invalid > len(recording.invalid_samples):
        _warn(err, f"... and {recording.invalid - len(recording.invalid_samples):,} more invalid records")

    registry = points[0].policy.registry
    if deployment:
        for dep in deployment:
            if dep not in recording.traffic and registry.get(dep) is None:
                raise _error(err, f"--deployment {dep}: not in the records nor in the config")
        charted = list(dict.fromkeys(deployment))
    else:
        charted = recording.busiest(DEFAULT_CHARTED)

    evaluations = _run(points, recording, flap_window, charted, workers, err, show)
    total_s = time.perf_counter() - started
    results = [Result(p, ev.figures) for p, ev in zip(points, evaluations, strict=True)]
    ranked = rank(results, obj)

    n = recording.engine_records
    err.print(
        f"[bold]tune[/bold]: {recording.lines:,} records ({recording.invalid:,} invalid) × {len(points):,} policies "
        f"in {total_s:.2f} s (reading {read_s:.2f} s), {workers} process{'es' if workers > 1 else ''}, "
        f"{n * len(points) / max(total_s - read_s, 1e-9):,.0f} record-policies/s, "
        f"backend {_backend(ran, backend, points)}",
        highlight=False,
        soft_wrap=True,
    )
    render_table(ranked, obj, out, TABLE_ROWS)

    keys = [a.key for a in axes]
    inputs = {
        "events": list(events),
        "config": os.fspath(config),
        "grid": [f"{a.key}={','.join(a.texts)}" for a in axes],
        "quiet_gap": quiet_gap,
        "flap_window": flap_window,
    }
    totals = {
        "records": recording.lines,
        "invalid": recording.invalid,
        "ignored": recording.ignored,
        "failures": recording.failures,
        "successes": recording.successes,
        "incidents": recording.incidents,
        "first_ts": recording.first_ts,
        "last_ts": recording.last_ts,
        "deployments": len(recording.traffic),
    }
    try:
        if out_csv is not None:
            out_csv.write_text(csv_text(ranked, keys), encoding="utf-8")
        if out_json is not None:
            out_json.write_bytes(json_bytes(to_document(ranked, obj, keys, inputs, totals)))
        if html is not None:
            by_point = {p.pid: ev for p, ev in zip(points, evaluations, strict=True)}
            timelines: dict[str, list[tuple[Result, Sequence[Interval]]]] = {
                dep: [(r, by_point[r.point.pid].timelines.get(dep, [])) for r in ranked] for dep in charted
            }
            page = render_html(ranked, obj, inputs, totals, recording.traffic, timelines, flap_window, quiet_gap)
            html.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise _error(err, f"{exc.filename}: cannot write: {exc.strerror or exc}") from None


def _backend(ran: str, asked: str, points: list[GridPoint]) -> str:
    """The backend the summary names, with why a policy ran on python where native was chosen."""
    if ran == "python":
        return f"python ({NATIVE_NOT_BUILT})" if asked == "auto" else "python"
    why = [w for p in points if (w := on_python(p.policy)) is not None]
    return f"native ({len(why)} on python: {'; '.join(dict.fromkeys(why))})" if why else "native"


def _read(events: list[str], quiet_gap: float, err: Console, show: bool, native: bool, lean: bool) -> Recording:
    if not show:
        return load_recording(read_blocks(events), quiet_gap, native, lean)
    columns = (TextColumn("reading"), BarColumn(), DownloadColumn(), TimeRemainingColumn())
    with Progress(*columns, console=err, transient=True) as bar:
        task = bar.add_task("read", total=total_size(events) or None)
        return load_recording(read_blocks(events, lambda n: bar.advance(task, n)), quiet_gap, native, lean)


def _run(
    points: list[GridPoint],
    recording: Recording,
    flap_window: float,
    charted: list[str],
    workers: int,
    err: Console,
    show: bool,
) -> list[Evaluation]:
    run = GridRun([p.policy for p in points], recording.records, recording.traffic, flap_window, charted, workers,
                  recording.blocks, recording.decoded, recording.compact)
    columns = (
        TextColumn("policies"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with run, Progress(*columns, console=err, disable=not show) as bar:  # workers fork before the bar's thread
        task = bar.add_task("policies", total=len(points))
        for _ in run.completed():
            bar.advance(task)
    return run.ordered()
