"""Services for tests: the session's shared Kafka and Redis (`shared_service`, behind the `kafka_bootstrap` and
`redis_url` fixtures), and extra brokers and Redis servers a test starts and stops at will (outages, failover, a
secured cluster), from the project's own scripts, on ports chosen free at run time (`ports.py`) and state
directories of their own. A test never stops the shared ones."""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NoReturn

import pytest

from tests import containers_support as containers
from tests.support.ports import free_ports

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 900.0
"""A first start on a fresh machine downloads the broker's jars with Maven."""


def unavailable(why: str) -> NoReturn:
    """A service a test needs cannot be had: the test fails under `REQUIRE_INTEGRATION=1` (CI), else it skips."""
    if os.environ.get("REQUIRE_INTEGRATION") == "1":
        pytest.fail(why, pytrace=False)
    pytest.skip(why)


def shared_service(
    what: str, env: str, image_env: str, default_image: str,
    container: Callable[[str], contextlib.AbstractContextManager[str]], script: str,
) -> Iterator[str]:
    """A session's shared Kafka or Redis address: `env` if set, else a testcontainers container when a Docker
    engine answers and has the image (`image_env`, else `default_image`), else `scripts/<script> start`; failing
    all three, `unavailable`."""
    if address := os.environ.get(env):
        yield address
        return
    image = os.environ.get(image_env, default_image)
    if containers.docker_ok() and containers.image_available(image):
        with container(image) as address:
            yield address
        return
    try:
        address = start_local(script, env)
    except RuntimeError as exc:
        unavailable(f"{what} unavailable: no {env}, no Docker engine with a {what} image, and {exc}")
    yield address


