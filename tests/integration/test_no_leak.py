"""Issue 26 live: none of the 12 secret shapes leaves a worker, in any sink, and no record forges a line.

The secrets ride in valid outcomes (cooldowns), failed probes (health transitions, LiteLLM's health map) and invalid
records (dead letters); then every sink is read: the cooldowns, transitions and dead-letter topics, every Redis key
of the test's prefix, the admin API, /metrics, the worker's log, `coolant tail` and `coolant alerts --dry-run`
(the webhook payloads). Its own test function: the hostile mix of test_hardening is another engineer's.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import signal
import subprocess
import sys
import time

import orjson
import pytest
from redis.asyncio import Redis

from coolant.topics import Topics
from tests.support.kafka import produce, read_topic, wait_caught_up
from tests.support.records import ROOT, group_of, outcome
from tests.support.terminal import interruptible
from tests.support.waiting import wait_for
from tests.support.worker import Case

pytestmark = pytest.mark.integration

PEM_BODY = "MIIEowIBAAKCAQEAq7BFUpkGp3+LQmlQ\nYx9TB1nF2sQ4eR3jX8kLmN0pQrStUvWx"
SHAPES = {
    "openai": "sk-proj-Zq8Xr2Lp5Vn9Tx3Bc7Mk1Wd6Fg4Js0YaT3BlbkFJ",
    "anthropic": "sk-ant-api03-Rr4Tt6Yy8Uu0Ii2Oo4Pp6Aa8Ss0Dd2Ff4Gg6Hh8Jj0Kk2Ll4-QwErTy",
    "aws id": "AKIAZ7RQ3MPL4XK2VW9N",
    "aws secret": "q8Wf3kLm9Zp2Rt5Yx7Vb4Nc6Hj1Gd0Sa/Ee+Tu3K",  # 40 characters, as AWS issues them
    "google": "AIzaSyB-7qWeRtYuIoPaSdFgHjKlZxCvBnM1234",
    "github": "ghp_7hQ2wE4rT6yU8iO0pA2sD4fG6hJ8kL0zX1cV",
    "slack": "xoxb-2468013579-1357924680123-QwErTyUiOpAsDfGhJkLzXcVb",
    "jwt": "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzdmMtYWNjb3VudCJ9.Zm9vYmFyYmF6cXV4cXV1eA",
    "bearer": "tok_9f8e7d6c5b4a39281716abcdef",
    "url password": "Pa55w0rd-Very-S3cret",
    "azure key": "f0e1d2c3b4a5968778695a4b3c2d1e0f",
    "pem": PEM_BODY,
    "json password": "correct horse battery staple 42",
}
TEXTS = {
    "openai": f"litellm.AuthenticationError: Incorrect API key provided: {SHAPES['openai']}.",
    "anthropic": f"AnthropicException - invalid x-api-key {SHAPES['anthropic']}",
    "aws id": f"BedrockException - credentials {SHAPES['aws id']} {SHAPES['aws secret']} were rejected",
    "google": f"VertexAIException - API key not valid: {SHAPES['google']}",
    "github": f"GitHub models: Bad credentials {SHAPES['github']}",
    "slack": f"callback failed for token {SHAPES['slack']}",
    "jwt": f"token {SHAPES['jwt']} expired",
    "bearer": f"401 Unauthorized: Authorization: Bearer {SHAPES['bearer']}",
    "url password": f"cannot reach https://admin:{SHAPES['url password']}@gw.internal/v1",
    "azure key": f"AzureException - Access denied: api-key: {SHAPES['azure key']}",
    "pem": f"bad key -----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY----- in config",
    "json password": f'Error code: 400 - {{"user": "svc", "password": "{SHAPES["json password"]}"}}',
}
FORGED = "2027-01-15 08:00:00Z  COOLDOWN dep-forged (grp-0)  rate_limited"


def leaks(where: str, blob: bytes | str) -> list[str]:
    text = blob.decode("utf-8", "replace") if isinstance(blob, bytes) else blob
    text = text.replace("\\n", "\n").replace("\\/", "/")  # a secret escaped in JSON is still a secret
    return [
        f"{where}: {name}" for name, secret in SHAPES.items() for part in secret.split("\n")
        if part[:10] in text or part[-10:] in text  # a part of one shows too: E4 keeps the first 50 characters
    ]


def records(now: float) -> tuple[list[tuple[bytes, bytes]], list[tuple[bytes, bytes]], list[tuple[bytes, bytes]]]:
    """(outcomes that cool, failed probes, invalid records), each with its Kafka key, one shape each."""
    cooling, probes, invalid = [], [], []
    for i, (name, text) in enumerate(TEXTS.items()):
        dep = f"dep-{i:02d}"
        typed = name in ("slack", "jwt")  # a secret in the exception type too
        cooling.append((dep.encode(), outcome(
            f"nl-{i}", round(now + i * 0.01, 3), dep, False, status_code=401,
            exception_type=f"AuthenticationError {SHAPES[name]}" if typed else "AuthenticationError",
            exception_message=text + ("\n" + FORGED if i == 0 else ""))))
        probes.append((dep.encode(), orjson.dumps({
            "schema": "coolant.health/1", "event_id": f"np-{i}", "ts": round(now + i * 0.01, 3), "deployment_id": dep,
            "model_group": group_of(dep), "healthy": False, "status_code": 401, "exception_type": "AuthenticationError",
            "exception_message": text, "prober": "p-1"})))
        invalid.append((dep.encode(), outcome(f"ni-{i}", now, dep, "not a bool", exception_message=text)))
    invalid.append((b"dep-00", outcome("ni-dup", now, "dep-00", False, exception_message=TEXTS["pem"]).replace(
        b'"deployment_id":"dep-00"', b'"deployment_id":"dep-00","deployment_id":"dep-01"')))
    return cooling, probes, invalid


async def _run_cli(*args: str, seconds: float) -> tuple[bytes, bytes]:
    """A `coolant` command that follows topics: run it `seconds`, then Ctrl-C; all it wrote."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "coolant.cli", *args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "COLUMNS": "300"}, preexec_fn=interruptible)
    assert proc.stdout is not None and proc.stderr is not None
    out, err = asyncio.create_task(proc.stdout.read()), asyncio.create_task(proc.stderr.read())
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(proc.wait(), seconds)
    if proc.returncode is None:
        proc.send_signal(signal.SIGINT)
        await asyncio.wait_for(proc.wait(), 30)
    return await out, await err


