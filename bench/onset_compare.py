"""An incident at any second of the minute: LiteLLM's own cooldowns against coolant's (issue 17, docs/windows.md).

    scripts/kafka-local start && scripts/redis-local start
    .venv/bin/python bench/onset_compare.py [--onsets 1,15,30,45,59] [--repeat 2] [--rate 30]

Three LiteLLM 1.110.2 Routers ("pods") in this process, on one Redis as a fleet shares it, serve one model group of
three deployments A, B, C on a fake OpenAI upstream (real HTTP, `tests/litellm/support_litellm.FakeOpenAI`),
called through LiteLLM's OpenAI client. --rate requests/s go round-robin over the pods with `num_retries=0`, so a
request routed to a failing C is an error the user sees. After --warmup seconds of successes, C answers 500 to
every request, from a chosen second of the wall-clock minute (the onset) on, for --incident seconds. Two runs go
side by side on the same upstream switch, with their own deployments:

  litellm   LiteLLM's defaults: V2 per process (>50 % failures over >= 5 requests, each pod counting in its own
            60 s keys), cooldowns (5 s) shared through Redis
  coolant   the Routers run with `disable_cooldowns=True` and `CoolantCallback`; one `coolant worker` decides
            (default profile, so D7, plus `recool_coalesce` from --coalesce) and writes the Redis keys; each pod
            publishes as its own gateway (`pod-0`..`pod-2`), as three proxy processes would

Event time is the wall clock (the callback stamps each record), so the onset second is the one the minute window
sees. Prints, per onset, the failed requests of each run, and for coolant the cooldown records per incident (an
incident: a record that starts a cooldown plus the records extending it while it is in force), live and replayed
through the policy without X8. Not the 3 proxy processes of issue 17: Routers in one process, and the callback
has no config and no Redis URL, so no fast path (PF) and no push; `bench/onset_proxies.py` is the benchmark
with real proxies, PF and the push (docs/windows.md §6).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before litellm is imported: no cost-map fetch

import orjson
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "litellm"))

import litellm  # noqa: E402
from support_litellm import MESSAGES, deployment  # noqa: E402

from coolant.config.loader import load_config  # noqa: E402
from coolant.integrations.litellm import CoolantCallback  # noqa: E402
from coolant.processors import Engine  # noqa: E402
from coolant.schemas import Outcome, decode, encode  # noqa: E402
from tests.support.kafka import create_topics, delete_topics, read_topic  # noqa: E402
from tests.support.redis import delete_redis_keys  # noqa: E402
from tests.support.upstream import SERVER_ERROR, FakeOpenAI  # noqa: E402
from tests.support.worker import Worker  # noqa: E402

BOOTSTRAP = os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:19092")
REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:16379/0")
PODS = 3
MODES = ("litellm", "coolant")

litellm.suppress_debug_info = True


class PodCallback(CoolantCallback):
    """`CoolantCallback` with the record's `gateway` set to the pod that served the request (metadata `pod`): the
    three Routers share one process, and one callback, but must publish as three gateways (D7 counts per pod)."""

    def _handle(self, kwargs: Any, start_time: Any, end_time: Any, ok: bool, sink_for: Any) -> Any:
        params = kwargs.get("litellm_params") if isinstance(kwargs, dict) else None
        meta = (params or {}).get("metadata") or kwargs.get("metadata") or {}
        saved = self._gateway
        self._gateway = meta.get("pod") or saved  # no await in between: no other hook sees it
        try:
            return super()._handle(kwargs, start_time, end_time, ok, sink_for)
        finally:
            self._gateway = saved


def run_ids(tag: str, onset: int, rep: int, mode: str) -> tuple[str, list[str]]:
    group = f"{tag}-s{onset:02d}-r{rep}-{mode}"
    return group, [f"{group}-A", f"{group}-B", f"{group}-C"]


def switch_of(tag: str, onset: int, rep: int) -> str:
    """The upstream mode name both runs' C share: failing from the onset on."""
    return f"{tag}s{onset:02d}r{rep}"


def model_list(fake: FakeOpenAI, group: str, deps: list[str], switch: str) -> list[dict[str, Any]]:
    return [deployment(d, group, fake.base("ok" if i < 2 else switch)) for i, d in enumerate(deps)]


@dataclass
class RunResult:
    failed: int
    requests: int


async def run(fake: FakeOpenAI, mode: str, group: str, deps: list[str], switch: str, namespace: str, start_at: float,
              a: argparse.Namespace) -> RunResult:
    """Build the pods, wait for `start_at` (wall clock), warm up, then the incident; failed requests after onset."""
    url = urlparse(REDIS_URL)
    settings: dict[str, Any] = {"disable_cooldowns": True} if mode == "coolant" else {}
    warm = deployment(f"{group}-warmup", f"{group}-warmup", fake.base("ok"))
    routers = [
        litellm.Router(model_list=[*model_list(fake, group, deps, switch), warm],
                       redis_host=url.hostname or "127.0.0.1", redis_port=url.port or 6379,
                       cache_kwargs={"namespace": namespace}, num_retries=0, **settings)
        for _ in range(PODS)
    ]
    failed = 0
    onset = start_at + a.warmup

    async def one(pod: int) -> None:
        nonlocal failed
        try:
            await routers[pod].acompletion(model=group, messages=MESSAGES, metadata={"pod": f"pod-{pod}"})
        except Exception:
            if time.time() >= onset:
                failed += 1

    for r in routers:  # a first call per pod off the measured group (LiteLLM's first call is slow)
        with contextlib.suppress(Exception):
            await r.acompletion(model=f"{group}-warmup", messages=MESSAGES)
    await asyncio.sleep(max(0.0, start_at - time.time()))
    total = await paced(lambda i: one(i % PODS), a.rate, onset + a.incident)
    return RunResult(failed, total)


