"""The commands' stderr: one-line errors and plain messages (no rich markup: user text may hold brackets)."""

from __future__ import annotations

import typer
from rich.console import Console

err = Console(stderr=True)


def fail(message: str, code: int = 2) -> typer.Exit:
    """One line on stderr, then exit: the contract's way to report a bad config or file."""
    say(f"coolant: error: {message}")
    return typer.Exit(code)


def say(message: str) -> None:
    err.print(message, highlight=False, markup=False, soft_wrap=True)
