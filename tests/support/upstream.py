"""The one fake OpenAI upstream of the tests and benches: the chat, completions and embeddings API on 127.0.0.1, on
a thread of its own (so sync and async callers, in-process Routers and proxies in other processes share it).

A deployment picks its path, `http://127.0.0.1:<port>/<name>/v1` (`base(name)`), so every call is attributed to
its deployment whatever model name the caller sends. What a name answers is, in this order:
1. a 401 (`Incorrect API key provided`) when the call's key is `BAD_KEY` (a broken deployment), whatever the name;
2. a 429 (`Retry-After: 30`) while `limits[name] = (n, seconds)` and n requests were served in the last `seconds`
   (a free-tier key's sliding window; a refused request does not count);
3. `failing[name]`, when set (an incident switched on and off at chosen moments):
   - an int: that HTTP status with OpenAI's error body, `upstream says <status> for <name>`;
   - a `Refusal`: its status, message, error type and headers;
   - a stream kind, for a streamed request (`stream: true`): `cut` (a 200 stream that dies after `STREAM_CHUNKS`
     chunks: no final chunk, no `[DONE]`, the connection closed), `early` (a 200 stream closed before its first
     chunk), `error` (`STREAM_CHUNKS` chunks, an error event, `[DONE]`), `truncated` (`STREAM_CHUNKS` chunks, then
     `[DONE]` with no chunk carrying a `finish_reason`), `slow` (`SLOW_CHUNKS` chunks `SLOW_EVERY` s apart, then a
     clean end; a caller may leave half-way); unstreamed, `cut` and `early` close the connection without an answer
     and the others answer 200;
   - `QUOTA`: a 200 announcing a spent budget (`QUOTA_HEADERS`, as OpenAI sends them);
4. else what the name itself names in `NAMED` (`base("rl")` is a deployment that always answers 429), else a 200.

A 200 names its deployment: the reply text is the name, so a client can tell which deployment served it; a
streamed 200 is `STREAM_CHUNKS` chunks, a final chunk and `[DONE]`.

Every call is logged in `calls` as it arrives (`Call`: name, arrival time, whether it is `coolant probe`'s, the
status sent, what it answered), and the last `Authorization` header per name in `auth`. `failing`, `limits`,
`calls` and `auth` may be read and changed from any thread.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter, deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson
from aiohttp import web

from tests.support.served import ThreadedServer

__all__ = [
    "BAD_KEY",
    "GOOD_KEY",
    "LONG_MESSAGE",
    "NAMED",
    "QUOTA",
    "QUOTA_HEADERS",
    "RETRY_AFTER",
    "SERVER_ERROR",
    "STREAM_CHUNKS",
    "STREAM_KINDS",
    "Answer",
    "Call",
    "FakeOpenAI",
    "Refusal",
]

GOOD_KEY = "sk-good"
BAD_KEY = "sk-broken"
"""The one key the fake refuses (401): any other is accepted."""
RETRY_AFTER = "17"
"""The `Retry-After` of `base("rl")`."""
LONG_MESSAGE = "upstream exploded: " + "x" * 5000
QUOTA_HEADERS = {  # what OpenAI sends on a success when the key's budget is spent
    "x-ratelimit-limit-requests": "15",
    "x-ratelimit-remaining-requests": "0",
    "x-ratelimit-reset-requests": "6m0s",
    "x-ratelimit-remaining-tokens": "149984",
    "x-ratelimit-reset-tokens": "6ms",
}
STREAM_CHUNKS = 3
"""Content chunks of a stream before it ends, or dies: a death mid-answer, not a refused request."""
CHUNK_EVERY = 0.01
"""Seconds between two chunks of a stream."""
SLOW_CHUNKS, SLOW_EVERY = 50, 0.1
"""A `slow` stream: chunks, seconds between two (a caller can leave half-way)."""
STREAM_KINDS = ("cut", "error", "truncated")
"""The ways a stream dies after some chunks (`bench/stream_cut.py --kinds`)."""

StreamKind = Literal["cut", "early", "error", "truncated", "slow"]
QUOTA: Literal["quota"] = "quota"


@dataclass(frozen=True, slots=True)
class Refusal:
    """An error answer: `status` with OpenAI's error body (`message`, `kind` as `error.type`, `code`) and `headers`."""

    status: int
    message: str = "upstream says {status} for {name}"
    """`{status}` and `{name}` (the deployment's) are filled in."""
    kind: str = "fake"
    headers: Mapping[str, str] = field(default_factory=dict)
    code: int | None = None


Answer = int | Refusal | StreamKind | Literal["quota"]
"""What a name answers: an HTTP status, a `Refusal`, a stream kind, or `QUOTA`."""

SERVER_ERROR = Refusal(500, "The server had an error while processing your request.", "server_error")
"""OpenAI's own 500."""
NAMED: dict[str, Answer] = {
    "rl": Refusal(429, "Rate limit reached for requests", "requests", {"Retry-After": RETRY_AFTER}),
    "err": SERVER_ERROR,
    "long": Refusal(500, LONG_MESSAGE, "server_error"),
    "quota": QUOTA,
    "cut": "cut",
    "early": "early",
    "slow": "slow",
    "trunc": "truncated",
    "errev": "error",
}
"""Names that answer their way unless `failing` says otherwise (`ok` or any other name: 200)."""
UNAUTHORIZED = Refusal(401, "Incorrect API key provided: sk-brok****oken.", "invalid_request_error")
SPENT = Refusal(429, "Resource has been exhausted (e.g. check quota).", "rate_limit", {"Retry-After": "30"})
DROPPED = 0
"""`Call.status` of a call whose connection was closed without an answer."""


