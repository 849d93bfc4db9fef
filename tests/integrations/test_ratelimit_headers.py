"""The quota headers providers send, parsed into the outcome's `ratelimit_*` fields (X6)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from coolant.integrations.litellm.ratelimit_headers import (
    logged_headers,
    parse_duration,
    parse_reset,
    quota_fields,
    response_headers,
)

NOW = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1s", 1.0), ("6m0s", 360.0), ("20ms", 0.02), ("1h2m3.5s", 3723.5), ("0.5s", 0.5), ("12", 12.0),
     ("2m", 120.0), ("59.987s", 59.987), (" 7s ", 7.0), ("", None), ("soon", None), ("-3s", None), ("1x", None),
     ("nan", None), ("-1", None)],
)
def test_durations(text: str, seconds: float | None) -> None:
    assert parse_duration(text) == (None if seconds is None else pytest.approx(seconds))


def test_openai_headers_as_litellm_keeps_them() -> None:
    """What LiteLLM 1.110.2 puts in `additional_headers` for an OpenAI response (bare and llm_provider- names)."""
    headers = {
        "x-ratelimit-limit-requests": "10000",
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "6m0s",
        "x-ratelimit-remaining-tokens": "149984",
        "x-ratelimit-reset-tokens": "6ms",
        "llm_provider-x-ratelimit-remaining-requests": "0",
        "llm_provider-openai-processing-ms": "212",
    }
    assert quota_fields(headers, NOW) == {
        "remaining_requests": 0,
        "reset_requests": 360.0,
        "remaining_tokens": 149984,
        "reset_tokens": 0.006,
    }


def test_anthropic_headers_rfc3339_reset() -> None:
    headers = {
        "llm_provider-anthropic-ratelimit-requests-limit": "50",
        "llm_provider-anthropic-ratelimit-requests-remaining": "0",
        "llm_provider-anthropic-ratelimit-requests-reset": "2026-12-01T12:00:30Z",
        "llm_provider-anthropic-ratelimit-tokens-remaining": "12000",
        "llm_provider-anthropic-ratelimit-tokens-reset": "2026-12-01T12:00:01.500000+00:00",
    }
    assert quota_fields(headers, NOW) == {
        "remaining_requests": 0,
        "reset_requests": 30.0,
        "remaining_tokens": 12000,
        "reset_tokens": 1.5,
    }


def test_azure_headers_without_reset_and_case_insensitive() -> None:
    headers = {"X-RateLimit-Remaining-Requests": "3", "X-RateLimit-Remaining-Tokens": "800"}
    assert quota_fields(headers, NOW) == {"remaining_requests": 3, "remaining_tokens": 800}


def test_garbage_is_left_out() -> None:
    headers = {
        "x-ratelimit-remaining-requests": "-1",
        "x-ratelimit-remaining-tokens": "lots",
        "anthropic-ratelimit-requests-remaining": "2",
        "anthropic-ratelimit-requests-reset": "2026-12-01T12:00:30",  # no offset: ambiguous
    }
    assert quota_fields(headers, NOW) == {"remaining_requests": 2}
    assert parse_reset("2026-12-01T11:59:00Z", NOW) == 0.0  # a past refill is "now"
    assert quota_fields(None, NOW) == {} and quota_fields({}, NOW) == {}
    assert quota_fields({"x-ratelimit-remaining-requests": True}, NOW) == {}


def test_logging_payload_spelling() -> None:
    """LiteLLM's standard logging object renames the OpenAI headers with underscores and makes them ints."""
    headers = {"x_ratelimit_remaining_requests": 0, "x_ratelimit_reset_requests": "1s",
               "llm_provider-x-ratelimit-remaining-tokens": "10"}
    assert quota_fields(headers, NOW) == {"remaining_requests": 0, "reset_requests": 1.0, "remaining_tokens": 10}
    assert logged_headers({"standard_logging_object": {"hidden_params": {"additional_headers": headers}}}) == headers
    assert logged_headers({}) is None
    assert logged_headers({"standard_logging_object": {"hidden_params": None}}) is None


def test_gemini_sends_none() -> None:
    assert quota_fields({"content-type": "application/json", "llm_provider-server": "scaffolding"}, NOW) == {}


class _Response:
    def __init__(self, hidden: object) -> None:
        self._hidden_params = hidden


def test_response_headers_reads_litellm_hidden_params() -> None:
    assert response_headers(_Response({"additional_headers": {"a": "1"}})) == {"a": "1"}
    assert response_headers(_Response({})) is None
    assert response_headers(_Response(None)) is None
    assert response_headers(object()) is None
