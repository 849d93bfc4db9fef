"""A fake OpenAI-compatible upstream on 127.0.0.1: counts calls per deployment, answers per a status table
(a chat call with `stream: true` gets a complete stream).

Each deployment gets its own base path (`/<dep>/v1`), so a call is attributed to its deployment whatever
model name the caller sends.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from dataclasses import dataclass, field

from aiohttp import web

from tests.support.served import serve_local


@dataclass
class FakeUpstream:
    statuses: dict[str, int] = field(default_factory=dict)
    """deployment -> HTTP status to answer (200 when absent)."""
    calls: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    auth: dict[str, str | None] = field(default_factory=dict)
    port: int = 0
    _runner: web.AppRunner | None = None

    def base(self, dep: str) -> str:
        return f"http://127.0.0.1:{self.port}/{dep}/v1"

    def total(self) -> int:
        return sum(len(v) for v in self.calls.values())

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        dep = request.match_info["dep"]
        kind = request.match_info["kind"]
        self.calls[dep].append(time.time())
        self.auth[dep] = request.headers.get("Authorization")
        body = await request.json()
        status = self.statuses.get(dep, 200)
        if status != 200:
            err = {"error": {"message": f"upstream says {status} for {dep}", "type": "fake", "code": status}}
            return web.json_response(err, status=status)
        if body.get("stream"):  # a cooled deployment's probe: one chunk, the final one, [DONE]
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            for delta, finish in (({"role": "assistant", "content": "p"}, None), ({}, "length")):
                chunk = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time()),
                         "model": "fake", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
                await response.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            await response.write(b"data: [DONE]\n\n")
            await response.write_eof()
            return response
        if kind == "embeddings":
            return web.json_response({
                "object": "list", "model": "fake",
                "data": [{"object": "embedding", "index": 0, "embedding": [0.1, 0.2]}],
                "usage": {"prompt_tokens": 1, "total_tokens": 1},
            })
        return web.json_response({
            "id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()), "model": "fake",
            "choices": [{"index": 0, "finish_reason": "length",
                         "message": {"role": "assistant", "content": "p"}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        })

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/{dep}/v1/{kind:chat/completions|embeddings|completions}", self._handle)
        self._runner, self.port = await serve_local(app)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
