"""The one error every config problem raises: `<file>: <dotted.key>: <problem>`, shown by the CLI on one line."""

from __future__ import annotations

from coolant.errors import CoolantError


class ConfigError(CoolantError):
    """A config that cannot be used: one line `<file>: <dotted.key>: <problem>` (CLI exit 2).

    The file and key are kept as attributes so callers (tune grids, tests) need not parse text.
    """

    def __init__(self, source: str, key: str | None, problem: str) -> None:
        self.source = source
        self.key = key
        self.problem = problem.replace("\n", " ")
        super().__init__(f"{source}: {key}: {self.problem}" if key else f"{source}: {self.problem}")
