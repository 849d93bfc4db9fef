"""Shared pieces of the LiteLLM integration tests: a local fake of the OpenAI API and Router builders.

This directory has no `__init__.py` on purpose: as a package it would be named `litellm` (pytest names a
package after its directory when `tests/` is no package) and shadow the real LiteLLM. Its modules are
imported by their own names, so they carry `litellm` in them to stay unique.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
import uuid
from collections import Counter, deque
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network fetch of the cost map at import

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `tests.support` when pytest is not run as `python -m pytest`
    sys.path.insert(0, str(ROOT))

from aiohttp import web  # noqa: E402

from tests.support.ports import free_port  # noqa: E402
from tests.support.served import ThreadedServer  # noqa: E402

GOOD_KEY = "sk-good"
BAD_KEY = "sk-broken"
RETRY_AFTER = "17"
LONG_MESSAGE = "upstream exploded: " + "x" * 5000
QUOTA_HEADERS = {  # what OpenAI sends on a success when the key's budget is spent
    "x-ratelimit-limit-requests": "15",
    "x-ratelimit-remaining-requests": "0",
    "x-ratelimit-reset-requests": "6m0s",
    "x-ratelimit-remaining-tokens": "149984",
    "x-ratelimit-reset-tokens": "6ms",
}


def _chat(model: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-coolant",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def _error(status: int, message: str, kind: str, **headers: str) -> web.Response:
    return web.json_response({"error": {"message": message, "type": kind, "code": None}}, status=status,
                             headers=headers)


_MODES = frozenset({"ok", "quota", "rl", "err", "long", "cut", "early", "slow", "trunc", "errev"})
_STREAMED = ("cut", "early", "slow", "trunc", "errev")
STREAM_CHUNKS = 3
"""Chunks a `cut` stream sends before it dies."""
SLOW_CHUNKS, SLOW_EVERY = 50, 0.1
"""A `slow` stream: chunks, seconds between two (a caller can leave half-way)."""


def _chunk(model: str, content: str | None, finish: str | None = None) -> bytes:
    delta = {} if content is None else {"role": "assistant", "content": content}
    body = {"id": "chatcmpl-coolant", "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


class FakeOpenAI(ThreadedServer):
    """The OpenAI chat completions API on 127.0.0.1, on a thread of its own (serves sync and async callers).

    A deployment picks its behaviour with its `api_base`, `http://127.0.0.1:<port>/<mode>/v1`:
    `ok` (200), `quota` (200 announcing a spent budget: `QUOTA_HEADERS`), `rl` (429 with `Retry-After: 17`),
    `err` (500), `long` (500 with a 5,000-character message); for a streamed request (`stream: true`): `cut`
    (a 200 stream that dies after `STREAM_CHUNKS` chunks: no final chunk, no `[DONE]`, the connection closed),
    `early` (a 200 stream closed before its first chunk), `slow` (`SLOW_CHUNKS` chunks `SLOW_EVERY` s apart, then
    a clean end), `trunc` (`STREAM_CHUNKS` chunks, then `[DONE]` with no chunk carrying a `finish_reason`: a
    truncated answer), `errev` (`STREAM_CHUNKS` chunks, then an error event); unstreamed, `cut`, `early`, `trunc`
    and `errev` close the connection without an answer and `slow` answers 200.
    Any other mode answers 200 until it is put in `failing`, then 500 (an incident switched on at a chosen moment),
    or, once in `limits` as (n, seconds), 429 with `Retry-After: 30` while it has served n requests in the last
    `seconds` (a free-tier key's sliding window; a refused request does not count).
    Any key but `sk-good` gets a 401, whatever the mode (a broken deployment). `calls` counts (mode, status) as
    the request arrives: every upstream call, whatever became of it (a dropped one counts as status 0, a
    stream as 200).
    """

    def __init__(self) -> None:
        super().__init__("fake-openai")
        self.calls: Counter[tuple[str, int]] = Counter()
        self.failing: set[str] = set()
        self.limits: dict[str, tuple[int, float]] = {}
        self._served: dict[str, deque[float]] = {}

    def base(self, mode: str) -> str:
        return f"http://127.0.0.1:{self.port}/{mode}/v1"

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        mode = request.match_info["mode"]
        body = await request.json()
        authorized = request.headers.get("Authorization") == f"Bearer {GOOD_KEY}"
        if authorized and mode in _STREAMED:
            return await self._stream(request, mode, str(body.get("model")), bool(body.get("stream")))
        if not authorized:
            response = _error(401, "Incorrect API key provided: sk-brok****oken.", "invalid_request_error")
        elif mode in self.limits and self._spent(mode):
            response = _error(429, "Resource has been exhausted (e.g. check quota).", "rate_limit", **{
                "Retry-After": "30"})
        elif mode == "ok" or (mode not in _MODES and mode not in self.failing):
            response = web.json_response(_chat(str(body.get("model"))))
        elif mode == "quota":
            response = web.json_response(_chat(str(body.get("model"))), headers=QUOTA_HEADERS)
        elif mode == "rl":
            response = _error(429, "Rate limit reached for requests", "requests", **{"Retry-After": RETRY_AFTER})
        elif mode == "long":
            response = _error(500, LONG_MESSAGE, "server_error")
        else:
            response = _error(500, "The server had an error while processing your request.", "server_error")
        self.calls[(mode, response.status)] += 1
        return response

    def _spent(self, mode: str) -> bool:
        """Whether `mode`'s window is full; else the request is counted in it."""
        limit, seconds = self.limits[mode]
        served = self._served.setdefault(mode, deque())
        now = time.monotonic()
        while served and now - served[0] >= seconds:
            served.popleft()
        if len(served) >= limit:
            return True
        served.append(now)
        return False

    async def _stream(self, request: web.Request, mode: str, model: str, streamed: bool) -> web.StreamResponse:
        if not streamed and mode != "slow":
            self.calls[(mode, 0)] += 1
            _drop(request)
            return web.Response()  # never sent: the connection is gone
        if not streamed:
            self.calls[(mode, 200)] += 1
            return web.json_response(_chat(model))
        self.calls[(mode, 200)] += 1
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        if mode == "early":
            _drop(request)
            return response
        count = SLOW_CHUNKS if mode == "slow" else STREAM_CHUNKS
        try:
            for i in range(count):
                await response.write(_chunk(model, f"t{i} "))
                if mode == "slow":
                    await asyncio.sleep(SLOW_EVERY)
            if mode == "cut":
                await asyncio.sleep(0.05)  # the chunks reach the caller before the connection dies
                _drop(request)
                return response
            if mode == "errev":
                error = {"error": {"message": "stream interrupted", "type": "server_error", "code": 500}}
                await response.write(b"data: " + json.dumps(error).encode() + b"\n\n")
            elif mode != "trunc":
                await response.write(_chunk(model, None, "stop"))
            await response.write(b"data: [DONE]\n\n")
            await response.write_eof()
        except ConnectionResetError:  # the caller left mid-stream
            pass
        return response

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/{mode}/v1/chat/completions", self._handle)
        return app


def _drop(request: web.Request) -> None:
    """Close the connection mid-answer, as a dying upstream does (no chunked terminator)."""
    transport = request.transport
    if transport is not None:
        transport.close()


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
