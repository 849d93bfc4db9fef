"""The house: every folder of `coolant/` imports only what the README's layout table allows, and nothing is circular.

The table (`## Layout` in README.md: folder, what it holds, may import, third-party) is the one statement of the
rules; this test reads it rather than keeping a copy, so the README cannot drift from the tree. Imports are read
with `ast` (nothing is imported), all of them: top-level, lazy (inside a function) and `TYPE_CHECKING` ones, since a
lazy import is still a dependency (and usually the sign of a cycle someone worked around).
"""

from __future__ import annotations

import ast
import re
import sys
import textwrap
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "coolant"
HEADER = re.compile(r"^\|\s*folder\s*\|\s*what it holds\s*\|\s*may import\s*\|\s*third-party\s*\|\s*$")
TICKED = re.compile(r"`([^`]+)`")


@dataclass(frozen=True)
class Rule:
    """One row of the layout table."""

    may_import: frozenset[str] | None
    """Folders this one may import; None for "every folder"."""
    third_party_any: bool
    """True: any third-party package except `third_party`; False: only `third_party`."""
    third_party: frozenset[str]


def read_table(readme: str) -> dict[str, Rule]:
    """The layout table's rows by folder (`errors.py` is the unit `errors`)."""
    lines = readme.splitlines()
    start = next((i for i, line in enumerate(lines) if HEADER.match(line)), None)
    if start is None:
        raise AssertionError("README.md has no layout table (| folder | what it holds | may import | third-party |)")
    rules: dict[str, Rule] = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4:
            raise AssertionError(f"layout table row without 4 cells: {line}")
        folder, _holds, may, third = cells
        name = TICKED.fullmatch(folder)
        if name is None:
            raise AssertionError(f"layout table: the folder cell must be one `name`: {folder}")
        unit = name.group(1).removesuffix("/").removesuffix(".py")
        everything = "every folder" in may
        rules[unit] = Rule(
            may_import=None if everything else frozenset(TICKED.findall(may)),
            third_party_any=third.startswith("any"),
            third_party=frozenset(TICKED.findall(third)),
        )
    return rules


def modules(src: Path) -> dict[str, Path]:
    """Every module under `src/coolant` by dotted name (a package by its own name)."""
    out: dict[str, Path] = {}
    for path in sorted((src / PACKAGE).rglob("*.py")):
        parts = path.relative_to(src).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imports(name: str, path: Path, known: Iterable[str]) -> Iterator[tuple[int, str]]:
    """(line, imported module) for every import in the module, relative ones resolved; `from pkg import mod`
    names the submodule when there is one."""
    known = set(known)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in known]
            if subs:
                for sub in subs:
                    yield node.lineno, sub
            if len(subs) < len(node.names):
                yield node.lineno, base


def unit_of(module: str) -> str | None:
    """The folder (or root module) a coolant module belongs to; None for the package itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components with more than one member (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def violations(src: Path, rules: Mapping[str, Rule]) -> list[str]:
    """Everything in the tree at `src` that breaks the table: one line each, with file and line."""
    mods = modules(src)
    problems: list[str] = []
    units = {u for m in mods if (u := unit_of(m)) is not None}
    problems += [f"coolant/{u}: not in the README's layout table" for u in sorted(units - set(rules))]
    problems += [f"layout table names {u}, which is not in coolant/" for u in sorted(set(rules) - units)]
    module_graph: dict[str, set[str]] = {m: set() for m in mods}
    unit_graph: dict[str, set[str]] = {u: set() for u in units}
    for name, path in mods.items():
        here = unit_of(name)
        where = path.relative_to(src)
        for line, target in imports(name, path, mods):
            top = target.split(".")[0]
            if top == PACKAGE:
                if target in mods and target != name:
                    module_graph[name].add(target)
                there = unit_of(target)
                if here is None or there is None or there == here:
                    continue
                unit_graph[here].add(there)
                rule = rules.get(here)
                if rule is not None and rule.may_import is not None and there not in rule.may_import:
                    problems.append(f"{where}:{line}: {here} imports {target} ({there} is not in its may-import cell)")
            elif top not in sys.stdlib_module_names and here is not None and (rule := rules.get(here)) is not None:
                allowed = top not in rule.third_party if rule.third_party_any else top in rule.third_party
                if not allowed:
                    problems.append(f"{where}:{line}: {here} imports the third-party {top}")
    problems += [f"import cycle between modules: {' <-> '.join(c)}" for c in cycles(module_graph)]
    problems += [f"import cycle between folders: {' <-> '.join(c)}" for c in cycles(unit_graph)]
    return problems


@pytest.fixture(scope="module")
def rules() -> dict[str, Rule]:
    return read_table((ROOT / "README.md").read_text(encoding="utf-8"))


def test_the_tree_follows_the_readme_table(rules: dict[str, Rule]) -> None:
    assert violations(ROOT, rules) == []


def test_the_table_itself_points_one_way(rules: dict[str, Rule]) -> None:
    allowed = {u: (set(rules) - {u}) if r.may_import is None else set(r.may_import) for u, r in rules.items()}
    assert cycles(allowed) == []
    assert {u for names in allowed.values() for u in names} <= set(rules), "a may-import cell names an unknown folder"


def test_only_the_live_shell_imports_faust(rules: dict[str, Rule]) -> None:
    """The table's promise behind "no feature package pays for Faust" (and the pure core imports nothing)."""
    for unit, rule in rules.items():
        allows_faust = ("faust" not in rule.third_party) if rule.third_party_any else ("faust" in rule.third_party)
        assert allows_faust == (unit == "streams"), unit
    for unit in ("processors", "errors"):
        assert not rules[unit].third_party_any and not rules[unit].third_party, unit


