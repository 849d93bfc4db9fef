"""LiteLLM's own cooldowns against LiteLLM + coolant, as the number of gateway pods grows.

    scripts/kafka-local start && scripts/redis-local start
    .venv/bin/python bench/fleet_compare.py [--pods 1,2,5,10] [--rate 20] [--kinds 500,429] [--profile outlier]

P LiteLLM 1.110.2 Routers ("pods") in this process, all on one Redis (as a fleet shares it), serve one model
group of three deployments; one of them fails every request (LiteLLM `mock_response`: first a 500
InternalServerError, then, in a second run, a 429 RateLimitError without Retry-After). Requests are spread
round-robin over the pods at --rate requests/s with `num_retries=0`, so every request that lands on the bad
deployment is an error the user sees. A run ends once no request has failed for --quiet seconds and every
pod's own cooldown reader holds the bad deployment (the cooldowns last 60 s); it counts the failed requests
(median of --repeat runs), for:

  native           LiteLLM's defaults (V2: immediate for a 429 on a multi-deployment group, else >50 % failures
                   over >= 5 requests in a minute, counted per process); cooldowns go to the shared Redis
  native af=3      the same with `allowed_fails=3` (V1: the 4th failure cools)
  coolant          `CoolantCallback` on every pod, one `coolant worker`; the Routers run with
                   `disable_cooldowns=True`, which stops LiteLLM's own decisions but not its reading of the
                   Redis cooldown keys, so only coolant cools. Each pod's callback has the worker's config
                   (fast path: a one-record rule cools the pod's router before the failure hook returns) and
                   its own push subscription (every cooldown written reaches the pod's router at once)

Then the callback's cost on the request path: the time spent inside its hooks (p50/p99 over --latency-requests
successes and failures), and the latency of a mocked request with and without the callback.
Prints tables (and with --json FILE one object per cell: {"kind", "pods", "profile", "native", "native_af3",
"coolant", "load"}, medians of the runs); the Kafka topics and Redis keys it made are deleted at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import contextvars
import json
import math
import os
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before litellm is imported: no cost-map fetch

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import litellm  # noqa: E402
from litellm.integrations.custom_logger import CustomLogger  # noqa: E402

from coolant.config.loader import parse_config  # noqa: E402
from coolant.integrations.litellm import CoolantCallback  # noqa: E402
from coolant.publish import Publisher  # noqa: E402
from tests.support.kafka import create_topics, delete_topics  # noqa: E402
from tests.support.redis import delete_redis_keys  # noqa: E402
from tests.support.worker import Worker  # noqa: E402

BOOTSTRAP = os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:19092")
REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:16379/0")
COOLDOWN = 60
MODES = ("native", "native af=3", "coolant")
KINDS = {"500": "litellm.InternalServerError", "429": "litellm.RateLimitError"}
MESSAGES = [{"role": "user", "content": "hi"}]
ROUNDS = 5

litellm.suppress_debug_info = True


def ids(tag: str, mode: str, kind: str, pods: int) -> tuple[str, list[str]]:
    name = f"{tag}-{mode.replace(' ', '').replace('=', '')}-{kind}-p{pods}"
    return name, [f"{name}-bad", f"{name}-ok1", f"{name}-ok2"]


def model_list(group: str, deployments: list[str], kind: str) -> list[dict[str, Any]]:
    mocks = [KINDS[kind], "hi", "hi"]
    return [
        {"model_name": group, "litellm_params": {"model": "openai/gpt-4o-mini", "api_key": "sk-bench",
                                                 "mock_response": mock}, "model_info": {"id": dep}}
        for dep, mock in zip(deployments, mocks, strict=True)
    ]


FEEDS: list[Any] = []
"""Every pod's push feed, for the summary line."""
POD: contextvars.ContextVar[CoolantCallback] = contextvars.ContextVar("pod")
"""The callback of the pod a request runs on (asyncio tasks inherit it, so its failure hook sees it)."""


