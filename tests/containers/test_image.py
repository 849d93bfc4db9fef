"""The coolant image (./Dockerfile, built by scripts/docker-local) as a worker against the local Kafka and Redis.

The same end-to-end check as tests/integration/test_live.py::test_replay_equals_live, with the worker running
from the image: every cooldown on the topic is the one `coolant replay` decides and Redis holds the latest per
deployment. The image runs as a non-root user, reports healthy through its HEALTHCHECK (the worker's /healthz)
and exits 0 on SIGTERM.
"""

from __future__ import annotations

import json

import pytest

from tests.containers_support import built_image, docker
from tests.integration.test_live import assert_same_cooldowns
from tests.support.kafka import produce_lines, read_json, wait_caught_up
from tests.support.records import DEPLOYMENTS, fleet_traffic, latest_per_deployment
from tests.support.redis import redis_mismatches
from tests.support.waiting import wait_for
from tests.support.worker import Case

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]  # builds and starts images


async def test_worker_image_end_to_end(case: Case, kafka_bootstrap: str, redis_url: str) -> None:
    image = built_image("COOLANT_IMAGE")
    case.config.parent.chmod(0o755)  # the image's user (uid 10001) reads the mounted config
    case.config.chmod(0o644)
    lines = fleet_traffic(1000, seed=3)
    expected = case.replay(lines)
    assert len(expected) >= 10, "the traffic should cause cooldowns"
    w = await case.worker("img", kafka_bootstrap, redis_url=redis_url, image=image)
    await w.wait_ready()

    config = json.loads(docker("inspect", "--format", "{{json .Config}}", image))
    assert config["User"] not in ("", "root", "0"), config["User"]
    assert docker("exec", w.container, "id", "-u").strip() != "0"
    assert config["Healthcheck"]["Test"], "the image has no HEALTHCHECK"

    async def healthy() -> bool:
        return docker("inspect", "--format", "{{.State.Health.Status}}", w.container).strip() == "healthy"

    await wait_for(healthy, "the container's HEALTHCHECK to report healthy", 120, 1.0, case.logs)

    await produce_lines(kafka_bootstrap, case.outcomes, lines)
    await wait_caught_up(kafka_bootstrap, case.app_id, case.outcomes, on_timeout=case.logs)
    got = await read_json(kafka_bootstrap, case.cooldowns)
    assert_same_cooldowns(got, expected, allow_duplicates=False)
    await wait_caught_up(kafka_bootstrap, case.app_id, case.cooldowns, on_timeout=case.logs)
    latest = latest_per_deployment(expected)
    problems = await redis_mismatches(redis_url, case.key_prefix, latest, [d for d in DEPLOYMENTS if d not in latest])
    assert not problems, "\n".join(problems[:10])

    assert w.stop() == 0, f"the container did not exit 0 on SIGTERM\n{w.log_tail()}"


def test_the_image_ships_the_native_backend() -> None:
    """`coolant replay` and `coolant tune` in the image run on coolant_native (built in the Dockerfile's own stage)."""
    image = built_image("COOLANT_IMAGE")
    code = "from coolant import native_backend; print(native_backend.resolve('native'))"
    out = docker("run", "--rm", "--network", "host", "--entrypoint", "python3", image, "-c", code)
    assert out.strip() == "native"
