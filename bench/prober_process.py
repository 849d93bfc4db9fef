"""`coolant probe` as a subprocess of a bench: one prober with its cooled cadence (recovery that probes)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def start_prober(config: Path, bootstrap: str, redis_url: str, key_prefix: str, topic_prefix: str, group: str,
                 log: Path, *, interval: float = 60.0, cooled_interval: float = 1.0) -> subprocess.Popen[bytes]:
    """Start one prober of `config`'s deployments, logging to `log`; the caller terminates it."""
    cmd = [sys.executable, "-m", "coolant.cli", "probe", "--config", str(config), "--bootstrap", bootstrap,
           "--redis-url", redis_url, "--redis-key-prefix", key_prefix, "--topic-prefix", topic_prefix,
           "--group", group, "--interval", str(interval), "--cooled-interval", str(cooled_interval),
           "--timeout", "2"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.Popen(cmd, cwd=ROOT, stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env)