class PodDispatcher(CustomLogger):
    """LiteLLM has one callback list per process; this hands each attempt to its own pod's `CoolantCallback`,
    as if each pod were its own proxy. A success hook that runs outside the request's context (LiteLLM's
    logging worker) goes to the first pod: it only publishes the record."""

    def __init__(self, callbacks: list[CoolantCallback]) -> None:
        super().__init__()
        self.callbacks = callbacks

    def _pod(self) -> CoolantCallback:
        return POD.get(self.callbacks[0])

    async def async_log_success_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
        await self._pod().async_log_success_event(kwargs, response_obj, start_time, end_time)

    async def async_log_failure_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
        await self._pod().async_log_failure_event(kwargs, response_obj, start_time, end_time)


@dataclass
class RunResult:
    failed: int
    requests: int
    spread: float  # seconds from the first to the last failed request
    all_cooled: bool


async def run(mode: str, kind: str, pods: int, tag: str, namespace: str, rate: float, quiet: float,
              max_seconds: float, pod_callback: Any = None) -> RunResult:
    """`pod_callback(router) -> CoolantCallback`: makes each pod's callback (coolant mode)."""
    group, deployments = ids(tag, mode, kind, pods)
    host = urlparse(REDIS_URL).hostname or "127.0.0.1"
    port = urlparse(REDIS_URL).port or 6379
    settings: dict[str, Any] = {"cooldown_time": COOLDOWN}
    if mode == "native af=3":
        settings["allowed_fails"] = 3
    if mode == "coolant":
        settings["disable_cooldowns"] = True
    warm = {"model_name": f"{group}-warmup", "model_info": {"id": f"{group}-warmup"},
            "litellm_params": {"model": "openai/gpt-4o-mini", "api_key": "sk-bench", "mock_response": "hi"}}
    routers = [
        litellm.Router(model_list=[*model_list(group, deployments, kind), warm], redis_host=host, redis_port=port,
                       cache_kwargs={"namespace": namespace}, num_retries=0, **settings)
        for _ in range(pods)
    ]
    # a first request per pod off the measured group: LiteLLM's first call is slow, and a slow start would
    # make the rate loop below fall behind
    callbacks: list[CoolantCallback] = []
    if pod_callback is not None:
        callbacks = [pod_callback(r) for r in routers]
        feeds = [await cb.start_push() for cb in callbacks]
        FEEDS.extend(f for f in feeds if f is not None)
        await asyncio.gather(*(asyncio.wait_for(f.subscribed.wait(), 10) for f in feeds if f is not None))
        litellm.callbacks = [PodDispatcher(callbacks)]
    try:
        return await _drive(routers, callbacks, group, deployments, rate, quiet, max_seconds)
    finally:
        for cb in callbacks:
            await cb.aclose(5.0)


async def _drive(routers: list[Any], callbacks: list[CoolantCallback], group: str, deployments: list[str],
                 rate: float, quiet: float, max_seconds: float) -> RunResult:
    pods = len(routers)
    await asyncio.gather(*(r.acompletion(model=f"{group}-warmup", messages=MESSAGES) for r in routers))
    failed: list[float] = []
    tasks: set[asyncio.Task[None]] = set()

    async def one(router: Any, callback: CoolantCallback | None) -> None:
        if callback is not None:
            POD.set(callback)
        try:
            await router.acompletion(model=group, messages=MESSAGES)
        except Exception:
            failed.append(time.monotonic())

    async def every_pod_cooled() -> bool:
        bad = deployments[0]
        return all([await r.health().cooldowns.async_get_active_cooldowns([bad], None) for r in routers])

    start = next_at = check_at = time.monotonic()
    n = 0
    while True:
        now = time.monotonic()
        if now - start > max_seconds:
            break
        # quiet for a while, and then (only then: a read refreshes a pod's memory tier early) every pod's own
        # cooldown reader holds the bad deployment
        if failed and now - failed[-1] >= quiet and now >= check_at:
            if await every_pod_cooled():
                break
            check_at = now + 1.0
        task = asyncio.create_task(one(routers[n % pods], callbacks[n % pods] if callbacks else None))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        n += 1
        next_at = max(next_at + 1.0 / rate, time.monotonic())  # a fixed pace, never a catch-up burst
        await asyncio.sleep(next_at - time.monotonic())
    await asyncio.gather(*tasks)
    return RunResult(len(failed), n, (failed[-1] - failed[0]) if failed else 0.0, await every_pod_cooled())


