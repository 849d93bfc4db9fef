"""Which upstream attempt a LiteLLM hook reports, so each attempt is published once, whichever hooks see it.

LiteLLM 1.110.2 reports an attempt's failure through more than one hook, and no one hook sees them all:
- `async_post_call_failure_deployment_hook(request_data, exception, call_type)`: once per attempt whose call
  raised (the first try, each retry, each fallback hop), with that attempt's own call kwargs. It is the only
  hook that sees a proxy's retries: the proxy hands the router one logging object per request
  (`litellm_logging_obj`), which logs one failure a request, so `async_log_failure_event` never hears of the
  later ones (`failure_already_logged` in `litellm/router_rust/surface/health.py`), while the router core
  records each of them in its own counters (`_records_blocked` in `litellm/router_rust/core.py`).
- `async_log_failure_event` / `log_failure_event`: the logging object's report. It is the only hook that sees
  a stream that fails after its call returned (before or after its first chunk), and the only one a sync
  `Router.completion` calls.
- A stream that dies after an earlier attempt of the same request failed reaches no hook: see
  `coolant.integrations.litellm.streams`.

An attempt is known by `attempt_key`: the request, the model group, the deployment, the fallback hop and the
retry index, read the same from every hook. A bare Router's attempts each have their own `litellm_call_id`
and share the request's `litellm_trace_id`; a proxy's share the `litellm_call_id` it gives the request, while
its logging hooks carry another trace id than its deployment hooks. `Seen` remembers the keys published.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

__all__ = ["MAX_SEEN", "SEEN_FOR", "AttemptKey", "Seen", "attempt_key", "from_deployment_hook", "metadata"]

AttemptKey = tuple[str, str, str, int | None, int | None]
"""(request, model group, deployment id, fallback hop, retry index)."""

MAX_SEEN: Final = 16_384
"""Attempt keys remembered at once; the oldest is forgotten first."""
SEEN_FOR: Final = 600.0
"""Seconds an attempt key is remembered: far longer than LiteLLM takes to run both hooks of one attempt."""


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def metadata(kwargs: Mapping[str, Any]) -> Mapping[str, Any]:
    """The router's stamps on an attempt: `litellm_params.metadata` (logging hooks), `metadata` (deployment
    hooks), or `litellm_metadata` on the endpoints that use it."""
    lp = _mapping(kwargs.get("litellm_params"))
    candidates = (lp.get("metadata"), lp.get("litellm_metadata"), kwargs.get("litellm_metadata"),
                  kwargs.get("metadata"))
    for candidate in candidates:
        md = _mapping(candidate)
        if "model_group" in md:
            return md
    return _mapping(lp.get("metadata"))


def _proxied(kwargs: Mapping[str, Any]) -> bool:
    """A proxy request: the proxy puts the incoming request on every call it makes for it."""
    lp = _mapping(kwargs.get("litellm_params"))
    return kwargs.get("proxy_server_request") is not None or lp.get("proxy_server_request") is not None


def request_of(kwargs: Mapping[str, Any]) -> str | None:
    """The request an attempt belongs to, the same from every hook: a proxy's `litellm_call_id`, else the
    router's `litellm_trace_id`."""
    names = ("litellm_call_id", "litellm_trace_id") if _proxied(kwargs) else ("litellm_trace_id", "litellm_call_id")
    for name in names:
        value = kwargs.get(name)
        if isinstance(value, str) and value:
            return value
    return None


def attempt_key(kwargs: Mapping[str, Any], deployment_id: str, model_group: str) -> AttemptKey | None:
    """The attempt's identity, or None when the hook does not say which request it belongs to."""
    request = request_of(kwargs)
    if request is None:
        return None
    md = metadata(kwargs)
    return (request, model_group, deployment_id, _int(md.get("attempted_fallbacks")), _int(md.get("attempted_retries")))


class Seen:
    """The attempts already published, each remembered for `ttl` seconds (at most `capacity` at once)."""

    def __init__(self, capacity: int = MAX_SEEN, ttl: float = SEEN_FOR) -> None:
        self.capacity, self.ttl = capacity, ttl
        self._keys: OrderedDict[AttemptKey, float] = OrderedDict()
        self._lock = threading.Lock()

    def first(self, key: AttemptKey | None, now: float | None = None) -> bool:
        """Whether `key` is new (it is then remembered); an unknown attempt (None) is always new."""
        if key is None:
            return True
        now = time.monotonic() if now is None else now
        with self._lock:
            keys = self._keys
            while keys:
                oldest, seen_at = next(iter(keys.items()))
                if now - seen_at < self.ttl and len(keys) < self.capacity:
                    break
                del keys[oldest]
            if key in keys:
                return False
            keys[key] = now
            return True

    def __len__(self) -> int:
        return len(self._keys)


def from_deployment_hook(request_data: Mapping[str, Any], exception: BaseException
                         ) -> tuple[dict[str, Any], datetime | None]:
    """`async_post_call_failure_deployment_hook`'s arguments in the shape of the logging hooks' kwargs, with
    the attempt's start: the call kwargs carry the router's stamps in `metadata` and the deployment's params at
    the top level; the attempt's own start is its logging object's `current_attempt_api_call_start_time` (the
    logging object's `start_time` is the request's in a proxy)."""
    md = metadata(request_data)
    params: dict[str, Any] = {"metadata": md, "model_info": _mapping(request_data.get("model_info")) or
                              _mapping(md.get("model_info"))}
    if "cooldown_time" in request_data:
        params["cooldown_time"] = request_data["cooldown_time"]
    if request_data.get("proxy_server_request") is not None:
        params["proxy_server_request"] = request_data["proxy_server_request"]
    kwargs: dict[str, Any] = {"litellm_params": params, "exception": exception}
    for name in ("litellm_call_id", "litellm_trace_id", "call_type", "model_id"):
        if name in request_data:
            kwargs[name] = request_data[name]
    logging_obj = request_data.get("litellm_logging_obj")
    details = _mapping(getattr(logging_obj, "model_call_details", None))
    start = details.get("current_attempt_api_call_start_time")
    return kwargs, start if isinstance(start, datetime) else None
