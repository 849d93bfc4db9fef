"""The fixtures' testcontainers branch (tests/conftest.py), which the main run never takes (it sets KAFKA_BOOTSTRAP
and REDIS_URL): a pytest subprocess without them, on the locally built images, runs the container checks and one
full live-pipeline test (replay == live) against the containers the fixtures start."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.containers_support import built_image, docker

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]  # builds and starts images


def test_fixture_containers_run_the_live_pipeline() -> None:
    kafka, redis = built_image("KAFKA_IMAGE"), built_image("REDIS_IMAGE")
    env = {k: v for k, v in os.environ.items() if k not in ("KAFKA_BOOTSTRAP", "REDIS_URL")}
    env.update(KAFKA_TEST_IMAGE=kafka, REDIS_TEST_IMAGE=redis, REQUIRE_INTEGRATION="1")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/containers/fixtures_in_containers.py",
         "tests/integration/test_live.py::test_replay_equals_live[lanes]"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert "3 passed" in proc.stdout, proc.stdout[-3000:]
    leftovers = docker("ps", "-a", "--filter", f"ancestor={kafka}", "--filter", f"ancestor={redis}", "-q").split()
    assert not leftovers, f"the fixtures left containers behind: {leftovers}"