def write_coolant_config(path: Path, tags: list[str], pods_list: list[int], kinds: list[str], profile: str) -> None:
    """The worker's (and the pods') config: the coolant runs' deployments (an unknown deployment is never cooled,
    R6) and the profile."""
    models: list[dict[str, Any]] = []
    for tag in tags:
        for kind in kinds:
            for pods in pods_list:
                group, deployments = ids(tag, "coolant", kind, pods)
                models += model_list(group, deployments, kind)
    config: dict[str, Any] = {"model_list": models, "router_settings": {"cooldown_time": COOLDOWN}}
    if profile != "compatible":
        config["coolant"] = {"profile": profile}
    path.write_text(yaml.safe_dump(config))


def pct(values: list[float], p: int) -> float:
    """The p-th percentile; NaN with no value at all, the value itself with one (`statistics.quantiles` needs two:
    a hook LiteLLM never called, e.g. the thread publisher's async failure hook, has none)."""
    if len(values) < 2:
        return values[0] if values else math.nan
    return statistics.quantiles(values, n=100, method="inclusive")[p - 1]


class NoOpLogger(CustomLogger):
    """A callback that does nothing: what any CustomLogger costs in LiteLLM itself."""

    async def async_log_success_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
        return None

    async def async_log_failure_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
        return None


class NullSink:
    """A publisher that takes every record and sends none: the callback's cost without the Kafka client's."""

    def publish(self, record: object) -> bool:
        return True


def timed_hooks(cb: CoolantCallback, inside: dict[bool, list[float]]) -> None:
    """Record the time spent in each async hook call (µs), by outcome."""
    for name, ok in (("async_log_success_event", True), ("async_log_failure_event", False)):
        original = getattr(cb, name)

        async def hook(kwargs: Any, response_obj: Any, start_time: Any, end_time: Any,
                       _original: Any = original, _ok: bool = ok) -> None:
            t = time.perf_counter_ns()
            await _original(kwargs, response_obj, start_time, end_time)
            inside[_ok].append((time.perf_counter_ns() - t) / 1000.0)

        setattr(cb, name, hook)


