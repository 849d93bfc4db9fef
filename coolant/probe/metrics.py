"""Prometheus metrics of a prober (optional: `coolant probe --metrics-port`).

Built from the round reports `Prober` hands to its `on_round` hook, so the prober loop itself knows nothing of
metrics. A registry of its own, not the worker's: a prober and a worker are separate processes and scrape targets.
Sum the counters over the probers of a group for the fleet (each deployment is probed by one of them per round).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from coolant.probe.service import RoundReport


class ProbeMetrics:
    """The prober's series; `record` is the `on_round` hook."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.registry = CollectorRegistry(auto_describe=True)
        self.records = Counter(
            "coolant_probe_records_total", "Health records published, by model group and verdict.",
            ["model_group", "healthy"], registry=self.registry,
        )
        self.skipped = Counter(
            "coolant_probe_skipped_total", "Deployments due in a round that no engine could probe (logged once).",
            registry=self.registry,
        )
        self.rounds = Counter(
            "coolant_probe_rounds_total",
            "Rounds this prober probed; committed=false when membership changed under it (a round may repeat).",
            ["committed"], registry=self.registry,
        )
        self.latency = Histogram(
            "coolant_probe_latency_seconds", "Duration of one probe call, by verdict.", ["healthy"],
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30), registry=self.registry,
        )
        self.last_round = Gauge(
            "coolant_probe_last_round_timestamp_seconds",
            "When this prober last finished a round (alert when no prober of a group has for several intervals).",
            registry=self.registry,
        )

    def record(self, report: RoundReport) -> None:
        for r in report.records:
            healthy = "true" if r.healthy else "false"
            self.records.labels(r.model_group, healthy).inc()
            if r.latency_ms is not None:
                self.latency.labels(healthy).observe(r.latency_ms / 1000)
        if report.skipped:
            self.skipped.inc(len(report.skipped))
        self.rounds.labels("true" if report.committed else "false").inc()
        self.last_round.set(self.clock())

    def render(self) -> bytes:
        return generate_latest(self.registry)

    async def serve(self, port: int, bind: str = "127.0.0.1") -> web.AppRunner:
        """`GET /metrics` on the running loop; the caller cleans the runner up."""

        async def metrics(_: web.Request) -> web.Response:
            return web.Response(body=self.render(), headers={"Content-Type": CONTENT_TYPE_LATEST})

        app = web.Application()
        app.router.add_get("/metrics", metrics)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, bind, port).start()
        return runner
