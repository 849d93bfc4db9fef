"""A stream that dies after an earlier attempt of its request failed: the one attempt no LiteLLM hook reports.

LiteLLM 1.110.2's router core wraps every streamed answer (`litellm/router_rust/invoke/streaming.py`) and,
when the stream raises after it opened, calls `StreamAttempt.report_failure(error)` with the attempt's own
call kwargs. The logging hooks hear of that failure only if the request's logging object has logged no failure
yet: in a proxy, whose requests share one logging object, a stream that dies after a failed retry or before a
fallback's answer completes is reported to no callback (and not counted by the router core either,
`failure_logged_before`). So `watch_stream_failures` wraps that one method: the original runs unchanged, and
each `CoolantCallback` among LiteLLM's callbacks is told of the attempt. One that a logging hook reports as
well is published once (`attempts.Seen`). A LiteLLM without that class or method is left alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any, Final

__all__ = ["watch_stream_failures"]

log = logging.getLogger(__name__)

_MARK: Final = "__coolant_watch__"
StreamFailure = Callable[[Mapping[str, Any], BaseException], None]
"""Told of a stream attempt's failure: (the attempt's call kwargs, the provider's error)."""


def _provider_error(error: BaseException) -> BaseException:
    """The provider's own error, as the router core reads it: a mid-stream fallback's envelope is unwrapped."""
    original = getattr(error, "original_exception", None)
    return original if isinstance(original, BaseException) else error


def watch_stream_failures(notify: Callable[[], list[StreamFailure]]) -> bool:
    """Wrap `StreamAttempt.report_failure` once per process so that every listener `notify()` returns hears of
    each stream attempt that failed after it opened. Returns whether the wrap is in place."""
    try:
        from litellm.router_rust.invoke.streaming import StreamAttempt
    except Exception:  # another LiteLLM layout: nothing to wrap
        return False
    original = getattr(StreamAttempt, "report_failure", None)
    if not callable(original):
        return False
    if getattr(original, _MARK, False):
        return True

    def report_failure(self: Any, error: BaseException) -> None:
        try:
            kwargs = getattr(self, "kwargs", None)
            if isinstance(kwargs, Mapping):
                failure = _provider_error(error)
                for listener in notify():
                    with contextlib.suppress(Exception):  # a listener never breaks LiteLLM's stream
                        listener(kwargs, failure)
        finally:
            original(self, error)

    setattr(report_failure, _MARK, True)
    report_failure.__doc__ = original.__doc__
    StreamAttempt.report_failure = report_failure  # type: ignore[method-assign]
    return True


def on_loop(handle: Callable[[], Any]) -> None:
    """Run the coroutine `handle()` makes on the running loop without waiting for it (the stream goes on)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    task = loop.create_task(handle())
    _PENDING.add(task)
    task.add_done_callback(_PENDING.discard)


_PENDING: Final[set[asyncio.Task[Any]]] = set()
