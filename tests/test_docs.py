"""The pages under docs/ are the manual, not a run log, and a reader finds each of them from the index.

Figures with their dates, loads and commits belong in `docs/performance.md`'s rows (the current value) and in
`bench/results/` (every dated run); a page that quotes "load 15-31" or a commit next to a figure goes stale the
day the figure changes. The same checks as the README's (`tests/test_readme.py`), over every other page.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.test_readme import log_entries

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
INDEX = DOCS / "README.md"
FIGURES = DOCS / "performance.md"
"""The one page whose rows carry the commit (and the load) of each current figure."""
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def pages() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*") if p.is_file())


def linked(index: Path) -> set[Path]:
    """The files the index links to, resolved."""
    return {(index.parent / target).resolve() for target in LINK.findall(index.read_text(encoding="utf-8"))}


def test_the_index_links_every_page() -> None:
    missing = [str(p.relative_to(ROOT)) for p in pages() if p != INDEX and p.resolve() not in linked(INDEX)]
    assert missing == [], f"docs/README.md does not link {missing}"


def test_no_page_but_the_figures_holds_a_run_log() -> None:
    found = {str(p.relative_to(ROOT)): log_entries(p.read_text(encoding="utf-8"))
             for p in pages() if p != FIGURES and p.suffix == ".md"}
    assert {page: entries for page, entries in found.items() if entries} == {}


def test_an_unlinked_page_is_found(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("x")
    index = tmp_path / "README.md"
    index.write_text("- [a](a.md#top) and [b](../b.md)\n")
    assert linked(index) == {(tmp_path / "a.md").resolve(), (tmp_path.parent / "b.md").resolve()}
