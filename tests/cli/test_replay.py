"""`coolant replay` end to end (contract §5): golden output of examples/, output channels, inputs, errors.

The golden file was generated once from the engine and checked by hand against the spec
(reasons, durations, `until = ts + cooldown_time`, windows). If a deliberate policy change alters
it, regenerate with:

    coolant replay examples/traffic.jsonl --config examples/litellm.yaml --quiet \
        --out tests/data/golden/examples.cooldowns.jsonl
"""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner, Result

from coolant.cli.commands import app
from coolant.config.loader import load_config
from coolant.processors import Engine
from coolant.schemas import decode, encode

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
TRAFFIC = EXAMPLES / "traffic.jsonl"
CONFIG = EXAMPLES / "litellm.yaml"
GOLDEN = ROOT / "tests" / "data" / "golden" / "examples.cooldowns.jsonl"

REASONS = {"rate_limited", "failure_rate", "total_outage", "non_retryable", "allowed_fails", "health_check"}
SKIPS = {"status_exempt", "excluded_type", "wildcard", "unknown_deployment", "late", "duplicate"}


def run(*args: str | os.PathLike[str], stdin: bytes | None = None) -> Result:
    return CliRunner().invoke(app, ["replay", *map(str, args)], input=stdin, catch_exceptions=False)


def lines(data: bytes) -> list[bytes]:
    return data.splitlines()


def error_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def unwrap(text: str) -> str:
    """stderr with console line wrapping undone (the summary is rendered by Rich)."""
    return "".join(text.splitlines())


@pytest.fixture(scope="module")
def golden() -> list[bytes]:
    return lines(GOLDEN.read_bytes())


# --------------------------------------------------------------------------------------------
# Golden replay of examples/.


def test_examples_replay_matches_golden(golden: list[bytes], tmp_path: Path) -> None:
    summary = tmp_path / "summary.json"
    result = run(TRAFFIC, "--config", CONFIG, "--summary-json", summary)
    assert result.exit_code == 0, result.stderr
    assert lines(result.stdout_bytes) == golden
    s = json.loads(summary.read_text())
    assert s["invalid"] == 0
    assert s["cooldowns"] == len(golden)
    assert set(s["reasons"]) == REASONS  # every reason the policy can produce
    assert set(s["dispositions"]) >= SKIPS


def test_golden_is_consistent_with_the_spec(golden: list[bytes]) -> None:
    """Cheap invariants of every cooldown record (E1, E3), so a regenerated golden is still checked."""
    for raw in golden:
        cd: dict[str, Any] = json.loads(raw)
        assert cd["schema"] == "coolant.cooldown/1"
        assert cd["reason"] in REASONS
        assert cd["until"] == pytest.approx(cd["ts"] + cd["cooldown_time"])
        assert re.fullmatch(r"cd-[0-9a-f]{32}", cd["event_id"])
        if float(cd["cooldown_time"]).is_integer():
            assert isinstance(cd["cooldown_time"], int)  # E3: 60, not 60.0


def test_examples_replay_via_subprocess(golden: list[bytes]) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "coolant.cli", "replay", str(TRAFFIC), "--config", str(CONFIG)],
        capture_output=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert lines(proc.stdout) == golden
    assert b"replay" in proc.stderr  # the summary goes to stderr, never stdout


def test_stdout_and_out_file_are_equivalent(golden: list[bytes], tmp_path: Path) -> None:
    out = tmp_path / "cooldowns.jsonl"
    to_file = run(TRAFFIC, "--config", CONFIG, "--out", out, "--quiet")
    assert to_file.exit_code == 0
    assert to_file.stdout_bytes == b""
    assert to_file.stderr == ""  # --quiet
    to_stdout = run(TRAFFIC, "--config", CONFIG, "--quiet")
    assert to_stdout.exit_code == 0
    assert out.read_bytes() == to_stdout.stdout_bytes
    assert lines(out.read_bytes()) == golden


def test_gzip_input_is_read_transparently(golden: list[bytes], tmp_path: Path) -> None:
    gz = tmp_path / "traffic.jsonl.gz"
    gz.write_bytes(gzip.compress(TRAFFIC.read_bytes()))
    result = run(gz, "--config", CONFIG, "--quiet")
    assert result.exit_code == 0
    assert lines(result.stdout_bytes) == golden


def test_stdin_dash(golden: list[bytes]) -> None:
    result = run("-", "--config", CONFIG, "--quiet", stdin=TRAFFIC.read_bytes())
    assert result.exit_code == 0
    assert lines(result.stdout_bytes) == golden


def test_several_files_are_read_in_order(golden: list[bytes], tmp_path: Path) -> None:
    data = TRAFFIC.read_bytes().splitlines(keepends=True)
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl.gz"
    first.write_bytes(b"".join(data[:500]))
    second.write_bytes(gzip.compress(b"".join(data[500:])))
    result = run(first, second, "--config", CONFIG, "--quiet")
    assert result.exit_code == 0
    assert lines(result.stdout_bytes) == golden


