"""The `coolant` command line: `commands` registers every subcommand; `status` renders `coolant status`.

`main` is re-exported because the installed `coolant` script and `pyproject.toml` name `coolant.cli:main`.
"""

from coolant.cli.commands import main

__all__ = ["main"]
