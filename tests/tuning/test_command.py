"""`coolant tune` end to end: outputs, determinism, exit codes, the S1 lesson, the HTML in a browser.

The command is registered here exactly as the CLI registers it: `app.command("tune")(tune_command)`.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner, Result

from coolant.tuning.command import tune_command

from .support import write_synthetic

ROOT = Path(__file__).resolve().parents[2]
S1_EVENTS = ROOT / "examples" / "tuning" / "s1-peak-30s.jsonl.gz"
S1_CONFIG = ROOT / "examples" / "tuning" / "s1.yaml"
S1_GRID = "model_list.*.model_info.cooldown_time=30,60"

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


@app.callback()
def _root() -> None:
    """Test CLI (a group, so `tune` is a subcommand as in `coolant tune`)."""


app.command("tune")(tune_command)


def tune(*args: str | os.PathLike[str]) -> Result:
    """`coolant tune` at a fixed width: the table's policy labels are read, and rich truncates them to the terminal
    (a run under pytest-xdist, with another width, cut them)."""
    return CliRunner().invoke(app, ["tune", *map(str, args)], catch_exceptions=False, env={"COLUMNS": "200"})


@pytest.fixture
def synthetic(tmp_path: Path) -> tuple[Path, Path]:
    return write_synthetic(tmp_path)


def by_label(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["label"]: p for p in doc["policies"]}


# --------------------------------------------------------------------------------------------
# Outputs.


def test_table_csv_json(synthetic: tuple[Path, Path], tmp_path: Path) -> None:
    events, config = synthetic
    out_csv, out_json = tmp_path / "t.csv", tmp_path / "t.json"
    result = tune(
        events, "-c", config, "-g", "router_settings.allowed_fails=0,5", "-g", "coolant.window=tumbling,sliding",
        "--out-csv", out_csv, "--out-json", out_json, "--jobs", "2",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert "ranked by objective net" in result.stdout  # the objective in use is printed
    assert "allowed_fails=0 window=tumbling" in result.stdout
    assert "4 policies" in result.stderr

    doc = json.loads(out_json.read_text())
    assert doc["objective"]["name"] == "net"
    assert doc["grid"] == ["router_settings.allowed_fails", "coolant.window"]
    assert doc["traffic"]["failures"] == 15 and doc["traffic"]["incidents"] == 2
    assert [p["rank"] for p in doc["policies"]] == [1, 2, 3, 4]
    nets = [p["net"] for p in doc["policies"]]
    assert nets == sorted(nets, reverse=True)
    p = by_label(doc)["allowed_fails=0 window=tumbling"]
    assert p["settings"] == {"router_settings.allowed_fails": 0, "coolant.window": "tumbling"}
    assert p["figures"]["failures_avoided"] == 13 and p["figures"]["successes_diverted"] == 73
    assert p["score"] == p["net"] == -60

    rows = list(csv.DictReader(io.StringIO(out_csv.read_text())))
    assert [r["id"] for r in rows] == [p["id"] for p in doc["policies"]]
    row = next(r for r in rows if r["label"] == "allowed_fails=5 window=tumbling")
    assert row["router_settings.allowed_fails"] == "5" and row["coolant.window"] == "tumbling"
    assert (row["failures_avoided"], row["successes_diverted"], row["cooldowns_allowed_fails"]) == ("5", "35", "6")
    assert row["undetected"] == "1" and row["delay_mean"] == "5.0"


def test_same_grid_twice_gives_identical_figures(synthetic: tuple[Path, Path], tmp_path: Path) -> None:
    events, config = synthetic
    outputs = []
    for n, jobs in enumerate(("1", "3")):
        out_json, out_csv = tmp_path / f"{n}.json", tmp_path / f"{n}.csv"
        result = tune(
            events, "-c", config, "-g", "router_settings.allowed_fails=null,0,2,5", "-g", "coolant.backoff=null,{}",
            "--out-json", out_json, "--out-csv", out_csv, "--jobs", jobs,
        )  # fmt: skip
        assert result.exit_code == 0, result.stderr
        outputs.append((out_json.read_bytes(), out_csv.read_bytes()))
    assert outputs[0] == outputs[1]
    assert len(json.loads(outputs[0][0])["policies"]) == 8


@pytest.mark.parametrize(
    ("objective", "best"),
    [
        ("net", "allowed_fails=5"),
        ("avoided", "allowed_fails=0"),
        ("precision", "allowed_fails=0"),  # 13/86 > 5/40
        ("detected", "allowed_fails=0"),
        ("flaps", "allowed_fails=5"),  # no flaps anywhere: ties go to the better net
    ],
)
def test_objectives(synthetic: tuple[Path, Path], tmp_path: Path, objective: str, best: str) -> None:
    events, config = synthetic
    out = tmp_path / "t.json"
    result = tune(events, "-c", config, "-g", "router_settings.allowed_fails=0,5", "--objective", objective,
                  "--out-json", out)  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert f"ranked by objective {objective}" in result.stdout
    assert json.loads(out.read_text())["policies"][0]["label"] == best


def test_warnings_for_identical_policies_and_invalid_records(synthetic: tuple[Path, Path], tmp_path: Path) -> None:
    events, config = synthetic
    bad = tmp_path / "more.jsonl"
    bad.write_text('{"schema": "coolant.outcome/1", "ts": "soon"}\n')
    result = tune(events, bad, "-c", config, "-g", "router_settings.alowed_fails=1,2")
    assert result.exit_code == 0
    assert "policies P1 and P2 are identical" in result.stderr
    assert f"invalid record {bad}:1: " in result.stderr


def test_no_grid_is_the_config_alone(synthetic: tuple[Path, Path], tmp_path: Path) -> None:
    events, config = synthetic
    out = tmp_path / "t.json"
    result = tune(events, "-c", config, "--out-json", out)
    assert result.exit_code == 0, result.stderr
    (p,) = json.loads(out.read_text())["policies"]
    assert p["label"] == "baseline" and p["settings"] == {}


def test_help_documents_the_grid() -> None:
    result = CliRunner().invoke(app, ["tune", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for text in ("KEY=V1,V2", "--objective", "--quiet-gap", "--flap-window", "--html", "--jobs", "Replay recorded"):
        assert text in result.stdout


# --------------------------------------------------------------------------------------------
# Exit codes.


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-g", "router_settings.allowed_fails"], "--grid router_settings.allowed_fails: expected KEY=V1,V2"),
        (["-g", "router_settings.allowed_fails=0,-1"], "router_settings.allowed_fails: must be an integer >= 0"),
        (["-g", "model_list.7.model_info.cooldown_time=30"], "model_list is a list of 2"),
        (["-g", "coolant.window=tumbling,hopping"], "coolant.window"),
        (["-g", "coolant.backoff={base: 1"], "cannot split the values"),
        (["--objective", "cheapest"], "--objective cheapest: unknown, choose from net, avoided"),
        (["--deployment", "nope"], "--deployment nope: not in the records nor in the config"),
    ],
)
def test_bad_options_exit_2_with_one_line(synthetic: tuple[Path, Path], args: list[str], message: str) -> None:
    events, config = synthetic
    result = tune(events, "-c", config, *args)
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("coolant: error: ")
    assert message in lines[0]


def test_bad_config_and_files_exit_2(synthetic: tuple[Path, Path], tmp_path: Path) -> None:
    events, config = synthetic
    missing = tune(events, "-c", tmp_path / "nope.yaml")
    assert missing.exit_code == 2 and "coolant: error: " in missing.stderr and "file not found" in missing.stderr
    broken = tmp_path / "broken.yaml"
    broken.write_text("router_settings: {allowed_fails: -3}\n")
    assert tune(events, "-c", broken).exit_code == 2
    unreadable = tune(tmp_path / "none.jsonl", "-c", config)
    assert unreadable.exit_code == 2 and "cannot open" in unreadable.stderr
    assert tune(events, "-c", config, "--jobs", "0").exit_code == 2  # typer's own range check
    assert tune(events, "-c", config, "--quiet-gap", "-1").exit_code == 2


def test_unwritable_output_exits_2(synthetic: tuple[Path, Path], tmp_path: Path) -> None:
    events, config = synthetic
    result = tune(events, "-c", config, "--out-json", tmp_path / "no" / "such" / "dir.json")
    assert result.exit_code == 2
    assert "cannot write" in result.stderr


# --------------------------------------------------------------------------------------------
# The S1 lesson on the example recording.


def s1_tune(tmp_path: Path, *args: str) -> dict[str, dict[str, Any]]:
    out = tmp_path / "s1.json"
    result = tune(S1_EVENTS, "-c", S1_CONFIG, "-g", S1_GRID, "--objective", "flaps", "--out-json", out, *args)
    assert result.exit_code == 0, result.stderr
    doc = json.loads(out.read_text())
    assert doc["policies"][0]["label"] == "cooldown_time=60"  # ranked first by flaps
    return by_label(doc)


def test_s1_cooldown_30_flaps_and_60_much_less(tmp_path: Path) -> None:
    """examples/tuning: recorded while 30 s cooldowns were in force. 30 s keys come back while the
    provider's 60 s window is still full and are re-cooled within seconds; 60 s lets it drain."""
    p = s1_tune(tmp_path)
    p30, p60 = p["cooldown_time=30"]["figures"], p["cooldown_time=60"]["figures"]
    assert p30["flaps"] > 1.5 * p60["flaps"]  # 54 against 23 with the default 30 s flap window
    assert set(p30["flaps_by_deployment"]) == {"gemini-flash-free-1", "gemini-flash-free-2"}
    # replaying the 30 s policy over traffic recorded under it reproduces what was in force
    assert p30["cooldowns"] == 142
    # the price of 60 s: more of the free keys' capacity given up (it goes to the paid tier)
    assert p60["successes_diverted"] > p30["successes_diverted"]
    assert p60["failures_avoided"] > p30["failures_avoided"]
    assert p30["detected"] == p60["detected"] == p30["incidents"]


