"""Posting payloads to a Slack-compatible incoming webhook, with the retries `retry` decides.

`deliver` never raises for network or HTTP trouble: it returns whether the payload was delivered, after
retrying what is worth retrying, so the alert loop can log a give-up and move on. The webhook URL is a
secret (anyone holding it can post), so logs show only its scheme and host.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

import aiohttp

from coolant.alerts.retry import RetryPolicy, delivered, next_attempt
from coolant.alerts.slack import Payload

log = logging.getLogger(__name__)


def redact(url: str) -> str:
    """`https://hooks.slack.com/services/T/B/secret` -> `https://hooks.slack.com/…`."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rsplit('@', 1)[-1]}/…" if parts.netloc else "<webhook>"


@dataclass(frozen=True, slots=True)
class Delivery:
    ok: bool
    attempts: int
    why: str


class Webhook:
    """One webhook URL over one aiohttp session; `sleep` and `clock` are injectable for tests."""

    def __init__(
        self,
        url: str,
        session: aiohttp.ClientSession,
        policy: RetryPolicy | None = None,
        timeout: float = 10.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.url = url
        self.session = session
        self.policy = policy or RetryPolicy()
        self.timeout = aiohttp.ClientTimeout(total=timeout)
        self.sleep = sleep
        self.clock = clock

    async def deliver(self, payload: Payload, what: str = "alert") -> Delivery:
        attempt = 0
        while True:
            status: int | None = None
            retry_after: str | None = None
            error = ""
            try:
                async with self.session.post(self.url, json=payload, timeout=self.timeout) as resp:
                    status = resp.status
                    retry_after = resp.headers.get("Retry-After")
                    await resp.read()
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            if delivered(status):
                return Delivery(True, attempt + 1, f"HTTP {status}")
            decision = next_attempt(self.policy, attempt, status, retry_after, self.clock(), error)
            if not decision.retry:
                log.error(
                    "webhook %s: %s not delivered: %s; it said: %s", redact(self.url), what, decision.why,
                    payload.get("text", ""),
                )
                return Delivery(False, attempt + 1, decision.why)
            log.warning("webhook %s: %s: %s", redact(self.url), what, decision.why)
            await self.sleep(decision.delay)
            attempt += 1
