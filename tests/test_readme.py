"""The README is a product page, not a run log.

It says what coolant is, how to start it and where to read on; figures live in `docs/performance.md` (current
values) and `bench/results/` (dated runs). Every change used to append a figure, a date and a commit to it, so
it only grew and nobody could tell which figure was current. These checks keep it that way: a size limit, no
commit hash, no run date, no load average, and its first two commands are the ones that set everything up.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
LIMIT = 12 * 1024
"""Bytes: the anchors it is held against (Quix Streams', h11's) are about half of it."""

HASH = re.compile(r"(?<![\w/.-])(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![\w-])")
"""A commit hash as logs quote it: 7 to 40 lowercase hex digits, with at least one digit and one letter (so
neither a number nor a word such as "decade")."""
MONTHS = "Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec"
YEAR = r"(?:19|20)\d\d"
DATE = re.compile(
    rf"\b(?:{YEAR}-[01]\d-[0-3]\d|(?:{MONTHS})[a-z]*\.? [0-3]?\d,? {YEAR}|[0-3]?\d (?:{MONTHS})[a-z]* {YEAR})\b"
)
LOG_WORDS = re.compile(r"\bload average\b|\bsession \d+\b|\b[0-2]\d:[0-5]\d(?::[0-5]\d)? ?UTC\b", re.IGNORECASE)
FIRST_COMMANDS = ["scripts/demo", "scripts/test"]


def log_entries(text: str) -> list[str]:
    """What makes a page a run log: commit hashes, dates, load averages, sessions, clock times."""
    return [m.group(0) for pattern in (HASH, DATE, LOG_WORDS) for m in pattern.finditer(text)]


def first_commands(text: str) -> list[str]:
    """The commands of the README's first code block that runs commands (`bash`/`sh`), comments left out."""
    block = re.search(r"^```(?:bash|sh)\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    if block is None:
        return []
    return [line.split("#")[0].split()[0] for line in block.group(1).splitlines() if line.split("#")[0].strip()]


def test_the_readme_is_small() -> None:
    size = len(README.read_bytes())
    assert size <= LIMIT, f"README.md is {size} bytes (at most {LIMIT}): details go to docs/, figures to performance.md"


def test_the_readme_holds_no_run_log() -> None:
    assert log_entries(README.read_text(encoding="utf-8")) == []


def test_the_readme_starts_with_the_two_commands() -> None:
    """On a fresh machine, the README's first two commands do all the set-up: one runs the main job end to end,
    one runs the whole test suite."""
    assert first_commands(README.read_text(encoding="utf-8"))[:2] == FIRST_COMMANDS


@pytest.mark.parametrize(
    ("line", "found"),
    [
        ("measured at 378d78f on main", ["378d78f"]),
        ("main at f50ae73, load average 0.7-3.4", ["f50ae73", "load average"]),
        ("2026-12-02 01:35-01:39 UTC", ["2026-12-02", "01:39 UTC"]),
        ("a run on Dec 1, 2026 and on 2 December 2026", ["Dec 1, 2026", "2 December 2026"]),
        ("session 14 measured it", ["session 14"]),
        ("full hash 8ec4609a1b2c3d4e5f60718293a4b5c6d7e8f901", ["8ec4609a1b2c3d4e5f60718293a4b5c6d7e8f901"]),
        ("10,000 deployments in 0.19 s, 1.7x the floor, p99 40-50 ms", []),
        ("a decade of deadbeef; 1234567 records; uid 10001; port :6066; coolant.outcome/1", []),
        ("`cd-` and 32 hex digits; #40130; 2.5 GiB; 12:30 local", []),
    ],
)
def test_what_counts_as_a_run_log(line: str, found: list[str]) -> None:
    assert log_entries(line) == found


def test_the_first_commands_are_read_from_the_first_code_block() -> None:
    text = "# x\n\n```yaml\na: 1\n```\n\n```bash\nscripts/test   # tests\n\nscripts/demo\n```\n"
    assert first_commands(text) == ["scripts/test", "scripts/demo"]
    assert first_commands("no code here") == []