def start_local(script: str, key: str) -> str:
    """Run ``scripts/<script> start`` and return the value of its ``KEY=...`` stdout line."""
    try:
        proc = subprocess.run(
            [str(ROOT / "scripts" / script), "start"],
            capture_output=True,
            text=True,
            timeout=900,  # the first Kafka start downloads jars with Maven
            env={**os.environ, "PYTHON": os.environ.get("PYTHON", sys.executable)},
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RuntimeError(f"scripts/{script} start: {exc}") from None
    if proc.returncode == 0:
        for line in reversed(proc.stdout.splitlines()):
            if line.startswith(f"{key}="):
                return line.split("=", 1)[1].strip()
    raise RuntimeError(f"scripts/{script} start failed (rc={proc.returncode}): {proc.stderr.strip()[-1500:]}")


def _shared_state() -> Path:
    return Path(os.environ.get("COOLANT_STATE_DIR") or ROOT / ".local")


_started: set[LocalKafka] = set()
"""Extra brokers started and not stopped yet: killed when the test process exits (`_reap_started`)."""


@atexit.register
def _reap_started() -> None:
    """A test process that ends without its fixtures' teardown (an interrupted run) leaves no broker running."""
    for broker in list(_started):
        broker.reap()


class LocalKafka:
    """A single-node broker from `scripts/kafka-local` (`start()`, `stop()`, `bootstrap`), its jars linked from
    the shared broker's state so no Maven run is needed. `secure`: SASL_SSL (SCRAM-SHA-512 over TLS) on
    `bootstrap`; `start()` then also sets `cafile`."""

    def __init__(self, workdir: Path, *, secure: bool = False) -> None:
        self.port = free_ports(3 if secure else 2)  # listener, controller (+1), secured: internal listener (+2)
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.state = workdir / "kafka-state"
        self.state.mkdir(parents=True, exist_ok=True)
        self.cafile: str | None = None
        self.env = {
            **os.environ, "KAFKA_PORT": str(self.port), "KAFKA_CONTROLLER_PORT": str(self.port + 1),
            "KAFKA_STATE_DIR": str(self.state), "PYTHON": os.environ.get("PYTHON", sys.executable),
        }
        if secure:
            self.env.update(KAFKA_SECURE="1", KAFKA_INTERNAL_PORT=str(self.port + 2))
        shared = Path(os.environ.get("KAFKA_STATE_DIR") or _shared_state() / "kafka")
        for lib in shared.glob("lib-*"):
            if (lib / ".complete").exists() and not (self.state / lib.name).exists():
                (self.state / lib.name).symlink_to(lib.resolve(), target_is_directory=True)

    @property
    def node(self) -> Path:
        """The broker's own directory under `state` (`scripts/kafka-local`'s NODE: pidfile, properties, logs)."""
        return self.state / f"node-{self.port}"

    def _run(self, action: str, timeout: float = START_TIMEOUT) -> subprocess.CompletedProcess[str]:
        """`scripts/kafka-local <action>`; a run past `timeout` is a failed run (rc -9), not an exception."""
        cmd = [str(ROOT / "scripts" / "kafka-local"), action]
        try:
            return subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr or ""
            return subprocess.CompletedProcess(cmd, -9, "", f"{err}\ntimed out after {timeout:g} s")

    def start(self, timeout: float = START_TIMEOUT) -> float:
        """Start (or find running) and wait until it answers; the seconds that took. A start that fails or times
        out leaves no broker behind: the script daemonizes the broker, so it would outlive the test."""
        t0 = time.monotonic()
        r = self._run("start", timeout)
        if r.returncode != 0:
            self.reap()
            raise RuntimeError(f"kafka-local start on {self.port} failed (rc={r.returncode}):\n{r.stderr[-3000:]}")
        _started.add(self)
        for line in r.stdout.splitlines():
            if line.startswith("KAFKA_CAFILE="):
                self.cafile = line.split("=", 1)[1].strip()
        return time.monotonic() - t0

    def stop(self) -> float:
        """Stop (a stopped broker stays stopped); the seconds that took. If the script's controlled shutdown
        fails or hangs, the broker is killed (`reap`) before the error is raised."""
        t0 = time.monotonic()
        r = self._run("stop")
        if r.returncode != 0:
            self.reap()
            raise RuntimeError(f"kafka-local stop on {self.port} failed (rc={r.returncode}):\n{r.stderr[-3000:]}")
        _started.discard(self)
        return time.monotonic() - t0

    def pid(self) -> int | None:
        """The broker's process id if this broker's process is alive (its pidfile, checked against the process's
        command line so a reused pid is never taken for it), else None."""
        try:
            pid = int((self.node / "kafka.pid").read_text().strip())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, ValueError):
            return None
        return pid if str(self.node / "server.properties").encode() in cmdline else None

    def reap(self) -> None:
        """Kill this broker's process, whatever state the script left it in (SIGKILL: it is a test's throwaway
        broker). A broker the script is still launching writes its pidfile within moments: waited for briefly."""
        deadline = time.monotonic() + 5
        while (pid := self.pid()) is None and time.monotonic() < deadline:
            if not (self.node / "kafka.pid").exists() and not (self.node / "server.properties").exists():
                break  # the script never got as far as launching it
            time.sleep(0.1)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):  # the script's child, reparented: not ours to wait on
                os.waitpid(pid, os.WNOHANG)
            while time.monotonic() < deadline + 10 and Path(f"/proc/{pid}").exists() and self.pid() == pid:
                time.sleep(0.1)
        _started.discard(self)

    def log_tail(self, lines: int = 40) -> str:
        log = self.state / f"node-{self.port}" / "logs" / "server.log"
        with contextlib.suppress(OSError):
            return f"--- broker {self.port} ---\n" + "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
        return ""


class LocalRedis:
    """A Redis server from `scripts/redis-local` (`start()`, `stop()`, `url`); `secure`: `requirepass` and TLS
    only, `start()` then also sets `cafile`."""

    def __init__(self, workdir: Path, *, secure: bool = False) -> None:
        self.port = free_ports(1)
        self.state = workdir / "redis-state"
        self.state.mkdir(parents=True, exist_ok=True)
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.cafile: str | None = None
        self.env = {**os.environ, "REDIS_PORT": str(self.port), "REDIS_STATE_DIR": str(self.state),
                    "PYTHON": os.environ.get("PYTHON", sys.executable)}
        if secure:
            self.env["REDIS_SECURE"] = "1"

    def _run(self, action: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(ROOT / "scripts" / "redis-local"), action], env=self.env, capture_output=True,
                              text=True, timeout=120, check=False)

    def start(self) -> None:
        r = self._run("start")
        if r.returncode != 0:
            raise RuntimeError(f"redis-local start on {self.port} failed (rc={r.returncode}):\n{r.stderr[-3000:]}")
        for line in r.stdout.splitlines():
            key, _, value = line.partition("=")
            if key == "REDIS_URL":
                self.url = value.strip()
            elif key == "REDIS_CAFILE":
                self.cafile = value.strip()

    def stop(self) -> None:
        r = self._run("stop")
        if r.returncode != 0:
            raise RuntimeError(f"redis-local stop on {self.port} failed (rc={r.returncode}):\n{r.stderr[-3000:]}")