async def callback_cost(n: int, tag: str, prefix: str) -> list[str]:
    """Time inside the hooks, and request latency without a callback, with a no-op CustomLogger, with
    CoolantCallback handing its records to a null publisher (building them only), and with CoolantCallback
    publishing to Kafka (event-loop publisher, the default; the thread publisher), on Routers with mock
    responses (no network): one of three healthy deployments, or a single failing one (500)."""
    group = f"{tag}-latency"
    params = {"model": "openai/gpt-4o-mini", "api_key": "sk-bench"}
    good = [{"model_name": group, "litellm_params": {**params, "mock_response": "hi"},
             "model_info": {"id": f"{group}-{i}"}} for i in range(3)]
    bad = [{"model_name": group, "litellm_params": {**params, "mock_response": KINDS["500"]},
            "model_info": {"id": f"{group}-x"}}]
    routers = {"success": litellm.Router(model_list=good, num_retries=0, disable_cooldowns=True),
               "failure": litellm.Router(model_list=bad, num_retries=0, disable_cooldowns=True)}
    inside: dict[str, dict[bool, list[float]]] = {"loop": {True: [], False: []}, "thread": {True: [], False: []}}
    loggers: dict[str, Any] = {"none": None, "no-op logger": NoOpLogger(),
                               "coolant, no Kafka": CoolantCallback(publisher=NullSink(), gateway="bench-null")}
    policy = parse_config({"model_list": good + bad}).policy
    for mode in ("loop", "thread"):
        # the default mode as a fleet runs it: fast path (a policy) and the push subscription running
        extra: dict[str, Any] = {"policy": policy, "redis_url": REDIS_URL, "redis_key_prefix": f"{tag}-cost:",
                                 "routers": routers.values()} if mode == "loop" else {}
        cb = CoolantCallback(BOOTSTRAP, topic_prefix=prefix, gateway=f"bench-{mode}",
                             mode="auto" if mode == "loop" else "thread", **extra)
        if mode == "loop":
            feed = await cb.start_push()
            assert feed is not None
            await asyncio.wait_for(feed.subscribed.wait(), 10)
        timed_hooks(cb, inside[mode])
        loggers[f"coolant ({mode})"] = cb

    async def latencies(router: Any, count: int) -> list[float]:
        out = []
        for _ in range(count):
            t = time.perf_counter()
            with contextlib.suppress(Exception):
                await router.acompletion(model=group, messages=MESSAGES)
            out.append((time.perf_counter() - t) * 1000.0)
        return out

    def use(logger: Any) -> None:
        for other in loggers.values():
            if other is not None:
                litellm.logging_callback_manager.remove_callback_from_all_lists(other)
        litellm.callbacks = [logger] if logger is not None else []

    results: dict[tuple[str, str], list[float]] = {}
    try:
        for label, router in routers.items():
            use(None)
            await latencies(router, 50)  # warm up
            for _ in range(ROUNDS):  # interleaved rounds, so drift hits every column alike
                for name, logger in loggers.items():
                    use(logger)
                    results.setdefault((label, name), []).extend(await latencies(router, n // ROUNDS))
                    await asyncio.sleep(0.3)  # success hooks run on LiteLLM's logging worker, after the response
    finally:
        use(None)
        for logger in loggers.values():
            if isinstance(logger, CoolantCallback) and logger.publisher is not None:
                await logger.aclose(5.0)
    lines = [f"callback cost: {n} mocked requests per cell, sequential; p50 / p99 (the loop callback with the fast "
             "path's policy and its push subscription running)",
             "  time inside the hook (µs): " + "; ".join(
                 f"{label} {mode}: {pct(inside[mode][ok], 50):.0f} / {pct(inside[mode][ok], 99):.0f} "
                 f"({len(inside[mode][ok])} calls)"
                 for mode in ("loop", "thread") for label, ok in (("success", True), ("failure", False))),
             "  request latency (ms):",
             "  " + f"{'':<9} | " + " | ".join(f"{name:>17}" for name in loggers)]
    for label in routers:
        lines.append("  " + f"{label:<9} | " + " | ".join(
            f"{pct(results[(label, name)], 50):>9.2f} / {pct(results[(label, name)], 99):>5.2f}" for name in loggers))
    return lines


async def main_async(a: argparse.Namespace) -> None:
    t_start = time.monotonic()
    pods_list = [int(p) for p in a.pods.split(",")]
    kinds = a.kinds.split(",")
    tag = f"fc{uuid.uuid4().hex[:6]}"
    namespace = tag
    prefix = f"{tag}."
    workdir = Path(tempfile.mkdtemp(prefix="coolant-fleet-compare-"))
    config = workdir / "litellm.yaml"
    write_coolant_config(config, [f"{tag}r{rep}" for rep in range(a.repeat)], pods_list, kinds, a.profile)
    await create_topics(BOOTSTRAP, prefix, 2)
    worker = Worker(name="fleet", config=config, bootstrap=BOOTSTRAP, topic_prefix=prefix, app_id=f"{tag}-app",
                    workdir=workdir, redis_url=REDIS_URL, redis_key_prefix=f"{namespace}:", partitions=2)
    worker.start()
    cb = CoolantCallback(BOOTSTRAP, topic_prefix=prefix, gateway="bench")
    publisher = Publisher(BOOTSTRAP, topic_prefix=prefix)  # one Kafka producer for every pod of this process
    await publisher.start()
    made: list[CoolantCallback] = []

    def pod_callback(router: Any) -> CoolantCallback:
        pod = CoolantCallback(publisher=publisher, config=config, redis_url=REDIS_URL,
                              redis_key_prefix=f"{namespace}:", routers=[router], gateway=f"bench-{len(made)}")
        made.append(pod)
        return pod

    try:
        await worker.wait_ready()
        print(f"worker ready after {time.monotonic() - t_start:.1f} s (coolant profile: {a.profile}); {a.rate:g} "
              f"requests/s round-robin over the pods, 3 deployments (1 failing), num_retries=0, cooldowns "
              f"{COOLDOWN} s; load average {os.getloadavg()[0]:.2f}", flush=True)
        table: dict[tuple[str, int, str], list[RunResult]] = {}
        for rep in range(a.repeat):
            for kind in kinds:
                for pods in pods_list:
                    for mode in MODES:
                        try:
                            res = await run(mode, kind, pods, f"{tag}r{rep}", namespace, a.rate, a.quiet,
                                            a.max_seconds, pod_callback if mode == "coolant" else None)
                        finally:
                            for logger in litellm.callbacks:
                                litellm.logging_callback_manager.remove_callback_from_all_lists(logger)
                            litellm.callbacks = []
                        table.setdefault((kind, pods, mode), []).append(res)
                        print(f"  run {rep + 1}: {kind} P={pods:<2} {mode:<12} failed {res.failed:>3} of "
                              f"{res.requests:>4} requests, first..last failure {res.spread:5.2f} s, every pod "
                              f"cooled: {'yes' if res.all_cooled else 'NO'}", flush=True)
        print()
        for kind in kinds:
            print(f"failing deployment answers {kind}: user-visible failed requests before every pod stopped "
                  f"routing to it, median of {a.repeat} runs (min-max) [median s from first to last failure]")
            print("  " + f"{'pods':>4} | " + " | ".join(f"{m:>22}" for m in MODES))
            for pods in pods_list:
                cells = []
                for m in MODES:
                    runs = table[(kind, pods, m)]
                    counts = [r.failed for r in runs]
                    spread = statistics.median(r.spread for r in runs)
                    star = "" if all(r.all_cooled for r in runs) else "*"
                    cells.append(f"{statistics.median(counts):>5g} ({min(counts):>2}-{max(counts):<2}) "
                                 f"[{spread:4.2f} s]{star}")
                print("  " + f"{pods:>4} | " + " | ".join(f"{c:>22}" for c in cells))
            print()
        if any(not r.all_cooled for runs in table.values() for r in runs):
            print("* some pod did not hold the cooldown at the end of a run (--max-seconds reached)\n")
        if a.json is not None:
            cells = [{"kind": kind, "pods": pods, "profile": a.profile,
                      **{m.replace(" af=3", "_af3"): statistics.median(r.failed for r in table[(kind, pods, m)])
                         for m in MODES}, "load": os.getloadavg()[0]}
                     for kind in kinds for pods in pods_list]
            a.json.write_text(json.dumps(cells, indent=1) + "\n")
            print(f"wrote {a.json}")
        prefetched = sum(p.stats.prefetched for p in made)
        pushed = sum(f.stats.applied for f in FEEDS)
        print(f"fleet runs: {len(made)} pod callbacks, {prefetched} failures cooled by the fast path; "
              f"publisher {publisher.stats}; pushed cooldowns applied (per pod, summed) {pushed}\n")
        await cb.aclose(5.0)
        if a.latency_requests > 0:
            print("\n".join(await callback_cost(a.latency_requests, tag, prefix)))
    finally:
        await cb.aclose(5.0)
        await publisher.stop(5.0)
        worker.stop()
        await delete_topics(BOOTSTRAP, [prefix, f"{tag}-app"])
        await delete_redis_keys(REDIS_URL, f"{namespace}:")
    print(f"total {time.monotonic() - t_start:.0f} s")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pods", default="1,2,5,10", help="comma-separated pod counts")
    p.add_argument("--kinds", default="500,429", help="failure kinds: 500, 429")
    p.add_argument("--rate", type=float, default=20.0, help="requests per second, all pods together")
    p.add_argument("--quiet", type=float, default=3.0, help="seconds without a failure that end a run")
    p.add_argument("--max-seconds", type=float, default=45.0, help="longest run")
    p.add_argument("--repeat", type=int, default=3, help="runs per cell (the table shows the median)")
    p.add_argument("--profile", default="compatible", choices=("compatible", "outlier"),
                   help="coolant's profile (`coolant: {profile: ...}` in the worker's and the pods' config)")
    p.add_argument("--latency-requests", type=int, default=1000, help="requests per latency cell (0: skip)")
    p.add_argument("--json", type=Path, default=None, metavar="FILE",
                   help='also write the cells to FILE: [{"kind", "pods", "native", "native_af3", "coolant"}, ...]')
    asyncio.run(main_async(p.parse_args()))


if __name__ == "__main__":
    main()
