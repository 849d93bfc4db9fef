"""Issue 16 §5 live: every command against a SCRAM-SHA-512 + TLS Kafka and a `requirepass` + TLS Redis.

Both are started by the project's scripts (`KAFKA_SECURE=1 scripts/kafka-local`, `REDIS_SECURE=1 scripts/redis-local`,
through tests/support/brokers.py) on ports free at run time, and stopped after the module. Each command runs as a
subprocess, as a user runs it: with the right settings it works; with a wrong one it says so in one line naming the
setting, exits non-zero (the worker: /healthz unhealthy with the reason), and never prints the secret.
"""

from __future__ import annotations

import asyncio
import os
import select
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from aiokafka import AIOKafkaProducer

from coolant.config.runtime import KafkaSettings, RedisSettings
from coolant.io.connect import kafka_client_args, redis_client
from coolant.topics import Topics
from tests.support.brokers import LocalKafka, LocalRedis, unavailable
from tests.support.waiting import wait_for
from tests.support.worker import Worker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]  # a first start downloads the broker's jars

ROOT = Path(__file__).resolve().parents[2]
USER, PASSWORD = "coolant", "coolant-secret"
WRONG = "wrong-pw-5f1d9c"
"""A wrong password: it must appear in no output."""


@dataclass(frozen=True)
class Secured:
    bootstrap: str
    kafka_ca: str
    redis_url: str
    redis_ca: str

    def env(self, kafka_password: str = PASSWORD, redis_password: str = PASSWORD) -> dict[str, str]:
        """The environment of a command that talks to these two (no config file needed)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("COOLANT_KAFKA_", "COOLANT_REDIS_"))}
        env.update(
            KAFKA_BOOTSTRAP=self.bootstrap, REDIS_URL=self.redis_url,
            COOLANT_KAFKA_SECURITY_PROTOCOL="SASL_SSL", COOLANT_KAFKA_SASL_MECHANISM="SCRAM-SHA-512",
            COOLANT_KAFKA_SASL_USERNAME=USER, COOLANT_KAFKA_SASL_PASSWORD=kafka_password,
            COOLANT_KAFKA_SSL_CAFILE=self.kafka_ca,
            COOLANT_REDIS_PASSWORD=redis_password, COOLANT_REDIS_SSL_CAFILE=self.redis_ca,
            PYTHONUNBUFFERED="1",
        )
        return env

    def kafka(self) -> dict[str, Any]:
        return kafka_client_args(KafkaSettings(
            bootstrap_servers=self.bootstrap, security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512",
            sasl_plain_username=USER, sasl_plain_password=PASSWORD, ssl_cafile=self.kafka_ca,
        ))

    def redis(self) -> Any:
        return redis_client(RedisSettings(url=self.redis_url, password=PASSWORD, ssl_cafile=self.redis_ca))


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    """A secured broker and Redis of this module's own, on ports free at run time, stopped after it."""
    workdir = tmp_path_factory.mktemp("secured")
    kafka, redis = LocalKafka(workdir, secure=True), LocalRedis(workdir, secure=True)
    try:
        kafka.start()
        try:
            redis.start()
            assert kafka.cafile is not None and redis.cafile is not None
            yield Secured(kafka.bootstrap, kafka.cafile, redis.url, redis.cafile)
        finally:
            redis.stop()
    except RuntimeError as exc:
        unavailable(str(exc))
    finally:
        kafka.stop()


def coolant(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "coolant.cli", *args], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=timeout, check=False)


def assert_one_line_error(proc: subprocess.CompletedProcess[str], *words: str, secret: str = WRONG) -> str:
    """Non-zero, no traceback, the secret nowhere, and the last stderr line is coolant's error naming `words`."""
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "Traceback" not in out, out
    assert secret not in out
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("coolant: error: "), out
    for word in words:
        assert word in line, line
    return line


def write_config(path: Path, coolant_section: dict[str, Any] | None = None) -> Path:
    group = f"grp-{uuid.uuid4().hex[:6]}"
    model_list = [
        {"model_name": group, "litellm_params": {"model": "openai/m", "api_base": "http://127.0.0.1:9/v1",
                                                 "api_key": "sk-test"}, "model_info": {"id": dep}}
        for dep in ("sec-a", "sec-b")
    ]
    data: dict[str, Any] = {"model_list": model_list, "router_settings": {"cooldown_time": 300}}
    if coolant_section:
        data["coolant"] = coolant_section
    path.write_text(yaml.safe_dump(data))
    return path