ACROSS_FOLDERS = frozenset({"integration", "containers", "litellm", "data", "support"})
"""Test folders that follow no single package folder (docs/development.md says what each holds)."""
TOP_LEVEL_TESTS = frozenset({"test_vectors.py", "test_layout.py", "test_spec.py", "test_readme.py", "test_docs.py"})


def test_the_tests_mirror_the_package(rules: dict[str, Rule]) -> None:
    tests = ROOT / "tests"
    folders = {p.name for p in tests.iterdir() if p.is_dir() and not p.name.startswith((".", "__"))}
    assert folders - set(rules) - ACROSS_FOLDERS == set(), "a tests/ folder with no coolant/ folder of that name"
    assert {p.name for p in tests.glob("test_*.py")} <= TOP_LEVEL_TESTS, "a test module outside tests/<folder>/"


# --------------------------------------------------------------------------------------------
# The check can fail: a small tree that breaks every rule once.

TABLE = """
| folder | what it holds | may import | third-party |
|---|---|---|---|
| `errors.py` | the root | — | none |
| `schemas/` | records | — | `msgspec` |
| `processors/` | the policy | `schemas` | none |
| `publish/` | publishing | `schemas`, `processors` | any except `faust` |
| `streams/` | the shell | `schemas`, `processors`, `publish` | any |
| `gone/` | a folder the tree lacks | — | none |
"""

FILES = {
    "errors.py": "class CoolantError(Exception): ...\n",
    "schemas/__init__.py": "import msgspec\nimport json\n",
    "processors/__init__.py": "",
    "processors/a.py": "from coolant.processors import b\nimport redis\n",
    "processors/b.py": "from . import a\n",
    "publish/__init__.py": "",
    "publish/sender.py": "def send():\n    import faust\n    from coolant.streams.app import App\n",
    "streams/__init__.py": "",
    "streams/app.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from coolant.publish import sender\n",
    "extra/__init__.py": "",
}


def test_a_tree_that_breaks_the_rules_is_reported(tmp_path: Path) -> None:
    for rel, text in {"__init__.py": "", **FILES}.items():
        path = tmp_path / PACKAGE / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    found = violations(tmp_path, read_table(TABLE))
    expected = [
        "coolant/extra: not in the README's layout table",
        "layout table names gone, which is not in coolant/",
        "coolant/processors/a.py:2: processors imports the third-party redis",
        "coolant/publish/sender.py:2: publish imports the third-party faust",
        "coolant/publish/sender.py:3: publish imports coolant.streams.app (streams is not in its may-import cell)",
        "import cycle between modules: coolant.processors.a <-> coolant.processors.b",
        "import cycle between modules: coolant.publish.sender <-> coolant.streams.app",
        "import cycle between folders: publish <-> streams",
    ]
    assert sorted(found) == sorted(expected)


def test_a_table_that_allows_a_cycle_is_caught() -> None:
    table = read_table(TABLE.replace("| `schemas/` | records | — |", "| `schemas/` | records | `processors` |"))
    allowed = {u: set(r.may_import or ()) for u, r in table.items()}
    assert cycles(allowed) == [["processors", "schemas"]]