# --------------------------------------------------------------------------------------------
# Malformed input: reported with line numbers, never fatal.

GOOD_401 = {
    "schema": "coolant.outcome/1",
    "event_id": "m-1",
    "ts": 1767225845.0,
    "deployment_id": "gemini-pro-paid-1",
    "model_group": "gemini-pro-plan",
    "ok": False,
    "status_code": 401,
    "exception_type": "AuthenticationError",
}
GOOD_429 = {
    **GOOD_401,
    "event_id": "m-2",
    "ts": 1767225850.0,
    "deployment_id": "gemini-flash-free-1",
    "model_group": "gemini-flash",
    "status_code": 429,
    "exception_type": "RateLimitError",
    "retry_after": "30",
}


def malformed_file(tmp_path: Path) -> Path:
    rows = [
        json.dumps(GOOD_401),  # 1: valid
        "",  # 2: blank
        '{"schema": "coolant.outcome/1", "event_id": "m-3", "ts": ',  # 3: not JSON
        json.dumps({**GOOD_401, "event_id": "m-4", "ts": "soon"}),  # 4: wrong type
        json.dumps({**GOOD_401, "event_id": "m-5", "schema": "coolant.outcome/9"}),  # 5: unknown schema
        json.dumps({k: v for k, v in GOOD_401.items() if k != "deployment_id"} | {"event_id": "m-6"}),  # 6: missing
        "   \t",  # 7: whitespace only
        json.dumps(GOOD_429),  # 8: valid
        "",  # 9: blank
    ]
    path = tmp_path / "malformed.jsonl"
    path.write_text("\n".join(rows) + "\n")
    return path


def test_malformed_lines_are_reported_and_the_run_continues(tmp_path: Path) -> None:
    path = malformed_file(tmp_path)
    summary_path = tmp_path / "summary.json"
    result = run(path, "--config", CONFIG, "--summary-json", summary_path)
    assert result.exit_code == 0
    cooldowns = [json.loads(raw) for raw in lines(result.stdout_bytes)]
    assert [(c["trigger_event_id"], c["reason"]) for c in cooldowns] == [
        ("m-1", "non_retryable"),
        ("m-2", "rate_limited"),
    ]
    summary = json.loads(summary_path.read_text())
    assert summary["records"] == 6  # blank lines are not records
    assert summary["invalid"] == 4
    samples = summary["invalid_samples"]
    assert [s.split(": ", 1)[0] for s in samples] == [f"{path}:{n}" for n in (3, 4, 5, 6)]
    assert "JSON" in samples[0]
    assert "ts" in samples[1]
    assert "schema" in samples[2]
    assert "deployment_id" in samples[3]
    stderr = unwrap(result.stderr)
    for n in (3, 4, 5, 6):
        assert f"malformed.jsonl:{n}" in stderr
    for n in (1, 2, 7, 8, 9):
        assert f"malformed.jsonl:{n}:" not in stderr


def test_hostile_lines_are_reported_and_the_run_continues(tmp_path: Path) -> None:
    """P2 (docs/input-bounds.md): a recursion bomb, even in an unknown field, or a ts in milliseconds is one
    reported line; the records around it are decided as without it."""
    good = [json.loads(raw) for raw in TRAFFIC.read_bytes().splitlines()[:300]]
    clean = tmp_path / "clean.jsonl"
    clean.write_text("".join(json.dumps(r) + "\n" for r in good))
    bombs = [
        b"[" * 10_000 + b"]" * 10_000,
        json.dumps({**good[0], "event_id": "bomb", "x": 0}).encode().replace(b'"x": 0', b'"x": ' + b"[" * 10_000
                                                                             + b"]" * 10_000),
        json.dumps({**good[0], "event_id": "ms", "ts": good[0]["ts"] * 1000}).encode(),
    ]
    hostile = tmp_path / "hostile.jsonl"
    body = [json.dumps(r).encode() for r in good]
    hostile.write_bytes(b"\n".join(body[:100] + bombs + body[100:]) + b"\n")
    want, got = run(clean, "--config", CONFIG), run(hostile, "--config", CONFIG)
    assert want.exit_code == got.exit_code == 0
    assert got.stdout_bytes == want.stdout_bytes
    stderr = unwrap(got.stderr)
    for n, says in ((101, "nested deeper"), (102, "nested deeper"), (103, "milliseconds")):
        assert f"hostile.jsonl:{n}:" in stderr and says in stderr


def test_invalid_samples_show_no_raw_markup(tmp_path: Path) -> None:
    result = run(malformed_file(tmp_path), "--config", CONFIG)
    assert result.exit_code == 0
    assert "[red]" not in result.stderr


# --------------------------------------------------------------------------------------------
# Exit 2: bad config, unreadable file.


def assert_error(result: Result, *needles: str) -> None:
    """Exit 2, nothing on stdout, and `coolant: error: ...` naming what went wrong."""
    assert result.exit_code == 2
    assert result.stdout_bytes == b""
    assert result.stderr.startswith("coolant: error: ")
    for needle in needles:
        assert needle in unwrap(result.stderr)


