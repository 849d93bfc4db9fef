"""The HTTP sender against a local receiver: retries, Retry-After, give-ups (sleeps recorded, not slept)."""

from __future__ import annotations

import logging
import socket
from collections.abc import AsyncIterator

import aiohttp
import pytest

from coolant.alerts.retry import RetryPolicy
from coolant.alerts.webhook import Webhook, redact
from tests.alerts.support import Receiver

PAYLOAD = {"text": "hello", "blocks": []}


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as s:
        yield s


def hook(url: str, session: aiohttp.ClientSession, slept: list[float], retries: int = 3) -> Webhook:
    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    return Webhook(url, session, RetryPolicy(max_retries=retries, base_delay=0.5), timeout=5, sleep=sleep)


async def test_delivered_first_time(session: aiohttp.ClientSession) -> None:
    rx = Receiver()
    try:
        slept: list[float] = []
        d = await hook(await rx.start(), session, slept).deliver(PAYLOAD)
    finally:
        await rx.close()
    assert (d.ok, d.attempts, rx.posts, slept) == (True, 1, [PAYLOAD], [])


async def test_5xx_and_429_are_retried_with_backoff_and_retry_after(session: aiohttp.ClientSession) -> None:
    rx = Receiver(failures=[500, 502, 429], retry_after="3")
    try:
        slept: list[float] = []
        d = await hook(await rx.start(), session, slept).deliver(PAYLOAD)
    finally:
        await rx.close()
    assert (d.ok, d.attempts, rx.attempts, len(rx.posts)) == (True, 4, 4, 1)
    assert slept == [0.5, 1.0, 3.0]


async def test_gives_up_after_max_retries_and_logs_it(
    session: aiohttp.ClientSession, caplog: pytest.LogCaptureFixture
) -> None:
    rx = Receiver(always=503)
    try:
        url = await rx.start()
        with caplog.at_level(logging.ERROR, "coolant.alerts.webhook"):
            slept: list[float] = []
            d = await hook(url, session, slept, retries=2).deliver(PAYLOAD, "cooldown alert for dep-a")
    finally:
        await rx.close()
    assert (d.ok, d.attempts, rx.attempts, slept) == (False, 3, 3, [0.5, 1.0])
    assert "cooldown alert for dep-a not delivered: HTTP 503: gave up after 3 attempts; it said: hello" in caplog.text
    assert "/hook" not in caplog.text  # the URL is a secret


async def test_a_client_error_is_not_retried(session: aiohttp.ClientSession) -> None:
    rx = Receiver(failures=[404])
    try:
        slept: list[float] = []
        d = await hook(await rx.start(), session, slept).deliver(PAYLOAD)
    finally:
        await rx.close()
    assert (d.ok, d.attempts, slept) == (False, 1, [])


async def test_connection_errors_are_retried(session: aiohttp.ClientSession) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    slept: list[float] = []
    d = await hook(f"http://127.0.0.1:{port}/hook", session, slept, retries=2).deliver(PAYLOAD)
    assert (d.ok, d.attempts, slept) == (False, 3, [0.5, 1.0])
    assert "ClientConnectorError" in d.why or "connect" in d.why.lower()


def test_redact_keeps_only_scheme_and_host() -> None:
    assert redact("https://hooks.slack.com/services/T0/B0/secret") == "https://hooks.slack.com/…"
    assert redact("https://user:pw@example.com/x") == "https://example.com/…"
