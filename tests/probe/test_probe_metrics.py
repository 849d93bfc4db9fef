"""`coolant probe --metrics-port`: the prober's own Prometheus series, from its round reports."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from coolant.probe.metrics import ProbeMetrics
from coolant.probe.service import RoundReport
from coolant.schemas import Health
from tests.support.ports import free_port
from tests.support.upstream import FakeOpenAI

ROOT = Path(__file__).resolve().parents[2]
STATUSES = {"d1": 503}
"""What the upstream answers (the `upstream` fixture, tests/probe/conftest.py); d0 and d2 are healthy."""


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def health(dep: str, healthy: bool, latency_ms: float) -> Health:
    return Health(event_id=f"hp-{dep}", ts=1_800_000_000.0, deployment_id=dep, model_group="g", healthy=healthy,
                  latency_ms=latency_ms, prober="p1", mode="chat")


def test_a_round_report_becomes_counters() -> None:
    m = ProbeMetrics(clock=lambda: 1234.5)
    m.record(RoundReport(7, (0, 1), (health("a", True, 120.0), health("b", False, 2500.0)), ("c",), True))
    m.record(RoundReport(8, (0,), (health("a", True, 80.0),), (), False))
    got = samples(m.render().decode())
    assert got[("coolant_probe_records_total", (("healthy", "true"), ("model_group", "g")))] == 2
    assert got[("coolant_probe_records_total", (("healthy", "false"), ("model_group", "g")))] == 1
    assert got[("coolant_probe_skipped_total", ())] == 1
    assert got[("coolant_probe_rounds_total", (("committed", "true"),))] == 1
    assert got[("coolant_probe_rounds_total", (("committed", "false"),))] == 1
    assert got[("coolant_probe_latency_seconds_count", (("healthy", "true"),))] == 2
    assert got[("coolant_probe_latency_seconds_bucket", (("healthy", "false"), ("le", "2.5")))] == 1
    assert got[("coolant_probe_latency_seconds_bucket", (("healthy", "false"), ("le", "1.0")))] == 0
    assert got[("coolant_probe_last_round_timestamp_seconds", ())] == 1234.5


def scrape(port: int) -> str | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            return str(resp.read().decode())
    except (urllib.error.URLError, OSError):
        return None


@pytest.mark.integration
async def test_the_cli_serves_the_series(tmp_path: Path, kafka_bootstrap: str, upstream: FakeOpenAI) -> None:
    tag = f"probe-m-{uuid.uuid4().hex[:10]}"
    deps = ["d0", "d1", "d2"]
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"model_list": [
        {"model_name": "grp", "litellm_params": {"model": f"openai/m-{d}", "api_base": upstream.base(d),
                                                 "api_key": "sk-metrics-test"}, "model_info": {"id": d}}
        for d in deps]}))
    port = free_port()
    cmd = [sys.executable, "-m", "coolant.cli", "probe", "--config", str(config), "--bootstrap", kafka_bootstrap,
           "--topic-prefix", f"{tag}.", "--group", f"{tag}-probers", "--session-timeout", "6", "--timeout", "5",
           "--metrics-port", str(port)]
    log = tmp_path / "probe.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = asyncio.get_running_loop().time() + 60
        got: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
        while asyncio.get_running_loop().time() < deadline:
            text = await asyncio.to_thread(scrape, port)
            got = samples(text) if text else {}
            if got.get(("coolant_probe_rounds_total", (("committed", "true"),))):
                break
            assert proc.poll() is None, log.read_text()
            await asyncio.sleep(0.3)
        else:
            raise AssertionError(f"no round in /metrics within 60 s: {got}\n{log.read_text()}")
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=30)
    assert got[("coolant_probe_records_total", (("healthy", "true"), ("model_group", "grp")))] == 2
    assert got[("coolant_probe_records_total", (("healthy", "false"), ("model_group", "grp")))] == 1
    assert upstream.count() == len(deps)
    assert rc == 0, log.read_text()
