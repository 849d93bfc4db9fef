"""Redis for tests (a pytest plugin, registered in tests/conftest.py): the `redis_url` session fixture (as
`kafka_bootstrap`: `REDIS_URL`, testcontainers, `scripts/redis-local start`), a throwaway redis-server a test may
stop (a crash), and the checks of what LiteLLM's keys hold."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import pytest

from tests import containers_support as containers
from tests.support.brokers import shared_service
from tests.support.ports import free_port
from tests.support.records import litellm_value

if TYPE_CHECKING:
    from redis.asyncio import Redis


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    yield from shared_service("redis", "REDIS_URL", "REDIS_TEST_IMAGE", containers.DEFAULT_REDIS_IMAGE,
                              containers.redis_container, "redis-local")


class RedisServer:
    """A throwaway redis-server on a free port, no persistence: stopping it loses everything, like a crash."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.dir = workdir / f"redis-{self.port}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.pidfile = self.dir / "redis.pid"
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 20.0) -> None:
        subprocess.run(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--save", "", "--appendonly", "no",
             "--dir", str(self.dir), "--daemonize", "yes", "--pidfile", str(self.pidfile),
             "--logfile", str(self.dir / "redis.log")],
            check=True, capture_output=True, timeout=timeout,
        )
        deadline = time.monotonic() + timeout
        while not self.ping():
            if time.monotonic() > deadline:
                raise AssertionError(f"redis-server on {self.port} did not answer PING within {timeout} s")
            time.sleep(0.1)

    def ping(self) -> bool:
        r = subprocess.run(["redis-cli", "-p", str(self.port), "ping"], capture_output=True, text=True, check=False)
        return r.stdout.strip() == "PONG"

    def stop(self, timeout: float = 20.0) -> None:
        """SHUTDOWN NOSAVE, then wait until the port no longer answers (and the pid is gone)."""
        pid = self._pid()
        subprocess.run(["redis-cli", "-p", str(self.port), "shutdown", "nosave"], capture_output=True,
                       check=False, timeout=timeout)
        deadline = time.monotonic() + timeout
        while self.ping() or (pid is not None and _pid_alive(pid)):
            if time.monotonic() > deadline:
                if pid is not None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                break
            time.sleep(0.1)

    def _pid(self) -> int | None:
        try:
            return int(self.pidfile.read_text().strip())
        except (OSError, ValueError):
            return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.asynccontextmanager
async def scoped_redis(url: str, prefix: str) -> AsyncIterator[Redis]:
    """A client on `url` that deletes every key under `prefix` when it closes: the test's keys, whatever it left."""
    from redis.asyncio import Redis

    client = Redis.from_url(url)
    try:
        yield client
    finally:
        try:
            keys = [k async for k in client.scan_iter(match=prefix + "*", count=1000)]
            if keys:
                await client.delete(*keys)
        finally:
            await client.aclose()


async def delete_redis_keys(url: str, prefix: str) -> None:
    """Every key under `prefix` deleted; a Redis that does not answer is left as it is (a bench's clean-up)."""
    with contextlib.suppress(Exception):
        async with scoped_redis(url, prefix):
            pass


async def redis_mismatches(url: str, key_prefix: str, expected: dict[str, dict[str, Any]],
                           absent: Iterable[str] = ()) -> list[str]:
    """What differs between Redis and `expected` (deployment -> the cooldown its keys must hold): LiteLLM's value
    byte for byte, the absolute expiry at `until` (ms, rounded up), the detail key; `absent` must have no key."""
    import math

    from redis.asyncio import Redis

    problems: list[str] = []
    client = Redis.from_url(url)
    try:
        for dep, cd in sorted(expected.items()):
            key = f"{key_prefix}deployment:{dep}:cooldown"
            raw = await client.get(key)
            if raw is None:
                problems.append(f"{key}: missing, expected {cd['event_id']} until {cd['until']}")
                continue
            want = litellm_value(cd)
            if raw != want:
                problems.append(f"{key}: {raw!r} != expected {want!r} ({cd['event_id']})")
            exp = await client.pexpiretime(key)
            if exp != math.ceil(cd["until"] * 1000):
                problems.append(f"{key}: expires at {exp} ms, expected {math.ceil(cd['until'] * 1000)}")
            detail = await client.get(f"{key_prefix}coolant:cooldown:{dep}")
            if detail is None or orjson.loads(detail) != cd:
                problems.append(f"{key_prefix}coolant:cooldown:{dep}: {detail!r} != {cd}")
        for dep in absent:
            key = f"{key_prefix}deployment:{dep}:cooldown"
            if await client.exists(key):
                problems.append(f"{key}: present ({await client.get(key)!r}) but no cooldown was emitted for {dep}")
    finally:
        await client.aclose()
    return problems
