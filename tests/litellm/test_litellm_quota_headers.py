"""Pin where LiteLLM 1.110.2 keeps a provider's rate-limit headers: `response._hidden_params["additional_headers"]`.

A real Router calls a local fake of the OpenAI API that answers 200 with OpenAI's `x-ratelimit-*` headers
announcing a spent budget (`tests.support.upstream.QUOTA_HEADERS`); coolant's parser must find them where LiteLLM
put them.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from support_litellm import MESSAGES, deployment

from coolant.integrations.litellm.ratelimit_headers import quota_fields, response_headers
from coolant.schemas import RateLimit
from tests.support.lazy import lazy_or_skip
from tests.support.upstream import FakeOpenAI

litellm = lazy_or_skip("litellm")  # imported by the first test that runs (not at collection)

pytestmark = pytest.mark.filterwarnings("ignore:.*ReadOnly.*:UserWarning")


async def test_router_response_keeps_the_quota_headers(fake: FakeOpenAI) -> None:
    router = litellm.Router(model_list=[deployment("d-quota", "g-quota", fake.base("quota"))], num_retries=0)
    response = await router.acompletion(model="g-quota", messages=MESSAGES)
    headers = response_headers(response)
    assert headers is not None, "LiteLLM no longer keeps headers in _hidden_params['additional_headers']"
    assert headers.get("x-ratelimit-remaining-requests") == "0"
    assert headers.get("llm_provider-x-ratelimit-reset-requests") == "6m0s"
    assert quota_fields(headers, time.time()) == {
        "remaining_requests": 0,
        "reset_requests": 360.0,
        "remaining_tokens": 149984,
        "reset_tokens": 0.006,
    }


async def test_a_plain_success_announces_nothing(fake: FakeOpenAI) -> None:
    router = litellm.Router(model_list=[deployment("d-ok", "g-ok", fake.base("ok"))], num_retries=0)
    response = await router.acompletion(model="g-ok", messages=MESSAGES)
    assert quota_fields(response_headers(response), time.time()) == {}


def _capture() -> Any:
    """A success hook that keeps what LiteLLM hands it, for `build_outcome` (a `CustomLogger`, so made when a test
    runs)."""
    from litellm.integrations.custom_logger import CustomLogger

    class Capture(CustomLogger):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.calls: list[tuple[dict[str, Any], Any, Any]] = []
            self.done = asyncio.Event()

        async def async_log_success_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
            self.calls.append((dict(kwargs), start_time, end_time))
            self.done.set()

    return Capture()


async def test_the_success_hook_gets_them_and_the_outcome_carries_them(fake: FakeOpenAI) -> None:
    """The callback's record of a success that spent the budget carries `ratelimit` (from the logging payload)."""
    from coolant.integrations.litellm import build_outcome  # its records module reads LiteLLM's at import

    capture = _capture()
    saved = list(litellm.callbacks)
    litellm.callbacks = [capture]
    try:
        router = litellm.Router(model_list=[deployment("d-q2", "g-q2", fake.base("quota"))], num_retries=0)
        await router.acompletion(model="g-q2", messages=MESSAGES)
        await asyncio.wait_for(capture.done.wait(), 10)
    finally:
        litellm.callbacks = saved
        litellm.logging_callback_manager.remove_callback_from_all_lists(capture)
    kwargs, start, end = capture.calls[0]
    rec = build_outcome(kwargs, start, end, ok=True)
    assert rec.ratelimit == RateLimit(remaining_requests=0, remaining_tokens=149984, reset_requests=360.0,
                                      reset_tokens=0.006)