async def send(s: Secured, topic: str, key: bytes, value: bytes) -> None:
    producer = AIOKafkaProducer(**s.kafka(), acks="all")
    await producer.start()
    try:
        await (await producer.send(topic, value, key=key))
    finally:
        await producer.stop()


def cooldown_record(dep: str) -> bytes:
    now = time.time()
    return orjson.dumps({
        "schema": "coolant.cooldown/1", "event_id": f"ev-{uuid.uuid4().hex}", "deployment_id": dep,
        "model_group": "grp-secure", "ts": now, "until": now + 60, "cooldown_time": 60, "reason": "rate_limited",
        "status_code": 429, "exception_type": "RateLimitError", "exception_received": "slow down",
        "trigger_event_id": "t-1", "window": {"start": now, "successes": 0, "failures": 1},
    })


def first_stdout_line(cmd: list[str], env: dict[str, str], contains: str, timeout: float = 90) -> str:
    """Run a long-running command until a stdout line holds `contains`; then stop it (SIGTERM)."""
    proc = subprocess.Popen([sys.executable, "-m", "coolant.cli", *cmd], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=ROOT, text=True)
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 1.0)
            if ready:
                line = proc.stdout.readline()
                if contains in line:
                    return line
                if not line and proc.poll() is not None:
                    break
        raise AssertionError(f"no stdout line with {contains!r}; stderr: {proc.stderr.read() if proc.stderr else ''}")
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ---------------------------------------------------------------------------------------------------------------
# Kafka commands


