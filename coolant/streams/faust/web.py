"""Faust's aiohttp web server, its connections answering a request aiohttp cannot even parse through coolant.

aiohttp replies to a request it cannot parse (a 10 KB path, a bad header, a method that is no method) in plain
text that quotes the request, and logs a traceback; it takes no handler class as an option. So the runner Faust's
web driver made (`Web._runner`, not started yet) is replaced by one whose server (`AppRunner._make_server`) makes
connections (`RequestHandler`, built from the server's `_loop` and `_kwargs`) whose `handle_error` asks `answer`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiohttp import web as aioweb
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_runner import AppRunner
from aiohttp.web_server import Server

Answer = Callable[[Any, int, BaseException | None], aioweb.StreamResponse]
"""(request, status, exception) -> the response to a request aiohttp could not handle."""


def runner_class(answer: Answer) -> type[AppRunner]:
    """An `AppRunner` whose connections answer every request aiohttp cannot handle with `answer`."""

    class Handler(RequestHandler):  # type: ignore[misc,unused-ignore]  # aiohttp's protocol class
        def handle_error(
            self, request: Any, status: int = 500, exc: BaseException | None = None, message: str | None = None
        ) -> aioweb.StreamResponse:
            if request.writer.output_size > 0:  # as aiohttp: the answer has begun, the connection is broken
                raise ConnectionError("Response is sent already, cannot send another response with the error message")
            response = answer(request, status, exc)
            response.force_close()
            return response

    class HandlerServer(Server):  # type: ignore[misc,unused-ignore]
        def __call__(self) -> RequestHandler:
            return Handler(self, loop=self._loop, **self._kwargs)

    class Runner(AppRunner):  # type: ignore[misc,unused-ignore]
        async def _make_server(self) -> Server:
            server = await super()._make_server()
            server.__class__ = HandlerServer  # the same server, its connections answering through `answer`
            return server

    return Runner


def answer_bad_requests(web: Any, answer: Answer) -> None:
    """Faust's web server (not started yet) answers every request aiohttp cannot handle with `answer`."""
    runner = web._runner
    web._runner = runner_class(answer)(runner.app, **runner._kwargs)
