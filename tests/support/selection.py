"""Not importing a test module that `-m` deselects whole: `-m 'not integration'` would otherwise import every
integration module only to drop its tests, and some import LiteLLM (seconds of the service-free run's set-up, in
each pytest-xdist process).

A module is deselected whole when its own `pytestmark` (read from its source, not imported) makes the `-m`
expression false whatever other markers a test in it carries. Anything this cannot read for certain (no
module-level `pytestmark`, markers written another way, keyword arguments in the expression) is collected as usual,
so this never drops a test that `-m` would select.
"""

from __future__ import annotations

import ast
import itertools
from collections import OrderedDict
from pathlib import Path
from typing import Any

from _pytest.mark.expression import Expression

MAX_FREE = 8
"""Identifiers of the expression besides the module's markers, at most (each is tried true and false)."""


def module_markers(source: str) -> frozenset[str]:
    """The marker names of a module's top-level `pytestmark` (`pytest.mark.NAME` or `pytest.mark.NAME(...)`, alone or
    in a list or tuple); empty when it has none."""
    names: set[str] = set()
    if "pytestmark" not in source:  # most modules: no parse (each pytest-xdist process reads every module)
        return frozenset()
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        else:
            continue
        if not any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in targets) or node.value is None:
            continue
        names = set()  # the last assignment is the one pytest sees
        for sub in ast.walk(node.value):
            if (isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Attribute) and sub.value.attr == "mark"
                    and isinstance(sub.value.value, ast.Name) and sub.value.value.id == "pytest"):
                names.add(sub.attr)
    return frozenset(names)


class _Unsure(Exception):
    """The expression asks about a marker's arguments: not decided from names alone."""


def deselects_all(expression: Expression, markers: frozenset[str]) -> bool:
    """True when `expression` is false for every test carrying at least `markers`: for each truth value of the
    expression's other identifiers (a test may carry any of them, or not)."""
    free = sorted(expression.idents() - markers)
    if not markers or len(free) > MAX_FREE:
        return False
    for values in itertools.product((False, True), repeat=len(free)):
        carried = markers | {name for name, value in zip(free, values, strict=True) if value}

        def matcher(name: str, /, **kwargs: object) -> bool:
            if kwargs:
                raise _Unsure
            return name in carried  # noqa: B023 - called within this iteration only

        try:
            if expression.evaluate(matcher):
                return False
        except _Unsure:
            return False
    return True


def ignored(path: Path, markexpr: str) -> bool:
    """True when the test module at `path` need not be imported under `-m markexpr`."""
    if not markexpr or not (path.name.startswith("test_") and path.suffix == ".py"):
        return False
    try:
        markers = module_markers(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return False  # collected as usual: pytest reports what is wrong with it
    return deselects_all(Expression.compile(markexpr), markers)


LITELLM_FILES = "test_litellm_"
"""The test modules that import LiteLLM (when a test runs: tests/support/lazy.py) carry this in their names."""


def service_free(markexpr: str) -> bool:
    """True when `-m markexpr` leaves out every `integration` test."""
    return bool(markexpr) and deselects_all(Expression.compile(markexpr), frozenset({"integration"}))


def scope(nodeid: str) -> str:
    """A test's unit of work for pytest-xdist in a service-free run: its file, as `--dist loadfile` has it, except that
    the LiteLLM test modules are one unit, so that one process imports LiteLLM, not each."""
    path = nodeid.split("::", 1)[0]
    return LITELLM_FILES if path.rpartition("/")[2].startswith(LITELLM_FILES) else path


def litellm_first(workqueue: OrderedDict[str, Any]) -> None:
    """Put the LiteLLM unit (`scope`) at the head of pytest-xdist's queue of units, if it is still there: it is the
    longest (LiteLLM's import and the tests that drive a real Router), and a long unit handed out last leaves the
    other process idle at the end. pytest-xdist orders the units by their number of tests, where it comes late."""
    if LITELLM_FILES in workqueue:
        workqueue.move_to_end(LITELLM_FILES, last=False)
