"""One root: every coolant exception a command turns into a one-line error (`fail(...)`) is a `CoolantError`.

Read from the commands' code: each `except` clause whose handler calls `fail`, with its exception names resolved
in the module, so a new error class caught that way is checked without this test knowing about it.
"""

from __future__ import annotations

import ast
import builtins
import importlib
from pathlib import Path
from types import ModuleType

import pytest

from coolant.errors import CoolantError

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = sorted(
    ".".join(p.relative_to(ROOT).with_suffix("").parts)
    for p in [ROOT / "coolant" / "cli" / "commands.py", *(ROOT / "coolant").glob("*/command.py")]
)


def _names(node: ast.expr | None) -> list[ast.expr]:
    if node is None:
        return []
    return list(node.elts) if isinstance(node, ast.Tuple) else [node]


def _scope(module: ModuleType, tree: ast.Module) -> dict[str, object]:
    """The module's globals, the builtins, and what its function-level imports bind."""
    names: dict[str, object] = {**vars(builtins), **vars(module)}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            source = importlib.import_module(node.module)
            for alias in node.names:
                names.setdefault(alias.asname or alias.name, getattr(source, alias.name))
    return names


def _resolve(scope: dict[str, object], node: ast.expr) -> object:
    if isinstance(node, ast.Name):
        return scope[node.id]
    assert isinstance(node, ast.Attribute), ast.dump(node)
    return getattr(_resolve(scope, node.value), node.attr)


def one_line_errors(module_name: str) -> dict[str, type[BaseException]]:
    """The exception classes the module's `fail`-calling handlers catch, by their spelling in the code."""
    module = importlib.import_module(module_name)
    tree = ast.parse(Path(module.__file__ or "").read_text(encoding="utf-8"))
    scope = _scope(module, tree)
    caught: dict[str, type[BaseException]] = {}
    for handler in ast.walk(tree):
        if not isinstance(handler, ast.ExceptHandler):
            continue
        calls = [n for stmt in handler.body for n in ast.walk(stmt) if isinstance(n, ast.Call)]
        if not any(isinstance(c.func, ast.Name) and c.func.id == "fail" for c in calls):
            continue
        for name in _names(handler.type):
            cls = _resolve(scope, name)
            assert isinstance(cls, type) and issubclass(cls, BaseException), ast.unparse(name)
            caught[ast.unparse(name)] = cls
    return caught


@pytest.mark.parametrize("module_name", COMMANDS)
def test_coolant_errors_shown_as_one_line_share_the_root(module_name: str) -> None:
    caught = one_line_errors(module_name)
    ours = {n: c for n, c in caught.items() if c.__module__.split(".")[0] == "coolant"}
    assert {n: c for n, c in ours.items() if not issubclass(c, CoolantError)} == {}


def test_the_commands_do_turn_errors_into_lines() -> None:
    """The check reads something: the commands catch coolant's config, file and connection errors."""
    caught = {c.__name__ for m in COMMANDS for c in one_line_errors(m).values()}
    assert {"ConfigError", "SourceError", "ConnectionFailed"} <= caught