def test_s1_immediate_recools_with_a_10s_flap_window(tmp_path: Path) -> None:
    """"Comes back, takes a request or two, and is rate-limited again": seconds after release."""
    p = s1_tune(tmp_path, "--flap-window", "10")
    p30, p60 = p["cooldown_time=30"]["figures"], p["cooldown_time=60"]["figures"]
    assert p30["flaps"] > 5 * p60["flaps"]  # 26 against 2
    assert p60["flaps"] <= 5


# --------------------------------------------------------------------------------------------
# The HTML report, rendered by headless Chromium.


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    why = "chromium is not installed (apt-get install -y chromium)"
    if os.environ.get("REQUIRE_INTEGRATION") == "1":
        pytest.fail(why, pytrace=False)
    print(f"skipping: {why}")
    pytest.skip(why)


def browser(exe: str, profile: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    flags = [
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={profile}",
    ]  # fmt: skip
    return subprocess.run([exe, *flags, *args], capture_output=True, timeout=120, check=False)


class Dom(HTMLParser):
    """The rendered DOM's elements, with the id of the enclosing <svg> for each."""

    def __init__(self) -> None:
        super().__init__()
        self.svg: list[str] = []
        self.elements: list[tuple[str, dict[str, str], str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        self.elements.append((tag, a, self.svg[-1] if self.svg else None))
        if tag == "svg":
            self.svg.append(a.get("id") or a.get("class", ""))

    def handle_endtag(self, tag: str) -> None:
        if tag == "svg" and self.svg:
            self.svg.pop()

    def find(self, tag: str, within: str | None = None, **attrs: str) -> list[dict[str, str]]:
        return [
            a for t, a, svg in self.elements
            if t == tag and (within is None or svg == within) and all(
                v in a.get(k.rstrip("_"), "").split() if k.endswith("_") else a.get(k) == v for k, v in attrs.items()
            )
        ]  # fmt: skip


def test_html_report_renders_in_chromium(tmp_path: Path) -> None:
    exe = chromium()
    report = tmp_path / "s1.html"
    grid = "model_list.*.model_info.cooldown_time=30,45,60,90"
    result = tune(S1_EVENTS, "-c", S1_CONFIG, "-g", grid, "-g", "coolant.backoff=null,{}", "--html", report)
    assert result.exit_code == 0, result.stderr
    html = report.read_text()
    assert "<script" not in html and "http://" not in html and "https://" not in html  # self-contained

    dumped = browser(exe, tmp_path / "profile", "--dump-dom", report.as_uri())
    assert dumped.returncode == 0, dumped.stderr.decode(errors="replace")[-2000:]
    dom = Dom()
    dom.feed(dumped.stdout.decode())
    (scatter,) = dom.find("svg", id="scatter")
    assert scatter
    points = dom.find("circle", within="scatter", class_="policy")
    assert sorted(p["data-id"] for p in points) == sorted(f"P{i}" for i in range(1, 9))
    (front,) = dom.find("path", within="scatter", id="pareto-front")
    assert front["d"].startswith("M") and front["d"].count("L") == len(dom.find("circle", class_="front")) - 1
    assert {t["data-deployment"] for t in dom.find("svg", class_="timeline")} >= {
        "gemini-flash-free-1",
        "gemini-flash-free-2",
    }
    ranked_rows = [a["data-id"] for t, a, _ in dom.elements if t == "tr" and "data-id" in a]
    assert sorted(ranked_rows) == sorted(p["data-id"] for p in points)  # the ranked table: one row per policy
    assert dom.find("rect", class_="flap")  # 30 s flaps, outlined on the timelines

    shot = tmp_path / "shot.png"
    taken = browser(exe, tmp_path / "profile", f"--screenshot={shot}", "--window-size=1280,2200", report.as_uri())
    assert taken.returncode == 0, taken.stderr.decode(errors="replace")[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