@dataclass(frozen=True, slots=True)
class Call:
    name: str
    at: float
    probe: bool
    """A call whose one message says "ping" with `max_tokens: 1`: `coolant probe`'s (`coolant.probe.http.PROMPT`)."""
    status: int
    """The HTTP status sent (`DROPPED` when none was; 200 for a stream, whatever became of it)."""
    answer: str
    """The status as text, or the stream kind."""


def _chunk(model: str, content: str | None, finish: str | None = None) -> bytes:
    delta: dict[str, Any] = {} if content is None else {"role": "assistant", "content": content}
    body = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + orjson.dumps(body) + b"\n\n"


def _reply(kind: str, name: str, model: str, headers: Mapping[str, str] | None = None) -> web.Response:
    if kind == "embeddings":
        return web.json_response({
            "object": "list", "model": model,
            "data": [{"object": "embedding", "index": 0, "embedding": [0.1, 0.2]}],
            "usage": {"prompt_tokens": 1, "total_tokens": 1},
        }, headers=headers)
    return web.json_response({
        "id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": name}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }, headers=headers)


def _drop(request: web.Request) -> None:
    """Close the connection mid-answer, as a dying upstream does (no chunked terminator)."""
    transport = request.transport
    if transport is not None:
        transport.close()


class FakeOpenAI(ThreadedServer):
    """The fake (see the module's docstring). `FakeOpenAI(failing={...}).start()`, or `with FakeOpenAI() as up:`."""

    def __init__(self, failing: Mapping[str, Answer] | None = None) -> None:
        super().__init__("fake-openai")
        self.failing: dict[str, Answer] = dict(failing or {})
        self.limits: dict[str, tuple[int, float]] = {}
        self.calls: list[Call] = []
        self.auth: dict[str, str | None] = {}
        self._served: dict[str, deque[float]] = {}

    def base(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}/v1"

    # -- what was called -----------------------------------------------------------------------

    def count(self, name: str | None = None, status: int | None = None) -> int:
        """Calls to `name` (None: any) that were sent `status` (None: any)."""
        return sum(1 for c in list(self.calls)
                   if (name is None or c.name == name) and (status is None or c.status == status))

    def names(self) -> Counter[str]:
        """Calls per name, for the names that were called."""
        return Counter(c.name for c in list(self.calls))

    # -- answering -----------------------------------------------------------------------------

    def _answer(self, name: str, key: str | None) -> Answer:
        if key == f"Bearer {BAD_KEY}":
            return UNAUTHORIZED
        if name in self.limits and self._spent(name):
            return SPENT
        failing = self.failing.get(name)
        if failing is not None:
            return failing
        return NAMED.get(name, 200)

    def _spent(self, name: str) -> bool:
        """Whether `name`'s window is full; else the request is counted in it."""
        limit, seconds = self.limits[name]
        served = self._served.setdefault(name, deque())
        now = time.monotonic()
        while served and now - served[0] >= seconds:
            served.popleft()
        if len(served) >= limit:
            return True
        served.append(now)
        return False

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        name, kind = request.match_info["name"], request.match_info["kind"]
        body = await request.json()
        model, streamed = str(body.get("model")), bool(body.get("stream"))
        messages = body.get("messages") or []
        probe = body.get("max_tokens") == 1 and len(messages) == 1 and messages[0].get("content") == "ping"
        key = self.auth[name] = request.headers.get("Authorization")
        answer = self._answer(name, key)
        if isinstance(answer, int) and answer != 200:
            answer = Refusal(answer, code=answer)
        if isinstance(answer, Refusal):
            self.calls.append(Call(name, time.time(), probe, answer.status, str(answer.status)))
            error = {"message": answer.message.format(status=answer.status, name=name), "type": answer.kind,
                     "code": answer.code}
            return web.json_response({"error": error}, status=answer.status, headers=dict(answer.headers))
        said = "200" if answer in (200, QUOTA) else str(answer)
        if answer in ("cut", "early") and not streamed:
            self.calls.append(Call(name, time.time(), probe, DROPPED, said))
            _drop(request)
            return web.Response()  # never sent: the connection is gone
        self.calls.append(Call(name, time.time(), probe, 200, said))
        if not streamed:
            return _reply(kind, name, model, QUOTA_HEADERS if answer == QUOTA else None)
        return await self._stream(request, name, model, answer)

    async def _stream(self, request: web.Request, name: str, model: str, answer: Answer) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        if answer == "early":
            _drop(request)
            return response
        count, every = (SLOW_CHUNKS, SLOW_EVERY) if answer == "slow" else (STREAM_CHUNKS, CHUNK_EVERY)
        try:
            for _ in range(count):
                await response.write(_chunk(model, name))
                await asyncio.sleep(every)
            if answer == "cut":
                await asyncio.sleep(0.05)  # the chunks reach the caller before the connection dies
                _drop(request)
                return response
            if answer == "error":
                error = {"error": {"message": "stream interrupted", "type": "server_error", "code": 500}}
                await response.write(b"data: " + orjson.dumps(error) + b"\n\n")
            elif answer != "truncated":
                await response.write(_chunk(model, None, "stop"))
            await response.write(b"data: [DONE]\n\n")
            await response.write_eof()
        except ConnectionResetError:  # the caller left mid-stream
            pass
        return response

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/{name}/v1/{kind:chat/completions|embeddings|completions}", self._handle)
        return app
