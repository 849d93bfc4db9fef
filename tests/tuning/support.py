"""Synthetic traffic with known incidents, shared by the tuning tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from coolant.schemas import Outcome, encode

T0 = 1_800_000_000.0
INCIDENTS = ((100, 110), (300, 303))
"""d0 fails with a 500 at every whole second of these ranges (inclusive), relative to T0."""

CONFIG: dict[str, Any] = {
    "model_list": [
        {"model_name": "g", "litellm_params": {"model": "openai/a"}, "model_info": {"id": "d0"}},
        {"model_name": "g", "litellm_params": {"model": "openai/b"}, "model_info": {"id": "d1"}},
    ],
    "router_settings": {"cooldown_time": 30, "allowed_fails": 3},
}


def synthetic() -> list[Outcome]:
    """10 minutes: d0 and d1 succeed every second (d0 at k+0.5, d1 at k+0.25); d0 also fails
    at every whole second of each incident. Sorted by time, as a gateway logs them."""
    recs: list[Outcome] = []
    for k in range(600):
        recs.append(Outcome(f"s0-{k}", T0 + k + 0.5, "d0", "g", True))
        recs.append(Outcome(f"s1-{k}", T0 + k + 0.25, "d1", "g", True))
    for first, last in INCIDENTS:
        for k in range(first, last + 1):
            recs.append(
                Outcome(f"f0-{k}", T0 + k, "d0", "g", False, 500, "InternalServerError", "upstream error")
            )
    return sorted(recs, key=lambda r: r.ts)


def write_synthetic(directory: Path) -> tuple[Path, Path]:
    """(records JSONL, config YAML) in `directory`."""
    events = directory / "synthetic.jsonl"
    events.write_bytes(b"".join(encode(r) + b"\n" for r in synthetic()))
    config = directory / "synthetic.yaml"
    config.write_text(yaml.safe_dump(CONFIG, sort_keys=False))
    return events, config
