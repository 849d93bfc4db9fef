"""The one way tests and benches serve a fake upstream: an aiohttp app on 127.0.0.1 at a port the OS picks,
awaited on the caller's loop (`serve_local`) or run on a loop of its own thread for sync callers
(`ThreadedServer`: a Router, an SDK client, a proxy in another process)."""

from __future__ import annotations

import asyncio
import threading
from typing import Self

from aiohttp import web


async def serve_local(app: web.Application) -> tuple[web.AppRunner, int]:
    """The runner to clean up and the port it listens on."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server = site._server
    assert server is not None
    return runner, server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]


class ThreadedServer:
    """Subclasses give `app()`; `start()` serves it from its own thread until `stop()`."""

    def __init__(self, name: str) -> None:
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)

    def app(self) -> web.Application:
        raise NotImplementedError

    async def _start(self) -> None:
        self._runner, self.port = await serve_local(self.app())

    def start(self) -> Self:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
