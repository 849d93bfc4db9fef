"""Retry decisions for webhook posts: what is retried, how long to wait, when to give up."""

from __future__ import annotations

from email.utils import formatdate

import pytest

from coolant.alerts.retry import RetryPolicy, delivered, next_attempt

POLICY = RetryPolicy(max_retries=3, base_delay=1.0, max_delay=60.0)
NOW = 1_800_000_000.0


def test_success_statuses() -> None:
    assert delivered(200) and delivered(204)
    assert not delivered(None) and not delivered(302) and not delivered(500)


@pytest.mark.parametrize("status", [None, 500, 502, 503, 429])
def test_connection_errors_5xx_and_429_back_off_exponentially(status: int | None) -> None:
    delays = [next_attempt(POLICY, a, status, None, NOW).delay for a in range(3)]
    assert delays == [1.0, 2.0, 4.0]
    assert all(next_attempt(POLICY, a, status, None, NOW).retry for a in range(3))


def test_backoff_is_capped() -> None:
    assert next_attempt(RetryPolicy(max_retries=20, max_delay=10.0), 8, 500, None, NOW).delay == 10.0


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410, 302])
def test_other_statuses_give_up_at_once(status: int) -> None:
    d = next_attempt(POLICY, 0, status, None, NOW)
    assert not d.retry and "not retryable" in d.why


def test_gives_up_after_max_retries() -> None:
    d = next_attempt(POLICY, 3, 500, None, NOW)
    assert not d.retry and "4 attempts" in d.why
    assert not next_attempt(RetryPolicy(max_retries=0), 0, None, None, NOW, "ClientConnectorError").retry


def test_retry_after_seconds_and_http_date_are_honoured() -> None:
    assert next_attempt(POLICY, 0, 429, "7", NOW).delay == 7.0
    assert next_attempt(POLICY, 0, 503, formatdate(NOW + 12, usegmt=True), NOW).delay == 12.0
    assert next_attempt(POLICY, 0, 429, "garbage", NOW).delay == 1.0  # unreadable: plain backoff
    assert next_attempt(POLICY, 0, 500, "7", NOW).delay == 1.0  # only 429/503 carry a meaningful one


def test_a_retry_after_beyond_the_limit_gives_up_rather_than_retrying_early() -> None:
    d = next_attempt(POLICY, 0, 429, "3600", NOW)
    assert not d.retry and "Retry-After 3600" in d.why
