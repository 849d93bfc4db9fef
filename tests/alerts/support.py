"""Records to feed the alert tests and a local webhook receiver that can be told to fail."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

from coolant.schemas import Cooldown, HealthTransition, Window


def cooldown(
    i: int, dep: str = "dep-a", *, ts: float = 1_800_000_000.0, seconds: float = 60.0, reason: str = "rate_limited",
    status: int | None = 429, exc: str = "litellm.RateLimitError: you exceeded your current quota, please check***",
) -> Cooldown:
    return Cooldown(
        event_id=f"cd-{dep}-{i}", deployment_id=dep, model_group="grp-1", ts=ts, until=ts + seconds,
        cooldown_time=int(seconds) if float(seconds).is_integer() else seconds, reason=reason,  # type: ignore[arg-type]
        status_code=status, exception_type="RateLimitError", exception_received=exc,
        trigger_event_id=f"ev-{dep}-{i}", window=Window(start=ts - 30, successes=3, failures=12),
    )


def transition(
    i: int, dep: str = "dep-h", *, healthy: bool, previous: bool | None, ts: float = 1_800_000_000.0
) -> HealthTransition:
    return HealthTransition(
        event_id=f"ht-{dep}-{i}", deployment_id=dep, model_group="grp-h", ts=ts, healthy=healthy, previous=previous,
        status_code=None if healthy else 503, exception_type=None if healthy else "ServiceUnavailableError",
        exception_received="" if healthy else "litellm.ServiceUnavailableError: overloaded",
        prober="prober-1", probe_event_id=f"probe-{dep}-{i}",
    )


@dataclass
class Receiver:
    """An aiohttp server on 127.0.0.1 (ephemeral port) recording every webhook post.

    `failures` lists the statuses to answer the next attempts with (then 200); `retry_after` goes with a 429.
    """

    failures: list[int] = field(default_factory=list)
    retry_after: str | None = None
    always: int | None = None
    """Answer every attempt with this status (a webhook that stays down)."""
    posts: list[dict[str, Any]] = field(default_factory=list)
    attempts: int = 0
    server: TestServer | None = None
    url: str = ""

    async def _hook(self, request: web.Request) -> web.Response:
        self.attempts += 1
        body = await request.json()
        status = self.always if self.always is not None else (self.failures.pop(0) if self.failures else 200)
        if status != 200:
            headers = {"Retry-After": self.retry_after} if status == 429 and self.retry_after else {}
            return web.Response(status=status, text="no", headers=headers)
        self.posts.append(body)
        return web.Response(text="ok")

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/hook", self._hook)
        self.server = TestServer(app, host="127.0.0.1", port=0)
        await self.server.start_server()
        self.url = str(self.server.make_url("/hook"))
        return self.url

    async def close(self) -> None:
        if self.server is not None:
            await self.server.close()

    def texts(self) -> list[str]:
        return [str(p["text"]) for p in self.posts]