def test_missing_config_exits_2_naming_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-config.yaml"
    assert_error(run(TRAFFIC, "--config", missing), str(missing), "not found")


def bad_config(tmp_path: Path) -> Path:
    data = yaml.safe_load(CONFIG.read_text())
    data["router_settings"]["allowed_fails"] = -1
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(data))
    return bad


def test_config_with_a_bad_value_exits_2(tmp_path: Path) -> None:
    bad = bad_config(tmp_path)
    assert_error(run(TRAFFIC, "--config", bad), str(bad), "router_settings.allowed_fails")


def test_missing_events_file_exits_2_before_any_output(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-traffic.jsonl"
    out = tmp_path / "out.jsonl"
    assert_error(run(TRAFFIC, missing, "--config", CONFIG, "--out", out), str(missing))
    assert not out.exists()


@pytest.mark.slow  # a second interpreter: the quick run keeps test_examples_replay_via_subprocess, CI runs both
def test_missing_events_file_via_subprocess(tmp_path: Path) -> None:
    missing = tmp_path / "gone.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "coolant.cli", "replay", str(missing), "--config", str(CONFIG)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith("coolant: error: ")
    assert str(missing) in unwrap(proc.stderr)


@pytest.mark.parametrize("case", ["missing_config", "bad_config", "missing_events"])
def test_errors_are_exactly_one_line(case: str, tmp_path: Path) -> None:
    """Contract §5 / the brief: scripts grep one `coolant: error: ...` line. Long tmp paths expose wrapping."""
    deep = tmp_path / ("x" * 60)
    deep.mkdir()
    args: dict[str, list[str | os.PathLike[str]]] = {
        "missing_config": [TRAFFIC, "--config", deep / "no-such-config.yaml"],
        "bad_config": [TRAFFIC, "--config", bad_config(deep)],
        "missing_events": [deep / "gone.jsonl", "--config", CONFIG],
    }
    result = run(*args[case])
    assert result.exit_code == 2
    assert len(error_lines(result.stderr)) == 1, result.stderr


def test_help_mentions_the_exit_codes() -> None:
    result = CliRunner().invoke(app, ["replay", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    text = re.sub(r"\s+", " ", result.stdout)
    assert re.search(r"exit (status|code)", text, re.IGNORECASE)
    assert re.search(r"\b0\b", text) and re.search(r"\b2\b", text)


@pytest.mark.parametrize("content", [bytes(range(256)) * 64, b"", b"\n\n"], ids=["binary", "empty", "blank"])
def test_no_valid_record_exits_1_with_one_line(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "input.bin"
    path.write_bytes(content)
    result = run(path, "--config", CONFIG, "--quiet")
    assert result.exit_code == 1, result.stderr
    errors = error_lines(result.stderr)
    assert len(errors) == 1 and "no valid record" in errors[0], result.stderr
    assert result.stdout_bytes == b""


@pytest.mark.parametrize("flag", ["--out", "--transitions-out"])
def test_an_unwritable_output_exits_2_naming_it_before_replaying(flag: str, tmp_path: Path) -> None:
    target = tmp_path / "no-such-dir" / "out.jsonl"
    result = run(TRAFFIC, "--config", CONFIG, flag, target)
    assert_error(result, str(target))
    assert result.stdout == ""  # nothing replayed


def test_transitions_out_writes_the_cores_transitions(tmp_path: Path) -> None:
    """`--transitions-out`: one `coolant.health_transition/1` line per flip the core decides, counted in the
    summary; cooldowns are unchanged by it."""
    probes = [
        {"schema": "coolant.health/1", "event_id": f"p{i}", "ts": 1_800_000_000.0 + i, "deployment_id": dep,
         "model_group": "from-prober", "healthy": healthy, **({} if healthy else {"status_code": 500})}
        for i, (dep, healthy) in enumerate([("a", True), ("a", True), ("a", False), ("b", False), ("a", True)])
    ]
    events = tmp_path / "events.jsonl"
    events.write_bytes(TRAFFIC.read_bytes() + b"".join(json.dumps(p).encode() + b"\n" for p in probes))
    flips, summary = tmp_path / "flips.jsonl", tmp_path / "summary.json"
    result = run(events, "--config", CONFIG, "--transitions-out", flips, "--summary-json", summary, "--quiet")
    assert result.exit_code == 0, result.stderr
    engine = Engine(load_config(CONFIG).policy)
    want = [s.transition for line in events.read_bytes().splitlines() if (s := engine.feed(decode(line))).transition]
    assert flips.read_bytes() == b"".join(encode(t) + b"\n" for t in want if t is not None)
    assert [(t.deployment_id, t.previous, t.healthy) for t in want if t is not None][-4:] == [
        ("a", None, True), ("a", True, False), ("b", None, False), ("a", False, True)]
    assert json.loads(summary.read_text())["health_transitions"] == len(want)
    assert result.stdout_bytes == run(events, "--config", CONFIG, "--quiet").stdout_bytes
