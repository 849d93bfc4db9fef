"""The spec in the repository: every rule id the code cites is defined in `docs/spec/` and owned by one function.

The code speaks in rule ids ("G5", "V2.3", "L3", "contract §4"). A fresh clone must be able to read each of them,
and a reader must find where each one is implemented, so three things are checked against the tree as it is:
- every rule id cited in `coolant/` is defined (written `**ID.**` at the start of a paragraph or list item) in
  `docs/spec/contract.md` or `docs/spec/semantics.md`, or in `docs/outlier.md` for the outlier profile's rules;
- every rule id defined in the spec has exactly one row in `docs/spec/index.md`, and every row names a rule the
  spec defines;
- every owner in the index exists: the module file, and in it the function, class, method or name.
"contract §N" and "spec §N" citations must name a section of `contract.md` / `semantics.md`.

Everything is read as text (`ast` for the owners); nothing is imported.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "docs" / "spec"
SPEC_PAGES = ("contract.md", "semantics.md")
INDEX = SPEC / "index.md"
EXTRA_DEFINITIONS = ROOT / "docs"
"""The pages beside docs/spec may define rules of their own (the outlier profile's, in docs/outlier.md): an id
the spec does not define is accepted when one of them does, and needs no row in the index."""

RULE_ID = r"(?:PF|FP|LC|RC|[BCDEGHKLMNOPQRSTVX])[1-9][0-9]*(?:\.[1-9][0-9]*)?"
CITED = re.compile(rf"(?<![\w.§])({RULE_ID})(?!\w)")
NOT_A_RULE = re.compile(r"scenarios?\s+$|\bnoqa\b", re.IGNORECASE)
"""Scenario ids (S1-S4, the users' situations) share the S prefix with the secret rules: "scenario S1" is not one;
nor is a linter's code after `noqa` (E402, B018)."""
DEFINED = re.compile(rf"^\s*(?:[-*]\s+)?\*\*({RULE_ID})[.\s*]", re.MULTILINE)
DEFINED_LOOSE = re.compile(rf"^\s*(?:[-*]\s+|#+\s+|\|\s*)?(?:\*\*)?({RULE_ID})(?:\.|\*\*|:|\s|\|)", re.MULTILINE)
"""A page outside docs/spec keeps its own style: an id opening a line, a list item, a heading or a table row."""
INDEX_ROW = re.compile(r"^\|\s*([^|`]+?)\s*\|[^|]*\|\s*`([^`]+)`\s*\|\s*`([^`]+)`\s*\|\s*$", re.MULTILINE)
SECTION_CITED = re.compile(r"\b(contract|spec) §(\d+(?:\.\d+)*)")
HEADING = re.compile(r"^#{2,4}\s+(\d+(?:\.\d+)*)[.\s]", re.MULTILINE)


HOW_TO_FIX = (
    "a new rule: a paragraph or list item starting `**ID.**` in docs/spec/semantics.md (or contract.md, or a page "
    "of its own beside docs/spec) and a row `| ID | what | `module path` | `function` |` in docs/spec/index.md; "
    "a moved function: its new module and name in that row"
)


@dataclass(frozen=True)
class Citation:
    rule: str
    where: str
    """`path:line` of the citation."""


def citations(package: Path) -> list[Citation]:
    """Every rule id cited in the package's Python files (docstrings, comments and strings alike)."""
    found: list[Citation] = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent)
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for m in CITED.finditer(line):
                if not NOT_A_RULE.search(line[: m.start()]):
                    found.append(Citation(m.group(1), f"{rel}:{number}"))
    return found


def section_citations(package: Path) -> list[tuple[str, str, str]]:
    """(document, section, `path:line`) for every "contract §N" / "spec §N" in the package."""
    found: list[tuple[str, str, str]] = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent)
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            found += [(m.group(1), m.group(2), f"{rel}:{number}") for m in SECTION_CITED.finditer(line)]
    return found


def definitions(texts: Iterable[str], loose: bool = False) -> set[str]:
    pattern = DEFINED_LOOSE if loose else DEFINED
    return {m.group(1) for text in texts for m in pattern.finditer(text)}


def index_rows(text: str) -> list[tuple[str, str, str]]:
    """(rule id, module path, owner) per row of the index table."""
    return [(i, module, owner) for i, module, owner in INDEX_ROW.findall(text) if re.fullmatch(RULE_ID, i)]


def _names(body: Iterable[ast.stmt]) -> dict[str, ast.AST]:
    out: dict[str, ast.AST] = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out[node.name] = node
        elif isinstance(node, ast.Assign):
            out.update({t.id: node for t in node.targets if isinstance(t, ast.Name)})
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = node
    return out


def owner_exists(root: Path, module: str, owner: str) -> bool:
    """`owner` is a top-level name of `module` (a file under `root`), or `Class.member`."""
    path = root / module
    if not path.is_file():
        return False
    scope = _names(ast.parse(path.read_text(encoding="utf-8")).body)
    *outer, last = owner.split(".")
    for name in outer:
        node = scope.get(name)
        if not isinstance(node, ast.ClassDef):
            return False
        scope = _names(node.body)
    return last in scope


