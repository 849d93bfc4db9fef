"""Command-line pieces the outlier profile's benches share (`lone_primary.py`, `stream_cut.py`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def listed(p: argparse.ArgumentParser, value: str, allowed: tuple[str, ...], what: str) -> list[str]:
    """A comma-separated option's items, each one of `allowed` (else the parser's usage error)."""
    items = value.split(",")
    for item in items:
        if item not in allowed:
            p.error(f"unknown {what} {item!r} (one of {', '.join(allowed)})")
    return items


def write_json(path: str | None, results: list[dict[str, Any]]) -> None:
    """`--json FILE`: the results as the issue names them, one object per row."""
    if path:
        Path(path).write_text(json.dumps(results, indent=2) + "\n")
        print(f"wrote {path}")
