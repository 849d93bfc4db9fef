"""Shared pieces of the LiteLLM integration tests: deployments (on the fake upstream, tests/support/upstream.py),
a collecting publisher and a real proxy process.

This directory has no `__init__.py` on purpose: as a package it would be named `litellm` (pytest names a
package after its directory when `tests/` is no package) and shadow the real LiteLLM. Its modules are
imported by their own names, so they carry `litellm` in them to stay unique.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network fetch of the cost map at import

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `tests.support` when pytest is not run as `python -m pytest`
    sys.path.insert(0, str(ROOT))

from tests.support.ports import free_port  # noqa: E402
from tests.support.upstream import GOOD_KEY  # noqa: E402


def deployment(dep_id: str, group: str, api_base: str | None = None, *, key: str = GOOD_KEY,
               mock: str | None = None, **params: Any) -> dict[str, Any]:
    """One model_list entry: against the fake server (`api_base`) or a LiteLLM `mock_response`."""
    litellm_params: dict[str, Any] = {"model": "openai/gpt-4o-mini", "api_key": key, **params}
    if api_base is not None:
        litellm_params["api_base"] = api_base
    if mock is not None:
        litellm_params["mock_response"] = mock
    return {"model_name": group, "litellm_params": litellm_params, "model_info": {"id": dep_id}}


MESSAGES = [{"role": "user", "content": "hi"}]


class Collected:
    """A publisher that keeps what it is given (for tests where the Kafka side is not under test)."""

    def __init__(self) -> None:
        self.records: list[Any] = []

    def publish(self, record: Any) -> bool:
        self.records.append(record)
        return True


class Proxy:
    """One `litellm --config` process on a free port of 127.0.0.1, as a deployment runs it, logging to a file.

    It runs with `cwd=workdir` and this checkout on `PYTHONPATH`; `env` is added to the environment. `client()`
    is an `openai.AsyncOpenAI` on it with the SDK's own retries off (every failed request is one the caller
    sees); `client` is one made on first use, for a caller that stays on one event loop.
    """

    def __init__(self, name: str, config: Path, env: dict[str, str], workdir: Path, timeout: float = 30.0) -> None:
        self.name, self.port, self.timeout = name, free_port(), timeout
        self.key = f"sk-{uuid.uuid4().hex}"
        self.log_path = workdir / f"{name}.log"
        self.log = self.log_path.open("wb")
        full = {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                "LITELLM_EVENT_LOOP": "asyncio",  # uvloop is not installed here
                "LITELLM_MASTER_KEY": self.key, **env}
        self.proc = subprocess.Popen([str(Path(sys.executable).parent / "litellm"), "--config", str(config),
                                      "--host", "127.0.0.1", "--port", str(self.port)], env=full, stdout=self.log,
                                     stderr=subprocess.STDOUT, cwd=workdir)
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._client: Any = None

    def new_client(self) -> Any:
        import openai

        return openai.AsyncOpenAI(base_url=self.base_url, api_key=self.key, max_retries=0, timeout=self.timeout)

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = self.new_client()
        return self._client

    def log_tail(self, chars: int = 3000) -> str:
        self.log.flush()
        return self.log_path.read_text(errors="replace")[-chars:]

    def ready(self, timeout: float = 600.0) -> None:
        """Block until the proxy serves (it lists its models)."""
        import openai

        client = openai.OpenAI(base_url=self.base_url, api_key=self.key, max_retries=0, timeout=10)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"proxy {self.name} exited: {self.log_tail()}")
            with contextlib.suppress(openai.APIConnectionError, openai.APITimeoutError):
                client.models.list()
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"proxy {self.name} did not start in {timeout:g} s (log: {self.log_path})")
            time.sleep(0.5)

    def terminate(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(20)
        self.log.close()

    async def wait_ready(self, timeout: float = 600.0) -> None:
        await asyncio.to_thread(self.ready, timeout)

    async def stop(self) -> None:
        if self._client is not None:
            await self._client.close()
        await asyncio.to_thread(self.terminate)