def problems(
    cited: Iterable[Citation],
    sections: Iterable[tuple[str, str, str]],
    spec: Mapping[str, str],
    extra: Iterable[str],
    index: str,
    root: Path,
) -> list[str]:
    """Everything wrong between the code, the spec pages (`spec`: page name -> text), the pages with rules of
    their own (`extra`) and the index: one line each."""
    defined = definitions(spec.values())
    elsewhere = definitions(extra, loose=True) - defined
    rows = index_rows(index)
    owned: dict[str, list[tuple[str, str]]] = {}
    for rule, module, owner in rows:
        owned.setdefault(rule, []).append((module, owner))
    out: list[str] = []
    first: dict[str, str] = {}
    for c in cited:
        first.setdefault(c.rule, c.where)
    for rule, where in sorted(first.items()):
        if rule not in defined and rule not in elsewhere:
            out.append(f"{where}: cites {rule}, which no spec page defines")
        elif rule in defined and rule not in owned:
            out.append(f"{where}: cites {rule}, which has no owner in docs/spec/index.md")
    out += [f"docs/spec: {rule} is defined but has no row in the index" for rule in sorted(defined - set(owned))]
    out += [f"docs/spec/index.md: {rule} has {len(o)} rows (one owner each)" for rule, o in owned.items() if len(o) > 1]
    out += [f"docs/spec/index.md: {rule} is not defined in the spec" for rule in sorted(set(owned) - defined)]
    for rule, module, owner in rows:
        if not owner_exists(root, module, owner):
            out.append(f"docs/spec/index.md: {rule}'s owner {module} {owner} does not exist")
    headings = {page: set(HEADING.findall(text)) for page, text in spec.items()}
    page_of = {"contract": "contract.md", "spec": "semantics.md"}
    for document, section, where in sections:
        if section not in headings.get(page_of[document], set()):
            out.append(f"{where}: cites {document} §{section}, which {page_of[document]} has no heading for")
    return out


def test_every_rule_the_code_cites_is_in_the_spec_and_owned() -> None:
    spec = {name: (SPEC / name).read_text(encoding="utf-8") for name in SPEC_PAGES}
    extra = [p.read_text(encoding="utf-8") for p in sorted(EXTRA_DEFINITIONS.glob("*.md"))]
    package = ROOT / "coolant"
    found = problems(citations(package), section_citations(package), spec, extra, INDEX.read_text("utf-8"), ROOT)
    assert found == [], HOW_TO_FIX


def test_the_code_cites_the_rule_families_the_spec_is_about() -> None:
    """The extraction itself works on the real tree (an empty scan would pass the test above vacuously)."""
    cited = {c.rule for c in citations(ROOT / "coolant")}
    assert {"G1", "V2.3", "L3", "E2", "D7", "X3", "PF7", "FP1", "B1", "K3"} <= cited


# --------------------------------------------------------------------------------------------
# The check can fail: a small tree and spec that break every rule once.

SPEC_TEXT = """
## 3. Rules
### 3.1 Gate
- **G1.** Unknown deployments.
- **G2.** No status.
**X6. Quotas.** The extension.
- **X6.1** Successes only.
"""
CONTRACT_TEXT = "## 1. Records\n## 4. Redis\n"
INDEX_TEXT = """
| id | rule | module | owner |
|---|---|---|---|
| G1 | unknown | `coolant/rules.py` | `gate` |
| G2 | no status | `coolant/rules.py` | `Gate.check` |
| G2 | again | `coolant/rules.py` | `gate` |
| X6 | quotas | `coolant/gone.py` | `quota` |
| G9 | stale | `coolant/rules.py` | `gate` |
"""
CODE = '''"""G1, G2 and X6.1 (contract §4, contract §2, spec §3.1), scenario S1; G8 is new; so is O7."""


def gate() -> None: ...


class Gate:
    def other(self) -> None: ...
'''


def test_a_tree_that_breaks_the_rules_is_reported(tmp_path: Path) -> None:
    package = tmp_path / "coolant"
    package.mkdir()
    (package / "rules.py").write_text(CODE)
    outlier = "| O7 | the outlier profile's own rule |\n"
    found = problems(
        citations(package),
        section_citations(package),
        {"contract.md": CONTRACT_TEXT, "semantics.md": SPEC_TEXT},
        [outlier],
        INDEX_TEXT,
        tmp_path,
    )
    assert sorted(found) == sorted(
        [
            "coolant/rules.py:1: cites G8, which no spec page defines",
            "coolant/rules.py:1: cites X6.1, which has no owner in docs/spec/index.md",
            "docs/spec: X6.1 is defined but has no row in the index",
            "docs/spec/index.md: G2 has 2 rows (one owner each)",
            "docs/spec/index.md: G9 is not defined in the spec",
            "docs/spec/index.md: G2's owner coolant/rules.py Gate.check does not exist",
            "docs/spec/index.md: X6's owner coolant/gone.py quota does not exist",
            "coolant/rules.py:1: cites contract §2, which contract.md has no heading for",
        ]
    )


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("G1-G7 and V2.3; V2 (§3.5)", ["G1", "G7", "V2.3", "V2"]),
        ("scenario S1, then S2 (redaction)", ["S2"]),
        ("ruff B018, CRC32, T0 + 30, K8s, E2E", []),
        ("import x  # noqa: E402, F401 (see G5)", []),
        ("PF7, LC2, FP1, X6.3, RC1-RC5", ["PF7", "LC2", "FP1", "X6.3", "RC1", "RC5"]),
    ],
)
def test_what_counts_as_a_citation(tmp_path: Path, line: str, expected: list[str]) -> None:
    (tmp_path / "coolant").mkdir()
    (tmp_path / "coolant" / "m.py").write_text(f"# {line}\n")
    assert [c.rule for c in citations(tmp_path / "coolant")] == expected
