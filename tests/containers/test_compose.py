"""docker-compose.yml: valid as written, and the whole stack up with the local images standing in.

`docker-compose config` checks the file (Debian's docker-compose, compose file spec). The stack test runs it as the
README says, with the images and ports from the environment (free ports, so nothing else on the host is touched),
publishes a 401 for a deployment of the sample config and waits for its cooldown in the stack's Redis and on its
cooldown topic. All services use host networking: no network is created.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import redis.asyncio as redis_asyncio
import yaml

from tests.containers_support import built_image, docker
from tests.support.kafka import produce_lines, read_json
from tests.support.ports import free_port, free_ports
from tests.support.records import outcome, uid
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]  # builds and starts images
ROOT = Path(__file__).resolve().parents[2]
DEPLOYMENT = "gemini-flash-free-1"  # in examples/litellm.yaml, the config the stack mounts by default


def compose(env: dict[str, str], *args: str, timeout: float = 300.0) -> str:
    exe = shutil.which("docker-compose")
    if exe is None:
        if os.environ.get("REQUIRE_CONTAINERS") == "1":
            pytest.fail("docker-compose not installed (scripts/docker-local start installs it)", pytrace=False)
        pytest.skip("docker-compose not installed")
    proc = subprocess.run([exe, "-f", str(ROOT / "docker-compose.yml"), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)
    assert proc.returncode == 0, f"docker-compose {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def test_compose_config_defaults() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KAFKA_", "REDIS_", "COOLANT_"))}
    cfg = yaml.safe_load(compose(env, "config"))
    services = cfg["services"]
    assert services["kafka"]["image"] == "apache/kafka:4.1.1"
    assert services["redis"]["image"] == "redis:7"
    for name, svc in services.items():
        assert svc.get("network_mode") == "host", f"{name} must use host networking"
        assert "ports" not in svc, f"{name}: host networking publishes no ports"
    worker = services["worker"]
    mounts = [v if isinstance(v, dict) else dict(zip(("source", "target"), v.split(":"), strict=False))
              for v in worker["volumes"]]  # docker-compose 1.x prints the short `src:target:mode` form
    source = Path(next(m["source"] for m in mounts if m["target"] == "/config"))
    assert source == ROOT / "examples"
    assert (source / "litellm.yaml").is_file(), "the mounted config must exist"
    assert worker["command"][:3] == ["worker", "--config", "/config/litellm.yaml"]
    assert worker["environment"]["KAFKA_BOOTSTRAP"] == "127.0.0.1:9092"


@pytest.fixture
def stack() -> Iterator[dict[str, str]]:
    kport, rport, wport = free_ports(2), free_port(), free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("KAFKA_", "REDIS_"))},
        "COMPOSE_PROJECT_NAME": f"coolant-it-{uid()}",
        "KAFKA_IMAGE": built_image("KAFKA_IMAGE"),
        "REDIS_IMAGE": built_image("REDIS_IMAGE"),
        "COOLANT_IMAGE": built_image("COOLANT_IMAGE"),
        "KAFKA_PORT": str(kport), "KAFKA_CONTROLLER_PORT": str(kport + 1), "REDIS_PORT": str(rport),
        "COOLANT_WEB_PORT": str(wport),
    }
    networks = docker("network", "ls", "--format", "{{.Name}}").split()
    try:
        compose(env, "up", "-d", "--no-build")
        yield env
    finally:
        logs = subprocess.run(["docker-compose", "-f", str(ROOT / "docker-compose.yml"), "logs", "--tail", "40"],
                              cwd=ROOT, env=env, capture_output=True, text=True, check=False).stdout
        print(logs)
        compose(env, "down", "-v", "--timeout", "30")
    assert docker("network", "ls", "--format", "{{.Name}}").split() == networks, "compose created a network"


async def test_compose_stack_cools_a_deployment(stack: dict[str, str]) -> None:
    bootstrap = f"127.0.0.1:{stack['KAFKA_PORT']}"
    project = stack["COMPOSE_PROJECT_NAME"]

    async def worker_healthy() -> bool:
        out = docker("ps", "--filter", f"label=com.docker.compose.project={project}",
                     "--filter", "label=com.docker.compose.service=worker", "--format", "{{.Status}}")
        return "(healthy)" in out

    await wait_for(worker_healthy, "the compose worker to report healthy", 180, 1.0)
    event = f"compose-{uid()}"
    ts = round(time.time(), 3)  # now: the worker dead-letters records from the future
    line = outcome(event, ts, DEPLOYMENT, False, model_group="gemini-flash", status_code=401,
                   exception_type="AuthenticationError", exception_message="litellm.AuthenticationError: bad key")

    await produce_lines(bootstrap, "coolant.outcomes", [line])
    client = redis_asyncio.from_url(f"redis://127.0.0.1:{stack['REDIS_PORT']}/0")
    try:
        async def cooled() -> bytes | None:
            return await client.get(f"deployment:{DEPLOYMENT}:cooldown")  # type: ignore[no-any-return]

        value = await wait_for(cooled, f"deployment:{DEPLOYMENT}:cooldown in the stack's Redis", 120, 0.5)
    finally:
        await client.aclose()
    assert orjson.loads(value)["exception_received"], value
    cooldowns = await read_json(bootstrap, "coolant.cooldowns")
    assert [cd["trigger_event_id"] for cd in cooldowns] == [event]
