"""`SyncPublisher`: the same publisher for threaded code, running its own event loop on a thread.

`publish` is the `Publisher`'s own (thread-safe, non-blocking: it appends to the shared buffer and
wakes the loop with `call_soon_threadsafe` only when the sender is idle), so a call from a request
thread costs the same few microseconds as in asyncio code. Only `start`, `flush` and `close` cross
to the publisher thread and wait for it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
from collections.abc import Coroutine
from typing import Any

from coolant.publish.publisher import Publishable, Publisher, PublisherStats

__all__ = ["SyncPublisher"]

log = logging.getLogger(__name__)


class SyncPublisher:
    """A `Publisher` on a daemon thread with its own event loop, for code without asyncio.

    ```
    pub = SyncPublisher("kafka:9092", topic_prefix="coolant.")
    pub.start()
    pub.publish(Outcome(...))   # from any thread; False = dropped (counted in pub.stats)
    pub.close()                 # flushes for up to 5 s, stops the loop and joins the thread
    ```

    Keyword arguments are `Publisher`'s. The thread is a daemon: without `close()`, records still
    buffered when the process exits are lost.
    """

    def __init__(self, bootstrap_servers: str, **kwargs: Any) -> None:
        self.publisher = Publisher(bootstrap_servers, **kwargs)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False

    @property
    def stats(self) -> PublisherStats:
        return self.publisher.stats

    @property
    def connected(self) -> bool:
        return self.publisher.connected

    def start(self) -> None:
        """Start the publisher thread and its sender; returns once it runs (not once Kafka answers)."""
        with self._lock:
            if self._thread is not None or self._closed:
                return
            loop = asyncio.new_event_loop()
            started = threading.Event()

            def run() -> None:
                asyncio.set_event_loop(loop)
                try:
                    loop.run_until_complete(self.publisher.start())
                    started.set()
                    loop.run_forever()
                finally:
                    started.set()
                    try:
                        loop.run_until_complete(loop.shutdown_asyncgens())
                    finally:
                        loop.close()

            self._loop = loop
            self._thread = threading.Thread(target=run, name="coolant-publisher", daemon=True)
            self._thread.start()
            started.wait()

    def publish(self, record: Publishable) -> bool:
        """Queue one record; never blocks, never raises (see `Publisher.publish`)."""
        return self.publisher.publish(record)

    def flush(self, timeout: float = 5.0) -> None:
        """Block until what was published is acknowledged or given up on, for at most `timeout` s."""
        self._call(self.publisher.flush(timeout), timeout)

    def close(self, timeout: float = 5.0) -> None:
        """Flush for up to `timeout` s, close the Kafka connection, stop the loop and join the thread."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:  # never started: what was buffered is counted as unsent
            self.publisher._give_up()
            return
        if threading.current_thread() is thread:
            raise RuntimeError("SyncPublisher.close() called from its own thread")
        self._call(self.publisher.stop(timeout), timeout)
        with contextlib.suppress(RuntimeError):  # the loop already ended
            loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout + 5.0)
        if thread.is_alive():
            log.warning("coolant publisher: thread did not stop within %.1f s", timeout + 5.0)

    def __enter__(self) -> SyncPublisher:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, coro: Coroutine[Any, Any, None], timeout: float) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            coro.close()
            return
        try:
            future = asyncio.run_coroutine_threadsafe(coro, loop)
        except RuntimeError:
            coro.close()
            return
        try:
            future.result(timeout + 5.0)  # the coroutine keeps its own deadline; this is a safety net
        except concurrent.futures.TimeoutError:
            future.cancel()
            log.warning("coolant publisher: the publisher thread did not answer within %.1f s", timeout + 5.0)
        except Exception:
            log.exception("coolant publisher: failed on the publisher thread")
