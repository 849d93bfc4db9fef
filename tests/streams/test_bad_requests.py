"""Every bad request gets a short JSON error (issue 26): even one aiohttp cannot parse, which it used to answer in
plain text quoting 8 KB of a 10 KB path, with a traceback in the log."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import orjson
import pytest
from aiohttp import web

from coolant.streams.admin_api import bad_request
from coolant.streams.admin_views import json_errors
from coolant.streams.faust.web import answer_bad_requests, runner_class


@pytest.fixture
async def server() -> AsyncIterator[int]:
    app = web.Application(middlewares=[json_errors("t")])

    async def ok(request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    app.router.add_get("/ok", ok)
    runner = runner_class(bad_request)(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield port
    finally:
        await runner.cleanup()


async def _raw(port: int, request: bytes) -> tuple[int, dict[str, str], bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
    return int(lines[0].split()[1]), headers, body


BAD = [
    ("10 KB path", b"GET /" + b"A" * 10_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    ("10 KB header", b"GET /ok HTTP/1.1\r\nHost: x\r\nX-Big: " + b"B" * 10_000 + b"\r\n\r\n", 400),
    ("not a method", b"G\x00T /ok HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    ("not HTTP", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 40, 400),
    ("bad header line", b"GET /ok HTTP/1.1\r\nHost x\r\n\r\n", 400),
    ("unknown path", b"GET /" + b"C" * 5_000 + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 404),
]


@pytest.mark.parametrize(("what", "request_bytes", "status"), BAD, ids=[b[0] for b in BAD])
async def test_every_bad_request_is_a_short_json_error(
    server: int, what: str, request_bytes: bytes, status: int, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG):
        got, headers, body = await _raw(server, request_bytes)
    assert got == status, (what, body[:200])
    assert headers.get("Content-Type", "").startswith("application/json"), (what, headers)
    assert set(orjson.loads(body)) == {"error"} and len(body) < 200, (what, body)
    assert b"AAAA" not in body and b"BBBB" not in body and b"CCCC" not in body
    assert not any(r.exc_info for r in caplog.records), "no traceback in the log"
    assert all(len(r.getMessage()) < 300 for r in caplog.records)


async def test_good_requests_still_work(server: int) -> None:
    status, _, body = await _raw(server, b"GET /ok HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert status == 200 and orjson.loads(body) == {"ok": True}


def test_the_worker_web_server_gets_the_runner() -> None:
    """What `AdminApi.register` does to Faust's aiohttp driver before it starts."""
    import faust

    app = faust.App(f"bad-requests-{id(object())}", broker="kafka://127.0.0.1:1", autodiscover=False)
    before = app.web._runner
    answer_bad_requests(app.web, bad_request)
    assert type(app.web._runner) is not type(before) and isinstance(app.web._runner, type(before))
    assert app.web._runner.app is before.app
