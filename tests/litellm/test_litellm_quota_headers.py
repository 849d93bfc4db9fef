"""Pin where LiteLLM 1.110.2 keeps a provider's rate-limit headers: `response._hidden_params["additional_headers"]`.

A real Router calls a local fake of the OpenAI API that answers 200 with OpenAI's `x-ratelimit-*` headers
announcing a spent budget (`support_litellm.QUOTA_HEADERS`); coolant's parser must find them where LiteLLM put them.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from support_litellm import MESSAGES, FakeOpenAI, deployment

litellm = pytest.importorskip("litellm")

from coolant.integrations.ratelimit_headers import quota_fields, response_headers  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:.*ReadOnly.*:UserWarning")


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI().start()
    try:
        yield server
    finally:
        server.stop()


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
