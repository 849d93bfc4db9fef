"""The fake OpenAI upstream the tests and benches share (tests/support/upstream.py) answers as its docstring says:
the probe, LiteLLM and bench tests read their verdicts through it, so a behaviour that drifts here would let them
pass for the wrong reason. Service-free: the fake listens on 127.0.0.1."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest

from coolant.probe.http import stream_failure
from tests.support.upstream import BAD_KEY, DROPPED, RETRY_AFTER, SERVER_ERROR, STREAM_CHUNKS, FakeOpenAI

CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(failing={"down": 503, "cut-me": "cut", "err-me": "error", "trunc-me": "truncated"}) as up:
        yield up


async def call(fake: FakeOpenAI, name: str, body: dict[str, Any], key: str = "sk-any",
               path: str = "chat/completions") -> tuple[int, dict[str, str], bytes]:
    """Status, headers and as much of the body as arrived before the connection ended."""
    url, headers = f"{fake.base(name)}/{path}", {"Authorization": f"Bearer {key}"}
    async with aiohttp.ClientSession() as session, session.post(url, json=body, headers=headers) as resp:
        got: list[bytes] = []
        with contextlib.suppress(aiohttp.ClientPayloadError):  # the connection died mid-body
            async for data in resp.content.iter_any():
                got.append(data)
        return resp.status, dict(resp.headers), b"".join(got)


async def test_a_name_answers_200_naming_itself_until_it_fails(fake: FakeOpenAI) -> None:
    status, _, body = await call(fake, "a", CHAT)
    assert status == 200 and json.loads(body)["choices"][0]["message"]["content"] == "a"
    fake.failing["a"] = SERVER_ERROR
    status, _, body = await call(fake, "a", CHAT)
    assert status == 500 and b"The server had an error" in body
    status, _, body = await call(fake, "down", CHAT)
    assert status == 503 and b"upstream says 503 for down" in body
    assert [(c.name, c.status, c.answer) for c in fake.calls] == [("a", 200, "200"), ("a", 500, "500"),
                                                                 ("down", 503, "503")]
    assert fake.count("a") == 2 and fake.count("a", 500) == 1 and fake.names() == {"a": 2, "down": 1}


async def test_named_answers_keys_and_limits(fake: FakeOpenAI) -> None:
    status, headers, _ = await call(fake, "rl", CHAT)
    assert (status, headers.get("Retry-After")) == (429, RETRY_AFTER)
    status, headers, _ = await call(fake, "quota", CHAT)
    assert status == 200 and headers.get("x-ratelimit-remaining-requests") == "0"
    status, _, _ = await call(fake, "ok", CHAT, key=BAD_KEY)
    assert status == 401 and fake.auth["ok"] == f"Bearer {BAD_KEY}"
    fake.limits["free"] = (2, 60.0)
    statuses = [(await call(fake, "free", CHAT))[0] for _ in range(3)]
    assert statuses == [200, 200, 429]
    status, _, body = await call(fake, "e", {"model": "m", "input": ["ping"]}, path="embeddings")
    assert status == 200 and b'"embedding"' in body


async def test_streams_end_or_die_as_their_kind_says(fake: FakeOpenAI) -> None:
    stream = {**CHAT, "stream": True}
    _, _, body = await call(fake, "whole", stream)
    assert stream_failure(body) is None and body.count(b'"content":"whole"') == STREAM_CHUNKS
    _, _, body = await call(fake, "cut-me", stream)
    assert stream_failure(body) == "stream ended without a final chunk" and b"[DONE]" not in body
    _, _, body = await call(fake, "err-me", stream)
    assert (stream_failure(body) or "").startswith("stream error event")
    _, _, body = await call(fake, "trunc-me", stream)
    assert stream_failure(body) == "stream ended without a final chunk" and b"[DONE]" in body
    assert [c.answer for c in fake.calls] == ["200", "cut", "error", "truncated"]


async def test_an_unstreamed_call_to_a_dying_stream_gets_no_answer(fake: FakeOpenAI) -> None:
    with pytest.raises(aiohttp.ClientError):
        await call(fake, "cut-me", CHAT)
    assert [(c.status, c.answer) for c in fake.calls] == [(DROPPED, "cut")]
    probe = {"model": "m", "messages": [{"role": "user", "content": "ping"}], "max_tokens": 1}
    status, _, _ = await call(fake, "trunc-me", probe)
    assert status == 200 and fake.calls[-1].probe
