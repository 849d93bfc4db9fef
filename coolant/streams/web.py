"""The worker's own web pages on Faust's web server: /livez, /healthz and /metrics (the admin API's routes are
`admin_api.py`'s)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from coolant.streams import metrics
from coolant.streams.context import Context
from coolant.streams.monitor import StallWatch
from coolant.streams.registry import LiveRegistry

Handler = Callable[[Any, Any], Awaitable[Any]]


def register(ctx: Context, registry: LiveRegistry, stall: StallWatch) -> None:
    app = ctx.app
    page: Callable[[str], Callable[[Handler], Handler]] = app.page

    def stalled() -> dict[str, str]:
        since = stall.stalled_for()
        return {} if since is None else {"stalled": f"input records wait and none was decided for {since:.0f} s"}

    @page("/livez")
    async def livez(web: Any, request: Any) -> Any:
        """Whether a restart would help: for a stall, which a restart ends (the next start reads from the last
        commit), not for the rest of what /healthz reports (e.g. Redis down, which a restart cannot fix)."""
        problems = stalled()
        if problems:  # an orchestrator's liveness probe restarts a worker stuck this way
            return web.json({"status": "unhealthy", "problems": problems}, status=503)
        return web.json({"status": "ok"})

    @page("/healthz")
    async def healthz(web: Any, request: Any) -> Any:
        body: dict[str, Any] = {"status": "ok", "deployments": len(registry.policy.registry.entries)}
        problems = {**ctx.problems, **stalled()}
        if problems:
            body.update(status="unhealthy", problems=problems)
            return web.json(body, status=503)
        return web.json(body)

    app.monitor = metrics.Monitor(metrics=metrics.faust_metrics())

    @page("/metrics")
    async def prometheus(web: Any, request: Any) -> Any:
        return web.bytes(generate_latest(metrics.REGISTRY), headers={"Content-Type": CONTENT_TYPE_LATEST})
