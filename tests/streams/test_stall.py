"""The stall watch: waiting records with no batch decided for the threshold is a stall; idle never is."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from pathlib import Path
from typing import Any

import pytest

from coolant.config.loader import load_config
from coolant.streams import metrics
from coolant.streams.app import Pipeline, WorkerOptions
from coolant.streams.faust import recovery_state
from coolant.streams.monitor import StallWatch, awaiting

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "litellm.yaml"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_waiting_records_without_progress_is_a_stall_and_progress_ends_it() -> None:
    clock = Clock()
    watch = StallWatch(after=60, clock=clock)
    clock.now += 59
    watch.waiting(10)
    assert watch.stalled_for() is None
    clock.now += 1
    watch.waiting(10)
    assert watch.stalled_for() == 60
    assert metrics.REGISTRY.get_sample_value("coolant_stalled") == 1
    watch.progressed()
    assert watch.stalled_for() is None
    assert metrics.REGISTRY.get_sample_value("coolant_stalled") == 0


def test_idle_is_not_stalled() -> None:
    clock = Clock()
    watch = StallWatch(after=60, clock=clock)
    for _ in range(10):
        clock.now += 30
        watch.waiting(0)
    assert watch.stalled_for() is None
    clock.now += 30
    watch.waiting(5)  # records just arrived: the clock starts at the last idle reading
    assert watch.stalled_for() is None


def test_the_stall_line_carries_the_diagnosis_and_a_failing_one_does_not_stop_it(
        caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    watch = StallWatch(after=60, clock=clock, diagnose=lambda: "table recovery waits on x[0]")
    clock.now += 60
    with caplog.at_level(logging.ERROR, logger="coolant.streams.monitor"):
        watch.waiting(3)
    assert caplog.records[-1].getMessage().endswith("for 60 s; table recovery waits on x[0]")

    def broken() -> str:
        raise KeyError("tp")

    watch = StallWatch(after=60, clock=clock, diagnose=broken)
    clock.now += 60
    with caplog.at_level(logging.ERROR, logger="coolant.streams.monitor"):
        watch.waiting(3)
    assert "(no diagnosis: KeyError" in caplog.records[-1].getMessage()
    assert watch.stalled_for() == 60


def test_recovery_state_of_a_worker_not_recovering() -> None:
    p = Pipeline(load_config(EXAMPLE), WorkerOptions(web_port=16068, partitions=2), sink=None)
    assert recovery_state(p.app) == "table recovery: not running"


async def test_awaiting_names_each_coroutine_down_to_the_suspended_one() -> None:
    never: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def send() -> None:
        await never

    async def decide() -> None:
        await send()

    task = asyncio.create_task(decide())
    await asyncio.sleep(0)
    assert re.fullmatch(r"decide:\d+ > send:\d+", awaiting(task)), awaiting(task)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert awaiting(task) == "done"


def test_the_stall_diagnosis_of_a_worker_not_started() -> None:
    p = Pipeline(load_config(EXAMPLE), WorkerOptions(web_port=16069, partitions=2), sink=None)
    diagnosis = p.diagnosis()
    assert "table recovery: not running; producer: not started; lane " in diagnosis, diagnosis
    assert "0 pending, no task" in diagnosis


async def test_livez_fails_only_for_a_stall(tmp_path: Path) -> None:
    """A restart ends a stall (the next start reads from the last commit), so liveness fails for it; Redis being
    down, which a restart cannot fix, stays on /healthz only."""
    from aiohttp.test_utils import TestClient, TestServer

    p = Pipeline(load_config(EXAMPLE), WorkerOptions(web_port=16070, partitions=2, datadir=str(tmp_path)), sink=None)
    web: Any = p.app.web
    web.init_server()
    async with TestClient(TestServer(web.web_app)) as client:
        p.problems["redis"] = "connection refused"
        assert (await client.get("/livez")).status == 200
        assert (await client.get("/healthz")).status == 503
        p.stall.stalled_since = p.stall.clock() - 61
        live = await client.get("/livez")
        assert live.status == 503
        assert "none was decided for 61 s" in (await live.json())["problems"]["stalled"]
        health = await (await client.get("/healthz")).json()
        assert set(health["problems"]) == {"redis", "stalled"}
