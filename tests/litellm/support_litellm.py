"""Shared pieces of the LiteLLM integration tests: a local fake of the OpenAI API and Router builders.

This directory has no `__init__.py` on purpose: as a package it would be named `litellm` (pytest names a
package after its directory when `tests/` is no package) and shadow the real LiteLLM. Its modules are
imported by their own names, so they carry `litellm` in them to stay unique.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network fetch of the cost map at import

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `tests.integration.harness` when pytest is not run as `python -m pytest`
    sys.path.insert(0, str(ROOT))

from aiohttp import web  # noqa: E402

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


_MODES = frozenset({"ok", "quota", "rl", "err", "long"})


class FakeOpenAI:
    """The OpenAI chat completions API on 127.0.0.1, on a thread of its own (serves sync and async callers).

    A deployment picks its behaviour with its `api_base`, `http://127.0.0.1:<port>/<mode>/v1`:
    `ok` (200), `quota` (200 announcing a spent budget: `QUOTA_HEADERS`), `rl` (429 with `Retry-After: 17`),
    `err` (500), `long` (500 with a 5,000-character message).
    Any other mode answers 200 until it is put in `failing`, then 500 (an incident switched on at a chosen moment).
    Any key but `sk-good` gets a 401, whatever the mode (a broken deployment). `calls` counts (mode, status).
    """

    def __init__(self) -> None:
        self.calls: Counter[tuple[str, int]] = Counter()
        self.failing: set[str] = set()
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, name="fake-openai", daemon=True)

    def base(self, mode: str) -> str:
        return f"http://127.0.0.1:{self.port}/{mode}/v1"

    async def _handle(self, request: web.Request) -> web.Response:
        mode = request.match_info["mode"]
        body = await request.json()
        if request.headers.get("Authorization") != f"Bearer {GOOD_KEY}":
            response = _error(401, "Incorrect API key provided: sk-brok****oken.", "invalid_request_error")
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

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_post("/{mode}/v1/chat/completions", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]

    def start(self) -> FakeOpenAI:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


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