async def test_publish_tail_and_alerts_over_sasl_ssl(secured: Secured, tmp_path: Path) -> None:
    """publish (from the environment), tail and alerts (from a config's coolant.kafka) on the SCRAM+TLS broker."""
    prefix = f"sec{uuid.uuid4().hex[:8]}."
    line = orjson.dumps({"schema": "coolant.outcome/1", "event_id": "e1", "ts": time.time(), "deployment_id": "sec-a",
                         "model_group": "g", "ok": True})
    records = tmp_path / "in.jsonl"
    records.write_bytes(line + b"\n")
    env = secured.env()
    proc = coolant("publish", str(records), "--topic-prefix", prefix, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "1 records sent" in proc.stderr

    await send(secured, Topics(prefix).cooldowns, b"sec-a", cooldown_record("sec-a"))
    config = write_config(tmp_path / "config.yaml", {"kafka": {
        "bootstrap_servers": secured.bootstrap, "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": USER, "sasl_plain_password": "os.environ/SECURE_TEST_KAFKA_PASSWORD",
        "ssl_cafile": secured.kafka_ca,
    }})
    plain = {k: v for k, v in os.environ.items() if not k.startswith("COOLANT_KAFKA_")}
    plain.update(SECURE_TEST_KAFKA_PASSWORD=PASSWORD, KAFKA_BOOTSTRAP="")
    tail = await asyncio.to_thread(
        first_stdout_line, ["tail", "--config", str(config), "--topic-prefix", prefix, "--from-beginning", "--json",
                            "--no-transitions"], plain, '"sec-a"')
    assert orjson.loads(tail)["reason"] == "rate_limited"
    alert = await asyncio.to_thread(
        first_stdout_line, ["alerts", "--dry-run", "--from-beginning", "--config", str(config), "--topic-prefix",
                            prefix, "--group", f"{prefix}alerts", "--no-transitions"], plain, "sec-a")
    assert orjson.loads(alert)  # a webhook payload naming the deployment


def test_a_wrong_kafka_password_is_one_line_for_every_kafka_command(secured: Secured, tmp_path: Path) -> None:
    records = tmp_path / "in.jsonl"
    records.write_bytes(b"")
    config = write_config(tmp_path / "config.yaml")
    env = secured.env(kafka_password=WRONG)
    commands = {
        "publish": ["publish", str(records), "--topic-prefix", "secwrong."],
        "deployments sync": ["deployments", "sync", str(config), "--topic-prefix", "secwrong."],
        "tail": ["tail", "--topic-prefix", "secwrong.", "--connect-timeout", "30"],
        "alerts": ["alerts", "--dry-run", "--topic-prefix", "secwrong.", "--connect-timeout", "30"],
        "probe": ["probe", "--config", str(config), "--once", "--topic-prefix", "secwrong."],
    }
    for name, args in commands.items():
        line = assert_one_line_error(coolant(*args, env=env), "authentication failed", "sasl_plain_password")
        assert secured.bootstrap in line, (name, line)


def test_config_problems_are_one_line_and_exit_2(secured: Secured, tmp_path: Path) -> None:
    """An unset os.environ/ variable, a missing CA file, a bad protocol: the setting is named, the value is not."""
    ref = write_config(tmp_path / "ref.yaml", {"kafka": {
        "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": USER,
        "sasl_plain_password": "os.environ/SECURE_TEST_UNSET_VARIABLE", "ssl_cafile": secured.kafka_ca}})
    env = {k: v for k, v in secured.env().items() if not k.startswith("COOLANT_KAFKA_")}
    proc = coolant("deployments", "sync", str(ref), "--bootstrap", secured.bootstrap, env=env)
    assert_one_line_error(proc, "SECURE_TEST_UNSET_VARIABLE is not set")
    assert proc.returncode == 2

    proc = coolant("publish", os.devnull, env={**secured.env(), "COOLANT_KAFKA_SSL_CAFILE": str(tmp_path / "no.pem")})
    assert_one_line_error(proc, "ssl_cafile", "cannot load the CA file")
    assert proc.returncode == 2
    assert str(tmp_path / "no.pem") not in proc.stderr

    bad = write_config(tmp_path / "bad.yaml", {"kafka": {"security_protocol": WRONG}})
    proc = coolant("deployments", "sync", str(bad), env=env)
    assert_one_line_error(proc, "coolant.kafka.security_protocol", "must be one of")
    assert proc.returncode == 2

    proc = coolant("tail", env={**secured.env(), "COOLANT_KAFKA_SASL_MECHANISM": WRONG})
    assert_one_line_error(proc, "sasl_mechanism", "must be one of")


def test_a_certificate_that_does_not_verify_is_named(secured: Secured) -> None:
    other_ca = str(Path(secured.kafka_ca).with_name("other-ca.pem"))
    proc = coolant("tail", "--connect-timeout", "30", env={**secured.env(), "COOLANT_KAFKA_SSL_CAFILE": other_ca})
    assert_one_line_error(proc, "ssl_cafile")


# ---------------------------------------------------------------------------------------------------------------
# Redis commands


async def test_status_over_tls_redis_with_a_password(secured: Secured) -> None:
    prefix = f"sec{uuid.uuid4().hex[:8]}:"
    client = secured.redis()
    try:
        value = orjson.dumps({"exception_received": "x", "status_code": "429", "timestamp": time.time(),
                              "cooldown_time": 120})
        await client.set(f"{prefix}deployment:sec-z:cooldown", value, ex=120)
    finally:
        await client.aclose()
    env = secured.env()
    proc = coolant("status", "--json", "--key-prefix", prefix, env=env)
    assert proc.returncode == 0, proc.stderr
    assert orjson.loads(proc.stdout.splitlines()[0])["deployment_id"] == "sec-z"

    assert_one_line_error(coolant("status", env=secured.env(redis_password=WRONG)), "authentication failed",
                          "password")
    other_ca = str(Path(secured.redis_ca).with_name("other-ca.pem"))
    assert_one_line_error(coolant("status", env={**env, "COOLANT_REDIS_SSL_CAFILE": other_ca}), "ssl_cafile")
    assert_one_line_error(coolant("status", env={**env, "COOLANT_REDIS_SSL_CAFILE": "/nonexistent/ca.pem"}),
                          "ssl_cafile", "cannot load")


def test_a_password_in_the_redis_url_is_never_printed(secured: Secured) -> None:
    """Issue 16: `status --redis-url redis://…?password=X` printed X when Redis was down."""
    env = {k: v for k, v in secured.env().items() if not k.startswith("COOLANT_REDIS_")}
    for url in (f"redis://127.0.0.1:9/0?password={WRONG}", f"redis://:{WRONG}@127.0.0.1:9/0",
                f"redis://user:{WRONG}@127.0.0.1:9/0", f"{secured.redis_url}?password={WRONG}"):
        assert_one_line_error(coolant("status", "--redis-url", url, env=env), "redis ")


async def test_probe_over_sasl_ssl_kafka_and_tls_redis(secured: Secured, tmp_path: Path) -> None:
    """One probe round (the upstream is down, so the verdict is unhealthy) through both secured services."""
    config = write_config(tmp_path / "config.yaml")
    prefix = f"sec{uuid.uuid4().hex[:8]}."
    key_prefix = prefix.replace(".", ":")
    proc = coolant("probe", "--config", str(config), "--once", "--topic-prefix", prefix, "--redis-key-prefix",
                   key_prefix, "--redis-url", secured.redis_url, "--timeout", "2", "--engine", "http",
                   env=secured.env())
    assert proc.returncode == 0, proc.stderr
    client = secured.redis()
    try:
        keys = await client.keys(f"{key_prefix}*")
    finally:
        await client.aclose()
    assert keys, "the prober wrote LiteLLM's shared health-check results key"
    assert_one_line_error(coolant("probe", "--config", str(config), "--once", "--topic-prefix", prefix,
                                  "--redis-url", secured.redis_url, env=secured.env(redis_password=WRONG)),
                          "authentication failed")


# ---------------------------------------------------------------------------------------------------------------
# The worker


def worker_config(s: Secured, path: Path, redis_password_var: str) -> Path:
    return write_config(path, {
        "kafka": {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": USER,
                  "sasl_plain_password": "os.environ/SECURE_TEST_KAFKA_PASSWORD", "ssl_cafile": s.kafka_ca},
        "redis": {"password": f"os.environ/{redis_password_var}", "ssl_cafile": s.redis_ca},
    })


def worker(s: Secured, tmp_path: Path, name: str, config: Path, env: dict[str, str]) -> Worker:
    prefix = f"sec{uuid.uuid4().hex[:8]}."
    plain = {k: v for k, v in os.environ.items() if not k.startswith(("COOLANT_KAFKA_", "COOLANT_REDIS_"))}
    return Worker(name=name, config=config, bootstrap=s.bootstrap, topic_prefix=prefix, app_id=f"{prefix}app",
                  workdir=tmp_path, redis_url=s.redis_url, redis_key_prefix=prefix.replace(".", ":"),
                  env={**plain, **env})


async def test_worker_decides_over_sasl_ssl_and_writes_tls_redis(secured: Secured, tmp_path: Path) -> None:
    config = worker_config(secured, tmp_path / "config.yaml", "SECURE_TEST_REDIS_PASSWORD")
    w = worker(secured, tmp_path, "secure", config,
               {"SECURE_TEST_KAFKA_PASSWORD": PASSWORD, "SECURE_TEST_REDIS_PASSWORD": PASSWORD}).start()
    try:
        await w.wait_healthy(120)
        rec = orjson.dumps({"schema": "coolant.outcome/1", "event_id": f"e-{uuid.uuid4().hex}", "ts": time.time(),
                            "deployment_id": "sec-a", "model_group": "g", "ok": False, "status_code": 429,
                            "exception_type": "RateLimitError", "exception_message": "slow down"})
        await send(secured, w.outcomes, b"sec-a", rec)
        client = secured.redis()
        try:
            key = f"{w.topic_prefix.replace('.', ':')}deployment:sec-a:cooldown"
            value = await wait_for(lambda: client.get(key), "the cooldown in the TLS Redis", 120, 0.5, w.log_tail)
        finally:
            await client.aclose()
        assert orjson.loads(value)["status_code"] == "429"
    finally:
        w.stop()


async def test_worker_with_a_wrong_redis_password_is_unhealthy_and_says_why(secured: Secured,
                                                                            tmp_path: Path) -> None:
    config = worker_config(secured, tmp_path / "config.yaml", "SECURE_TEST_REDIS_PASSWORD")
    w = worker(secured, tmp_path, "wrong-redis", config,
               {"SECURE_TEST_KAFKA_PASSWORD": PASSWORD, "SECURE_TEST_REDIS_PASSWORD": WRONG}).start()
    try:
        async def unhealthy() -> Any:
            status, body = await w.get("/healthz")
            return orjson.loads(body) if status == 503 else None

        body = await wait_for(unhealthy, "/healthz 503", 120, 0.5, w.log_tail)
        assert body["status"] == "unhealthy"
        assert "authentication failed" in body["problems"]["redis"]
        assert WRONG not in w.log_tail(10_000)
    finally:
        w.stop()


def test_worker_with_a_wrong_kafka_password_exits_with_one_line(secured: Secured, tmp_path: Path) -> None:
    config = worker_config(secured, tmp_path / "config.yaml", "SECURE_TEST_REDIS_PASSWORD")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COOLANT_KAFKA_", "COOLANT_REDIS_"))}
    env.update(SECURE_TEST_KAFKA_PASSWORD=WRONG, SECURE_TEST_REDIS_PASSWORD=PASSWORD)
    proc = coolant("worker", "--config", str(config), "--bootstrap", secured.bootstrap, "--redis-url",
                   secured.redis_url, "--topic-prefix", "secwrong.", "--data-dir", str(tmp_path / "data"),
                   "--web-port", "0", env=env)
    line = assert_one_line_error(proc, "authentication failed")
    assert proc.returncode == 1, line