async def paced(call: Callable[[int], Awaitable[None]], rate: float, end: float) -> int:
    """Start `call(0)`, `call(1)`, ... at `rate` per second until wall time `end`, then wait for all; how many."""
    tasks: set[asyncio.Task[None]] = set()
    total = 0
    next_at = time.monotonic()
    while time.time() < end:
        task = asyncio.ensure_future(call(total))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        total += 1
        next_at = max(next_at + 1.0 / rate, time.monotonic())  # a fixed pace, never a catch-up burst
        await asyncio.sleep(next_at - time.monotonic())
    await asyncio.gather(*tasks)
    return total


def next_start(onset: int, warmup: float, after: float) -> float:
    """The first wall time >= `after` at which a run whose onset falls on second `onset` of a minute starts."""
    t = (int(after) // 60) * 60 + onset - warmup
    while t < after:
        t += 60
    return t


def schedule(onsets: list[int], repeat: int, warmup: float, lead: float) -> Iterator[tuple[int, int, float]]:
    """(onset, repetition, start) of every run, each the soonest still to do when the previous one is over; `lead`:
    seconds a run needs before it starts (building its pods)."""
    todo = [(onset, rep) for rep in range(repeat) for onset in onsets]
    while todo:
        now = time.time() + lead
        onset, rep = min(todo, key=lambda t: next_start(t[0], warmup, now))
        todo.remove((onset, rep))
        yield onset, rep, next_start(onset, warmup, now)


async def switch_on(fake: FakeOpenAI, switch: str, at: float) -> None:
    """At wall time `at`, the incident: the run's switch deployment starts answering 500."""
    await asyncio.sleep(max(0.0, at - time.time()))
    fake.failing[switch] = SERVER_ERROR


def incidents(cooldowns: list[dict[str, Any]]) -> list[int]:
    """Records per incident, in ts order: a record at or after the current end starts a new one."""
    out: list[int] = []
    end = float("-inf")
    for cd in sorted(cooldowns, key=lambda c: c["ts"]):
        if cd["ts"] >= end:
            out.append(0)
        out[-1] += 1
        end = max(end, cd["until"])
    return out


def write_config(
    path: Path, fake: FakeOpenAI, tag: str, onsets: list[int], repeat: int, coalesce: float | None
) -> None:
    models: list[dict[str, Any]] = []
    for onset in onsets:
        for rep in range(repeat):
            group, deps = run_ids(tag, onset, rep, "coolant")
            models += model_list(fake, group, deps, switch_of(tag, onset, rep))
    cfg: dict[str, Any] = {"model_list": models}
    if coalesce is not None:
        cfg["coolant"] = {"recool_coalesce": coalesce}
    path.write_text(yaml.safe_dump(cfg))


async def main_async(a: argparse.Namespace) -> None:
    t_start = time.monotonic()
    onsets = [int(s) for s in a.onsets.split(",")]
    tag = f"oc{uuid.uuid4().hex[:6]}"
    prefix, namespace = f"{tag}.", tag
    workdir = Path(tempfile.mkdtemp(prefix="coolant-onset-"))
    fake = FakeOpenAI().start()
    config = workdir / "litellm.yaml"
    write_config(config, fake, tag, onsets, a.repeat, a.coalesce)
    await create_topics(BOOTSTRAP, prefix, 2)
    worker = Worker(name="onset", config=config, bootstrap=BOOTSTRAP, topic_prefix=prefix, app_id=f"{tag}-app",
                    workdir=workdir, redis_url=REDIS_URL, redis_key_prefix=f"{namespace}:", partitions=2)
    worker.start()
    cb = PodCallback(BOOTSTRAP, topic_prefix=prefix, gateway="bench")
    litellm.callbacks = [cb]  # every pod publishes; the litellm runs' deployments are unknown to the worker (R6)
    results: dict[tuple[int, str], list[RunResult]] = {}
    try:
        await worker.wait_ready()
        print(f"worker ready after {time.monotonic() - t_start:.0f} s; {a.rate:g} requests/s over {PODS} pods, "
              f"C fails from the onset for {a.incident:g} s after {a.warmup:g} s of warm-up; "
              f"recool_coalesce {a.coalesce}", flush=True)
        for onset, rep, start_at in schedule(onsets, a.repeat, a.warmup, lead=3.0):  # 3 s to build the pods
            switch = switch_of(tag, onset, rep)
            runs = await asyncio.gather(
                switch_on(fake, switch, start_at + a.warmup),
                *(run(fake, mode, *run_ids(tag, onset, rep, mode), switch, namespace, start_at, a) for mode in MODES),
            )
            for mode, res in zip(MODES, runs[1:], strict=True):
                results.setdefault((onset, mode), []).append(res)
            print(f"  onset :{onset:02d} run {rep + 1}: " + ", ".join(
                f"{m} {r.failed} failed of {r.requests}" for m, r in zip(MODES, runs[1:], strict=True)), flush=True)
        await asyncio.sleep(3.0)  # the last records reach the worker
        await cb.aclose(5.0)
        outcomes = [decode(m.value) for m in await read_topic(BOOTSTRAP, prefix + "outcomes")]
        cooldowns = [orjson.loads(m.value) for m in await read_topic(BOOTSTRAP, prefix + "cooldowns")]
        print(f"coolant: {len(outcomes)} outcome records, {len(cooldowns)} cooldown records; callback {cb.stats}")
        report(a, tag, onsets, results, cooldowns, outcomes, config)
    finally:
        litellm.callbacks = []
        await cb.aclose(5.0)
        worker.stop()
        fake.stop()
        await delete_topics(BOOTSTRAP, [prefix, f"{tag}-app"])
        await delete_redis_keys(REDIS_URL, f"{namespace}:")
    print(f"total {time.monotonic() - t_start:.0f} s")


def replayed(outcomes: list[Any], config: Path, coalesce: float | None) -> list[dict[str, Any]]:
    """The live input through the policy again (replay == live), with or without X8."""
    policy = load_config(config).policy
    policy = replace(policy, options=replace(policy.options, recool_coalesce=coalesce))
    engine = Engine(policy)
    recs = sorted((r for r in outcomes if isinstance(r, Outcome)), key=lambda r: r.ts)
    return [orjson.loads(encode(cd)) for cd in engine.run(recs)]


def report(a: argparse.Namespace, tag: str, onsets: list[int], results: dict[tuple[int, str], list[RunResult]],
           cooldowns: list[dict[str, Any]], outcomes: list[Any], config: Path) -> None:
    without = replayed(outcomes, config, None)
    print(f"\nfailed requests after the onset (per run), and coolant's cooldown records per incident of C "
          f"(live with recool_coalesce {a.coalesce}; replayed without X8)")
    print(f"  {'onset':>5} | {'litellm':>10} | {'coolant':>10} | {'ratio':>5} | {'records/incident live':>22} | "
          f"{'without X8':>12}")
    ratios = []
    lit_all, coo_all = [], []
    for onset in onsets:
        lit = [r.failed for r in results[(onset, "litellm")]]
        coo = [r.failed for r in results[(onset, "coolant")]]
        lit_all += lit
        coo_all += coo
        ratio = sum(coo) / max(1, sum(lit))
        ratios.append(ratio)
        live, old = [], []
        for rep in range(a.repeat):
            c = run_ids(tag, onset, rep, "coolant")[1][2]
            live += incidents([cd for cd in cooldowns if cd["deployment_id"] == c])
            old += incidents([cd for cd in without if cd["deployment_id"] == c])
        print(f"  {f':{onset:02d}':>5} | {' '.join(map(str, lit)):>10} | {' '.join(map(str, coo)):>10} | "
              f"{ratio:>5.2f} | {fmt(live):>22} | {fmt(old):>12}")
    print(f"  mean: litellm {statistics.mean(lit_all):.1f}, coolant {statistics.mean(coo_all):.1f} "
          f"(coolant/litellm {statistics.mean(coo_all) / max(1e-9, statistics.mean(lit_all)):.2f}); "
          f"onsets where coolant <= litellm: {sum(r <= 1 for r in ratios)} of {len(ratios)}")


def fmt(per_incident: list[int]) -> str:
    if not per_incident:
        return "-"
    return f"max {max(per_incident)}, mean {statistics.mean(per_incident):.1f} ({len(per_incident)})"


def incident_args(doc: str | None, coalesce: float) -> argparse.ArgumentParser:
    """The options both onset benchmarks share (onsets, runs, rate, warm-up, incident, X8)."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--onsets", default="1,15,30,45,59", help="seconds of the minute at which C starts failing")
    p.add_argument("--repeat", type=int, default=2, help="runs per onset")
    p.add_argument("--rate", type=float, default=30.0, help="requests per second, all pods together")
    p.add_argument("--warmup", type=float, default=10.0, help="seconds of successes before the onset")
    p.add_argument("--incident", type=float, default=30.0, help="seconds C fails, counted from the onset")
    p.add_argument("--coalesce", type=float, default=coalesce,
                   help=f"the worker's coolant.recool_coalesce (X8), seconds; 0 for off (default {coalesce:g})")
    return p


def parsed(p: argparse.ArgumentParser) -> argparse.Namespace:
    a = p.parse_args()
    if a.coalesce <= 0:
        a.coalesce = None
    return a


def main() -> None:
    asyncio.run(main_async(parsed(incident_args(__doc__, 1.0))))


if __name__ == "__main__":
    main()
