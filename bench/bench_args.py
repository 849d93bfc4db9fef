"""Command-line pieces the outlier profile's benches share (`lone_primary.py`, `stream_cut.py`): one parser shape
(the docstring as the help, `--json FILE`, the prober's `--cooled-interval`) and one way to run."""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any

Rows = list[dict[str, Any]]


def parser(doc: str | None, rows: str, cooled: str = "the prober's --cooled-interval") -> argparse.ArgumentParser:
    """The bench's parser with the options every one of them takes; `rows` says what `--json` holds, `cooled` what
    `--cooled-interval` does in this bench."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", metavar="FILE", help=f"write the results there ({rows})")
    p.add_argument("--cooled-interval", type=float, default=1.0, help=cooled)
    return p


def run_bench(p: argparse.ArgumentParser, bench: Callable[[argparse.Namespace], Coroutine[Any, Any, Rows]],
        lists: Mapping[str, tuple[tuple[str, ...], str]]) -> None:
    """Parse, check each comma-separated option (`dest -> (allowed, what one item is)`), run, write `--json`."""
    a = p.parse_args()
    for dest, (allowed, what) in lists.items():
        listed(p, getattr(a, dest), allowed, what)
    write_json(a.json, asyncio.run(bench(a)))


def listed(p: argparse.ArgumentParser, value: str, allowed: tuple[str, ...], what: str) -> list[str]:
    """A comma-separated option's items, each one of `allowed` (else the parser's usage error)."""
    items = value.split(",")
    for item in items:
        if item not in allowed:
            p.error(f"unknown {what} {item!r} (one of {', '.join(allowed)})")
    return items


def write_json(path: str | None, results: Rows) -> None:
    """`--json FILE`: the results as the issue names them, one object per row."""
    if path:
        Path(path).write_text(json.dumps(results, indent=2) + "\n")
        print(f"wrote {path}")
