"""A fake OpenAI upstream for the outlier profile's benches (`bench/lone_primary.py`, `bench/stream_cut.py`).

Each deployment picks its own path (`http://127.0.0.1:<port>/<name>/v1`). A name answers 200 (or a stream of
chunks for `stream: true`) until it is put in `failing`, with what `failing[name]` says:
- an int: that HTTP status (e.g. 503), with OpenAI's error body;
- "cut": the stream sends a few chunks, then the connection closes without a final chunk or `[DONE]`;
- "error": a few chunks, then an error event (`data: {"error": ...}`) and the end of the stream;
- "truncated": a few chunks, then `[DONE]` with no chunk carrying a `finish_reason`.
Every call is logged as (name, arrival time, probe?, answer): a call whose one message says "ping" with
`max_tokens: 1` is `coolant probe`'s (`coolant.probe.http.PROMPT`), every other one a client's attempt. The reply
text is the name, so a client can tell which deployment served it. It runs on its own thread, so in-process
Routers and proxies in other processes can share it.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from tests.support.served import ThreadedServer

CHUNKS_BEFORE_FAILING = 3
"""Chunks a failing stream sends before it dies: a death mid-answer, not a refused request."""
STREAM_KINDS = ("cut", "error", "truncated")


@dataclass(frozen=True, slots=True)
class Call:
    name: str
    at: float
    probe: bool
    answer: str
    """"200", the failing status, or the stream's failure kind."""


def _chunk(name: str, content: str | None, finish: str | None = None) -> bytes:
    delta: dict[str, Any] = {} if content is None else {"role": "assistant", "content": content}
    body = {"id": "chatcmpl-outlier", "object": "chat.completion.chunk", "created": int(time.time()), "model": name,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + orjson.dumps(body) + b"\n\n"


class Upstream(ThreadedServer):
    """The fake; `failing` and `calls` may be read and changed from any thread."""

    def __init__(self) -> None:
        super().__init__("outlier-upstream")
        self.failing: dict[str, int | str] = {}
        self.calls: list[Call] = []

    def base(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}/v1"

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        body = await request.json()
        messages = body.get("messages") or []
        probe = body.get("max_tokens") == 1 and len(messages) == 1 and messages[0].get("content") == "ping"
        failure = self.failing.get(name)
        if isinstance(failure, int):
            self.calls.append(Call(name, time.time(), probe, str(failure)))
            error = {"error": {"message": f"{name} is unavailable", "type": "server_error", "code": None}}
            return web.json_response(error, status=failure)
        self.calls.append(Call(name, time.time(), probe, failure or "200"))
        if not body.get("stream"):
            return web.json_response({
                "id": "chatcmpl-outlier", "object": "chat.completion", "created": int(time.time()), "model": name,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": name}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            })
        return await self._stream(request, name, failure)

    async def _stream(self, request: web.Request, name: str, failure: str | None) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for _ in range(CHUNKS_BEFORE_FAILING):
            await response.write(_chunk(name, name))
            await asyncio.sleep(0.01)
        if failure == "cut":
            assert request.transport is not None
            request.transport.close()  # no final chunk, no [DONE], no clean end of the chunked body
            return response
        if failure == "error":
            error = {"error": {"message": "stream interrupted", "type": "server_error", "code": 500}}
            await response.write(b"data: " + orjson.dumps(error) + b"\n\n")
        elif failure != "truncated":
            await response.write(_chunk(name, None, "stop"))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/{name}/v1/chat/completions", self._handle)
        return app
