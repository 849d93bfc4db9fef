"""`coolant replay` and `coolant tune` report the opt-in extensions' cooldowns (X6 quota, X7 probation)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from coolant.cli.commands import app

T0 = 1_800_000_000
CONFIG = {
    "model_list": [
        {"model_name": "g", "litellm_params": {"model": "openai/x"}, "model_info": {"id": f"d{i}"}} for i in range(2)
    ],
    "coolant": {"quota": {}, "backoff": {"probation": True}},
}


def _records() -> list[dict[str, object]]:
    base = {"schema": "coolant.outcome/1", "deployment_id": "d0", "model_group": "g"}
    return [
        {**base, "event_id": "s1", "ts": T0 + 30, "ok": True,
         "ratelimit": {"remaining_requests": 0, "reset_requests": 12}},  # X6: cooled until T0+42
        {**base, "event_id": "f1", "ts": T0 + 43, "ok": False, "status_code": 500,
         "exception_type": "InternalServerError"},  # no probation after a quota cooldown (X7.1)
        {**base, "event_id": "f2", "ts": T0 + 44, "ok": False, "status_code": 429,
         "exception_type": "RateLimitError"},  # V2.1, backed off: 5 s, probation starts
        {**base, "event_id": "f3", "ts": T0 + 50, "ok": False, "status_code": 500,
         "exception_type": "InternalServerError"},  # X7.3: probation, next step 10 s
    ]


def test_replay_reports_quota_and_probation(tmp_path: Path) -> None:
    config, events, summary = tmp_path / "c.yaml", tmp_path / "e.jsonl", tmp_path / "s.json"
    config.write_text(yaml.safe_dump(CONFIG))
    events.write_text("".join(json.dumps(r) + "\n" for r in _records()))
    result = CliRunner().invoke(app, ["replay", str(events), "--config", str(config), "--summary-json", str(summary)],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    out = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(c["reason"], c["cooldown_time"], c["until"] - T0) for c in out] == [
        ("quota_exhausted", 12, 42), ("rate_limited", 5, 49), ("probation", 10, 60)
    ]
    s = json.loads(summary.read_text())
    assert s["reasons"] == {"quota_exhausted": 1, "rate_limited": 1, "probation": 1}
    assert "quota_exhausted" in result.stderr and "probation" in result.stderr