async def test_no_secret_of_any_shape_reaches_any_sink(case: Case, kafka_bootstrap: str, redis_url: str) -> None:
    now = time.time() - 5
    cooling, probes, invalid = records(now)
    w = await case.worker("a", kafka_bootstrap, redis_url=redis_url)
    await w.wait_ready()
    names = Topics(case.prefix)
    await produce(kafka_bootstrap, case.outcomes, cooling + invalid)
    await produce(kafka_bootstrap, names.health, probes)
    await wait_caught_up(kafka_bootstrap, case.app_id, case.outcomes, on_timeout=case.logs)
    await wait_caught_up(kafka_bootstrap, case.app_id, names.health, on_timeout=case.logs)
    await wait_caught_up(kafka_bootstrap, case.app_id, case.cooldowns, on_timeout=case.logs)

    cooldowns = [orjson.loads(m.value) for m in await read_topic(kafka_bootstrap, case.cooldowns)]
    cooled = {cd["deployment_id"] for cd in cooldowns if cd["trigger_event_id"].startswith("nl-")}
    assert cooled == {f"dep-{i:02d}" for i in range(len(TEXTS))}, "every planted record must cool"
    found: list[str] = []
    for topic in (case.cooldowns, names.health_transitions, names.health_state):
        for m in await read_topic(kafka_bootstrap, topic):
            found += leaks(topic, m.value)
    letters = [orjson.loads(m.value) for m in await read_topic(kafka_bootstrap, case.deadletter)]
    planted = [d for d in letters if d["topic"] == case.outcomes and "ni-" in str(d)]
    assert len(planted) == len(invalid), "every invalid record must be dead-lettered"
    for d in letters:
        raw = base64.b64decode(d["raw"]) if d.get("raw_encoding") == "base64" else d["raw"]
        found += leaks("dead letter", raw) + leaks("dead-letter error", d["error"])

    client = Redis.from_url(redis_url)

    async def health_map_holds_all() -> bool:
        raw = await client.get(f"{case.key_prefix}litellm:health_check:deployment_health_state")
        return raw is not None and len(orjson.loads(raw)) >= len(TEXTS)

    try:
        await wait_for(health_map_holds_all, "the health map", 30, 0.2, case.logs)
        async for key in client.scan_iter(match=f"{case.key_prefix}*"):
            value = await client.get(key)
            found += leaks(f"redis {key!r}", value or b"") + leaks("a redis key name", key)
    finally:
        await client.aclose()
    for path in ("/cooldowns", "/metrics", *(f"/deployments/dep-{i:02d}" for i in range(len(TEXTS)))):
        _, body = await w.get(path)
        found += leaks(f"GET {path}", body)

    tail_out, tail_err = await _run_cli("tail", "--bootstrap", kafka_bootstrap, "--topic-prefix", case.prefix,
                                        "--from-beginning", seconds=25)
    found += leaks("coolant tail", tail_out) + leaks("coolant tail stderr", tail_err)
    lines = tail_out.decode().splitlines()
    assert len([ln for ln in lines if "COOLDOWN" in ln and "nl-" not in ln]) >= len(TEXTS), tail_err.decode()
    assert all(ln[:4].isdigit() for ln in lines), "every tail line is a record's line, none forged"
    alerts_out, alerts_err = await _run_cli(
        "alerts", "--bootstrap", kafka_bootstrap, "--topic-prefix", case.prefix, "--from-beginning", "--dry-run",
        "--group", f"{case.app_id}-alerts", "--suppress-period", "0", seconds=25)
    assert alerts_out.count(b'"blocks"') >= len(TEXTS), alerts_err.decode()[-2000:]
    found += leaks("alert payloads", alerts_out) + leaks("coolant alerts log", alerts_err)
    found += leaks("worker log", w.log_path.read_bytes())
    assert FORGED not in w.log_path.read_text().replace(f"\\n{FORGED}", "")
    assert not found, found
