"""`coolant tune` sweeps the outlier profile's knobs on a recording (docs/outlier.md): failures avoided against
successes diverted, per policy, so a user can check the profile on their own traffic before trusting it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, get_args

import yaml

from coolant.native_backend import available
from coolant.schemas import Outcome, Reason, encode
from coolant.tuning.report_html import REASON_COLORS

from .test_command import tune

T0 = 1_800_000_000.0
ONSET, END = 30.0, 90.0
"""d0 answers 500 to every request from T0+30 to T0+90: an incident that starts mid-minute."""
CONFIG: dict[str, Any] = {
    "model_list": [{"model_name": "g", "litellm_params": {"model": f"openai/{d}"}, "model_info": {"id": d}}
                   for d in ("d0", "d1", "d2")],
}


def recording(directory: Path) -> tuple[Path, Path]:
    """Two minutes of 10 requests/s per deployment, in time order."""
    recs = []
    for i in range(1200):
        for j, dep in enumerate(("d0", "d1", "d2")):
            ts = i / 10 + j / 30
            down = dep == "d0" and ONSET <= ts < END
            recs.append(Outcome(f"{dep}-{i}", T0 + ts, dep, "g", not down, 500 if down else None,
                                "InternalServerError" if down else None))
    events = directory / "incident.jsonl"
    events.write_bytes(b"".join(encode(r) + b"\n" for r in recs))
    config = directory / "litellm.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    return events, config


def test_a_sweep_of_the_profile_and_its_knobs(tmp_path: Path) -> None:
    events, config = recording(tmp_path)
    out = tmp_path / "t.json"
    result = tune(events, "-c", config, "-g", "coolant.profile=compatible,outlier",
                  "-g", "coolant.outlier.consecutive=3,5", "--out-json", out)
    # the knobs only apply under the profile: the compatible points with them are config errors, so the sweep is
    # written as two grids
    assert result.exit_code == 2 and "only applies with profile: outlier" in result.stderr
    result = tune(events, "-c", config, "-g", "coolant.profile=compatible,outlier", "--out-json", out)
    assert result.exit_code == 0, result.stderr
    if available():  # every success is the engine's under the profile, and the summary says why
        assert "1 on python: the outlier profile reads every success" in result.stderr, result.stderr
    policies = {p["label"]: p["figures"] for p in json.loads(out.read_text())["policies"]}
    compatible, outlier = policies["profile=compatible"], policies["profile=outlier"]
    # the minute from T0+0 holds 300 of d0's successes before the onset: V2.3 cannot hold before T0+60, so the
    # compatible profile lets every failure of the first 30 s through (about 300); the profile cools on the 4th
    assert outlier["failures_avoided"] - compatible["failures_avoided"] >= 250
    assert outlier["by_reason"]["consecutive_failures"] >= 1

    tuned = tmp_path / "k.json"
    outlier_config = tmp_path / "outlier.yaml"
    outlier_config.write_text(yaml.safe_dump({**CONFIG, "coolant": {"profile": "outlier"}}))
    result = tune(events, "-c", outlier_config, "-g", "coolant.outlier.consecutive=2,4,8", "--out-json", tuned,
                  "--objective", "avoided")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(tuned.read_text())
    ranked = [p["settings"]["coolant.outlier.consecutive"] for p in doc["policies"]]
    assert ranked == [2, 4, 8]  # a smaller k cools the incident sooner: more failures avoided
    diverted = {p["settings"]["coolant.outlier.consecutive"]: p["figures"]["successes_diverted"]
                for p in doc["policies"]}
    assert all(isinstance(v, int) for v in diverted.values())


def test_every_reason_has_its_own_colour_in_the_html_report() -> None:
    """The timelines colour a cooldown by its reason: the profile's reasons too, not the fallback grey."""
    assert set(get_args(Reason)) == set(REASON_COLORS)
    assert len(set(REASON_COLORS.values())) == len(REASON_COLORS)
