"""Which test modules `-m` lets the run skip importing (tests/support/selection.py), and the documented quick
command's selection: no service-needing or slow test in it, and CI's command selects everything."""

from __future__ import annotations

import re
import shlex
from collections import OrderedDict
from pathlib import Path

import pytest
from _pytest.mark.expression import Expression

from tests.support.selection import (
    LITELLM_FILES,
    deselects_all,
    ignored,
    litellm_first,
    module_markers,
    scope,
    service_free,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("source", "markers"), [
    ("pytestmark = pytest.mark.integration\n", {"integration"}),
    ("pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]\n", {"integration", "timeout"}),
    ("pytestmark: Any = (pytest.mark.slow,)\n", {"slow"}),
    ("pytestmark = pytest.mark.integration\npytestmark = pytest.mark.slow\n", {"slow"}),
    ("if x:\n    pytestmark = pytest.mark.integration\n", set()),  # not at the top level: not read
    ("@pytest.mark.integration\ndef test_x() -> None: ...\n", set()),  # a test's own marker is not the module's
    ("from pytest import mark\npytestmark = mark.integration\n", set()),  # written another way: not read
])
def test_module_markers(source: str, markers: set[str]) -> None:
    assert module_markers(source) == markers


@pytest.mark.parametrize(("expression", "markers", "deselected"), [
    ("not integration", {"integration"}, True),
    ("not integration", {"integration", "timeout"}, True),
    ("not integration", {"timeout"}, False),
    ("not integration", set(), False),
    ("not integration and not slow", {"slow"}, True),
    ("not (integration or slow)", {"integration"}, True),
    ("integration", {"integration"}, False),
    ("integration or not slow", {"integration"}, False),
    ("not integration or slow", {"integration"}, False),  # a test in it may also carry `slow`
    ("not integration", {"skipif"}, False),
    ("not timeout(seconds=5)", {"timeout"}, False),  # a marker's arguments: not decided
])
def test_deselects_all(expression: str, markers: set[str], deselected: bool) -> None:
    assert deselects_all(Expression.compile(expression), frozenset(markers)) is deselected


def test_only_test_modules_deselected_whole_are_ignored(tmp_path: Path) -> None:
    marked = tmp_path / "test_marked.py"
    marked.write_text("import pytest\npytestmark = pytest.mark.integration\n")
    helper = tmp_path / "helper.py"
    helper.write_text(marked.read_text())
    broken = tmp_path / "test_broken.py"
    broken.write_text("pytestmark = (\n")
    assert ignored(marked, "not integration")
    assert not ignored(marked, "")  # no -m: everything is collected
    assert not ignored(marked, "integration")
    assert not ignored(helper, "not integration")  # not a test module
    assert not ignored(broken, "not integration")  # collected, so that pytest reports the error


def _quick_command() -> list[str]:
    """The service-free quick command docs/development.md gives (the line marked `service-free, quick`)."""
    text = (ROOT / "docs" / "development.md").read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if line.rstrip().endswith("# service-free, quick")]
    assert len(lines) == 1, lines
    words = shlex.split(lines[0].partition("#")[0])
    return words[words.index("pytest") + 1:]  # pytest's own arguments


def test_the_documented_quick_command_leaves_out_every_service_and_slow_test() -> None:
    argv = _quick_command()
    assert argv[argv.index("--hypothesis-profile") + 1] == "quick"
    expression = Expression.compile(argv[argv.index("-m") + 1])
    assert expression.evaluate(lambda name, **kwargs: False)  # an unmarked test runs
    for marker in ("integration", "slow"):
        assert not expression.evaluate(lambda name, **kwargs: name == marker), marker  # noqa: B023
    assert "-n" in argv and argv[argv.index("--dist") + 1] == "loadfile"  # both cores, a file in one process
    assert service_free(argv[argv.index("-m") + 1])  # so the LiteLLM test files share one process (`scope`)


def test_the_litellm_files_are_one_unit_of_work_the_others_their_own() -> None:
    assert scope("tests/litellm/test_litellm_window.py::test_x[WC4]") == LITELLM_FILES
    assert scope("tests/probe/test_litellm_engine.py::test_y") == LITELLM_FILES
    assert scope("tests/probe/test_units.py::test_z") == "tests/probe/test_units.py"
    assert scope("tests/cli/test_replay.py::test_w[a::b]") == "tests/cli/test_replay.py"


def test_the_litellm_unit_is_handed_out_first() -> None:
    queue = OrderedDict((name, {}) for name in ("tests/a.py", "tests/b.py", LITELLM_FILES, "tests/c.py"))
    litellm_first(queue)
    assert list(queue) == [LITELLM_FILES, "tests/a.py", "tests/b.py", "tests/c.py"]
    queue.popitem(last=False)  # handed out: the rest keep their order
    litellm_first(queue)
    assert list(queue) == ["tests/a.py", "tests/b.py", "tests/c.py"]


@pytest.mark.parametrize(("markexpr", "free"), [
    ("not integration", True), ("not integration and not slow", True), ("not slow", False), ("", False),
    ("integration", False),
])
def test_service_free(markexpr: str, free: bool) -> None:
    assert service_free(markexpr) is free


def test_ci_selects_every_test() -> None:
    """scripts/test (CI's command, .ci/run) passes no `-m`, `-k` or profile of its own but `ci`: the slow and the
    integration tests run there."""
    pytest_line = [line for line in (ROOT / "scripts" / "test").read_text().splitlines()
                   if re.search(r"-m pytest\b", line)]
    assert len(pytest_line) == 1, pytest_line
    words = shlex.split(pytest_line[0])
    words = words[words.index("pytest") + 1:]
    assert "-m" not in words and "-k" not in words
    assert "--hypothesis-profile=ci" in words
