"""`load_yaml` gives what `yaml.load` with the safe loader gives (value or error), on every input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from coolant.config.yaml_read import load_yaml, safe_loader
from tests.support.hypothesis import examples

ROOT = Path(__file__).resolve().parents[2]


def reference(text: str) -> tuple[str, Any]:
    try:
        return "ok", yaml.load(text, Loader=safe_loader())
    except yaml.YAMLError as exc:
        return "error", str(exc)


def fast(text: str) -> tuple[str, Any]:
    try:
        return "ok", load_yaml(text)
    except yaml.YAMLError as exc:
        return "error", str(exc)


SNIPPETS = [
    "",
    "# only a comment\n",
    "a: 1",
    "- 1\n- 2",
    "plain",
    "a: &x 1\nb: *x",  # anchors and aliases: PyYAML's loader
    "<<: {a: 1}\nb: 2",  # a merge key
    "a: !!str 1\nb: !!int '3'\nc: !!float 1",
    "!!map {a: 1}",
    "!custom x",
    "? [1]\n: 2",  # a key that is a list
    "? {a: 1}\n: 2",
    "a: 1\n---\nb: 2",  # two documents
    "--- 1\n...\n",
    "a: [1, {b: 2}]\nc: {d: [3, [4, []]], e: {}}",
    "a: yes\nb: 2001-12-14\nc: 1e3\nd: .inf\ne: ~\nf: 0x1f\ng: '1'\nh: 0o17\ni: 1_000\nj: -.5\nk: null\nl: No",
    "= : 1",
    "a: =",
    "{a: 1, a: 2}",
    "a: 'unclosed\n",
    "a: b: c",
    "a:\n- b\n- c: d\n  e: f\n- [g]",
    "\t- tab",
    "a: \"\\u00e9\\t\"\nb: |\n  two\n  lines\nc: >\n  folded\n  text\n",
    "1: int key\n2.5: float key\nnull: null key\ntrue: bool key",
]


@pytest.mark.parametrize("text", SNIPPETS)
def test_snippets(text: str) -> None:
    assert fast(text) == reference(text)


def test_every_yaml_file_of_the_repository() -> None:
    files = [p for p in ROOT.rglob("*.y*ml") if ".venv" not in p.parts and "out" not in p.parts]
    assert files
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert fast(text) == reference(text), path


scalars = st.one_of(
    # the characters of st.text()'s default (every code point UTF-8 encodes: all but the surrogates), named by
    # category: the default's codec table is built in each process where Hypothesis has no cache of it yet
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
    st.text(st.characters(exclude_categories=["Cs"]), max_size=12),
    st.sampled_from(["yes", "no", "on", "~", "1e3", "0x10", "2001-12-14", "=", "<<", "1:2", "- x", "#c", "'q'"]),
)
data = st.recursive(
    scalars,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(scalars, kids, max_size=4),
    max_leaves=25,
)


@settings(max_examples=examples(300), deadline=None)
@given(data, st.sampled_from([None, True, False]), st.booleans())
def test_random_documents(value: Any, flow: bool | None, sort: bool) -> None:
    try:
        text = yaml.safe_dump(value, default_flow_style=flow, sort_keys=sort, allow_unicode=True)
    except TypeError:  # keys of mixed types with sort_keys
        return
    assert fast(text) == reference(text)
