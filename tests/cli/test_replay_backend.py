"""`coolant replay --backend` and `coolant tune --backend`: the same output on either loop, the summary names the
one that ran, and a backend that cannot run is a one-line error (exit 2) before anything is read."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from coolant import native_backend
from coolant.cli.commands import app

ROOT = Path(__file__).resolve().parents[2]
TRAFFIC = ROOT / "examples" / "traffic.jsonl"
CONFIG = ROOT / "examples" / "litellm.yaml"
needs_native = pytest.mark.skipif(not native_backend.available(), reason="coolant_native is not built (no cargo)")


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(app, [*map(str, args)], catch_exceptions=False, env={"COLUMNS": "200"})


def unwrap(text: str) -> str:
    return "".join(text.splitlines())


@pytest.mark.parametrize("backend", ["python", pytest.param("native", marks=needs_native)])
def test_replay_names_the_backend_it_ran_and_writes_the_same_cooldowns(backend: str, tmp_path: Path) -> None:
    out, summary = tmp_path / f"{backend}.jsonl", tmp_path / f"{backend}.json"
    result = invoke("replay", TRAFFIC, "-c", CONFIG, "-o", out, "--summary-json", summary, "--backend", backend)
    assert result.exit_code == 0, result.output
    assert f"backend {backend}" in unwrap(result.stderr)
    reference = tmp_path / "auto.jsonl"
    assert invoke("replay", TRAFFIC, "-c", CONFIG, "-o", reference, "-q").exit_code == 0
    assert out.read_bytes() == reference.read_bytes()
    assert out.read_bytes()  # the example does cool


def test_replay_auto_names_the_backend_it_chose() -> None:
    result = invoke("replay", TRAFFIC, "-c", CONFIG, "-o", "/dev/null")
    want = "backend native" if native_backend.available() else "backend python (coolant_native is not built)"
    assert want in unwrap(result.stderr)


@pytest.mark.parametrize("command", ["replay", "tune"])
def test_an_unknown_backend_is_a_one_line_error(command: str) -> None:
    result = invoke(command, TRAFFIC, "-c", CONFIG, "--backend", "rust")
    assert result.exit_code == 2
    assert "--backend rust: expected one of auto, native, python" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("command", ["replay", "tune"])
def test_native_where_it_is_not_built_says_how_to_get_it(command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native_backend, "_NATIVE", [None])
    result = invoke(command, TRAFFIC, "-c", CONFIG, "--backend", "native")
    assert result.exit_code == 2
    assert "coolant_native) is not built" in result.stderr
    assert "Rust toolchain" in unwrap(result.stderr)


@pytest.mark.parametrize("backend", ["python", pytest.param("native", marks=needs_native)])
def test_tune_names_the_backend_it_ran(backend: str, tmp_path: Path) -> None:
    out = tmp_path / f"{backend}.csv"
    result = invoke("tune", TRAFFIC, "-c", CONFIG, "-g", "router_settings.allowed_fails=0,3", "-j", "1",
                    "--out-csv", out, "--backend", backend)
    assert result.exit_code == 0, result.output
    assert f"backend {backend}" in unwrap(result.stderr)
    reference = tmp_path / "auto.csv"
    assert invoke("tune", TRAFFIC, "-c", CONFIG, "-g", "router_settings.allowed_fails=0,3", "-j", "1",
                  "--out-csv", reference).exit_code == 0
    assert out.read_text() == reference.read_text()


def test_the_help_of_both_commands_explains_the_backends() -> None:
    for command in ("replay", "tune"):
        text = " ".join(invoke(command, "--help").output.split())
        assert "--backend" in text
        assert "native (coolant_native, Rust" in text
        assert "same byte for byte" in text


@pytest.mark.parametrize("api", [None, native_backend.NATIVE_API - 1])
def test_an_extension_built_from_another_version_is_not_used(api: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stale `coolant_native` left in place (built before `scan` or `push` changed) would fail mid-run: auto runs
    python, and `--backend native` says what to do."""
    import sys
    import types

    stale = types.ModuleType("coolant_native")
    if api is not None:
        stale.API = api  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "coolant_native", stale)
    monkeypatch.setattr(native_backend, "_NATIVE", [])
    assert not native_backend.available()
    assert native_backend.resolve("auto") == "python"
    with pytest.raises(native_backend.BackendError, match="another version"):
        native_backend.resolve("native")
