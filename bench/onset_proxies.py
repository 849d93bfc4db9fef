"""The onset benchmark of issue 17 over real proxy processes: 3 `litellm --config` proxies per side, the `openai` SDK.

    scripts/kafka-local start && scripts/redis-local start
    .venv/bin/python bench/onset_proxies.py [--onsets 1,15,30,45,59] [--repeat 2] [--rate 30] [--coolant fast]

`bench/onset_compare.py` runs the same incident on three Routers in one process; here each pod is its own
`litellm --config` process (LiteLLM 1.110.2, as a deployment runs it), driven by the `openai` SDK
(`AsyncOpenAI`, `max_retries=0`) at --rate requests/s round-robin over the three proxies of a side, so every
failed upstream call is an error a user sees (router `num_retries: 0`). Upstream: the fake OpenAI server of the
LiteLLM tests (`tests/litellm/support_litellm.FakeOpenAI`). After --warmup seconds of successes, deployment C
answers 500 from a chosen second of the wall-clock minute (the onset) for --incident seconds. Both sides run side
by side on the same upstream switch, each run with its own deployments A, B, C:

  litellm   3 proxies with LiteLLM's defaults (V2 per process, 5 s cooldowns shared through one Redis)
  coolant   3 proxies with `disable_cooldowns: true` and `coolant_callback`, each publishing as its own gateway
            (`COOLANT_GATEWAY_ID` pod-0..2) with `COOLANT_REDIS_URL` (the push); one `coolant worker`.
            --coolant fast (default): `COOLANT_CONFIG` too, so the pods' fast path decides, including PF (the
            pod's own D7 counters, docs/windows.md §6); --coolant push: no config, the worker decides alone.

Prints per onset the failed requests of each side (per run), and coolant's cooldown records per incident of C
(`onset_compare.incidents`). --coalesce sets the worker's X8 `recool_coalesce` (it switches the pods' fast path
off, docs/windows.md §6). A bench, not a test: it takes about a minute per onset and run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import orjson
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "litellm"))
sys.path.insert(0, str(ROOT / "bench"))

import openai  # noqa: E402
from onset_compare import (  # noqa: E402
    BOOTSTRAP,
    MODES,
    PODS,
    REDIS_URL,
    incident_args,
    incidents,
    model_list,
    next_start,
    paced,
    parsed,
    run_ids,
    switch_of,
)
from support_litellm import MESSAGES, FakeOpenAI, deployment  # noqa: E402

from tests.integration.harness import (  # noqa: E402
    Worker,
    create_topics,
    delete_redis_keys,
    delete_topics,
    free_port,
    read_topic,
    wait_caught_up,
)


class Proxy:
    """One `litellm --config` process on its own port, logging to a file."""

    def __init__(self, name: str, config: Path, env: dict[str, str], workdir: Path) -> None:
        self.name, self.port = name, free_port()
        self.key = f"sk-{uuid.uuid4().hex}"
        self.log = (workdir / f"{name}.log").open("wb")
        full = {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                "LITELLM_EVENT_LOOP": "asyncio", "LITELLM_MASTER_KEY": self.key, **env}
        self.proc = subprocess.Popen([str(Path(sys.executable).parent / "litellm"), "--config", str(config),
                                      "--host", "127.0.0.1", "--port", str(self.port)], env=full, stdout=self.log,
                                     stderr=subprocess.STDOUT, cwd=workdir)
        self.client = openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{self.port}/v1", api_key=self.key,
                                         max_retries=0, timeout=30)

    async def wait_ready(self, timeout: float = 300.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"proxy {self.name} exited (log: {self.log.name})")
            with contextlib.suppress(openai.APIConnectionError, openai.APITimeoutError):
                await self.client.models.list()
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"proxy {self.name} did not start in {timeout:g} s (log: {self.log.name})")
            await asyncio.sleep(0.5)

    async def stop(self) -> None:
        await self.client.close()
        self.proc.terminate()
        try:
            await asyncio.to_thread(self.proc.wait, 20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def proxy_config(path: Path, models: list[dict[str, Any]], mode: str, namespace: str) -> Path:
    u = urlparse(REDIS_URL)
    router: dict[str, Any] = {"redis_host": u.hostname or "127.0.0.1", "redis_port": u.port or 6379,
                              "num_retries": 0, "cache_kwargs": {"namespace": namespace}}
    cfg: dict[str, Any] = {"model_list": models, "router_settings": router}
    if mode == "coolant":
        router["disable_cooldowns"] = True
        cfg["litellm_settings"] = {"callbacks": ["coolant.integrations.litellm.coolant_callback"]}
    path.write_text(yaml.safe_dump(cfg))
    return path


async def run(fake: FakeOpenAI, proxies: list[Proxy], group: str, start_at: float, a: argparse.Namespace
              ) -> tuple[int, int]:
    """Warm up from `start_at` (wall clock), then the incident; (failed requests after the onset, requests)."""
    failed = 0
    onset = start_at + a.warmup

    async def one(proxy: Proxy) -> None:
        nonlocal failed
        try:
            await proxy.client.chat.completions.create(model=group, messages=MESSAGES)
        except openai.APIError:
            if time.time() >= onset:
                failed += 1

    await asyncio.sleep(max(0.0, start_at - time.time()))
    total = await paced(lambda i: one(proxies[i % PODS]), a.rate, onset + a.incident)
    return failed, total


async def main_async(a: argparse.Namespace) -> None:
    t_start = time.monotonic()
    onsets = [int(s) for s in a.onsets.split(",")]
    tag = f"op{uuid.uuid4().hex[:6]}"
    prefix, namespace = f"{tag}.", tag
    workdir = Path(tempfile.mkdtemp(prefix="coolant-onset-proxies-"))
    fake = FakeOpenAI().start()
    models: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
    for onset in onsets:
        for rep in range(a.repeat):
            for mode in MODES:
                group, deps = run_ids(tag, onset, rep, mode)
                models[mode] += model_list(fake, group, deps, switch_of(tag, onset, rep))
    for mode in MODES:  # a group each side's proxies are warmed up on (the first call of a proxy is slow)
        models[mode].append(deployment(f"{tag}-{mode}-warmup", f"{tag}-{mode}-warmup", fake.base("ok")))
    worker_config = workdir / "worker.yaml"
    worker_cfg: dict[str, Any] = {"model_list": models["coolant"]}
    if a.coalesce is not None:
        worker_cfg["coolant"] = {"recool_coalesce": a.coalesce}
    worker_config.write_text(yaml.safe_dump(worker_cfg))
    await create_topics(BOOTSTRAP, prefix, 2)
    worker = Worker(name="onset", config=worker_config, bootstrap=BOOTSTRAP, topic_prefix=prefix,
                    app_id=f"{tag}-app", workdir=workdir, redis_url=REDIS_URL, redis_key_prefix=f"{namespace}:",
                    partitions=2)
    worker.start()
    sides: dict[str, list[Proxy]] = {m: [] for m in MODES}
    for mode in MODES:
        config = proxy_config(workdir / f"proxy-{mode}.yaml", models[mode], mode, namespace)
        for i in range(PODS):
            env = {}
            if mode == "coolant":
                env = {"COOLANT_KAFKA_BOOTSTRAP": BOOTSTRAP, "COOLANT_TOPIC_PREFIX": prefix,
                       "COOLANT_REDIS_URL": REDIS_URL, "COOLANT_REDIS_KEY_PREFIX": f"{namespace}:",
                       "COOLANT_GATEWAY_ID": f"pod-{i}"}
                if a.coolant == "fast":
                    env["COOLANT_CONFIG"] = str(worker_config)
            sides[mode].append(Proxy(f"{mode}-{i}", config, env, workdir))
    results: dict[tuple[int, str], list[int]] = {}
    try:
        await worker.wait_ready()
        for mode, proxies in sides.items():
            for p in proxies:
                await p.wait_ready()
                for _ in range(3):
                    await p.client.chat.completions.create(model=f"{tag}-{mode}-warmup", messages=MESSAGES)
        print(f"worker and {2 * PODS} proxies ready after {time.monotonic() - t_start:.0f} s; {a.rate:g} requests/s "
              f"over {PODS} proxies per side; C fails from the onset for {a.incident:g} s after {a.warmup:g} s of "
              f"warm-up; coolant pods: {a.coolant}; worker recool_coalesce {a.coalesce}; logs in {workdir}",
              flush=True)
        todo = [(onset, rep) for rep in range(a.repeat) for onset in onsets]
        while todo:
            now = time.time() + 1.0
            onset, rep = min(todo, key=lambda t: next_start(t[0], a.warmup, now))
            todo.remove((onset, rep))
            start_at = next_start(onset, a.warmup, now)
            switch = switch_of(tag, onset, rep)

            async def incident(start_at: float = start_at, switch: str = switch) -> None:
                await asyncio.sleep(max(0.0, start_at + a.warmup - time.time()))
                fake.failing.add(switch)

            switched = asyncio.ensure_future(incident())
            runs = await asyncio.gather(*(
                run(fake, sides[mode], run_ids(tag, onset, rep, mode)[0], start_at, a) for mode in MODES))
            await switched
            for mode, (failed, _) in zip(MODES, runs, strict=True):
                results.setdefault((onset, mode), []).append(failed)
            print(f"  onset :{onset:02d} run {rep + 1}: " + ", ".join(
                f"{m} {f} failed of {n}" for m, (f, n) in zip(MODES, runs, strict=True)), flush=True)
        await asyncio.sleep(3.0)  # the last records reach the worker, then it works through them
        t_wait = time.monotonic()
        try:
            await wait_caught_up(BOOTSTRAP, f"{tag}-app", prefix + "outcomes", timeout=600)
            print(f"worker caught up {time.monotonic() - t_wait:.0f} s after the last run")
        except Exception as exc:  # report what there is
            print(f"worker not caught up ({exc}); records per incident are incomplete")
        cooldowns = [orjson.loads(m.value) for m in await read_topic(BOOTSTRAP, prefix + "cooldowns")]
        report(a, tag, onsets, results, cooldowns)
    finally:
        for proxies in sides.values():
            for p in proxies:
                await p.stop()
        worker.stop()
        fake.stop()
        await delete_topics(BOOTSTRAP, [prefix, f"{tag}-app"])
        await delete_redis_keys(REDIS_URL, f"{namespace}:")
    print(f"total {time.monotonic() - t_start:.0f} s")


def report(a: argparse.Namespace, tag: str, onsets: list[int], results: dict[tuple[int, str], list[int]],
           cooldowns: list[dict[str, Any]]) -> None:
    print(f"\nfailed requests after the onset (per run), and the worker's cooldown records per incident of C "
          f"(coolant pods: {a.coolant}; recool_coalesce {a.coalesce})")
    print(f"  {'onset':>5} | {'litellm':>10} | {'coolant':>10} | {'ratio':>5} | records/incident")
    lit_all: list[int] = []
    coo_all: list[int] = []
    met = 0
    per_incident: list[int] = []
    for onset in onsets:
        lit, coo = results[(onset, "litellm")], results[(onset, "coolant")]
        lit_all += lit
        coo_all += coo
        met += sum(coo) <= sum(lit)
        mine: list[int] = []
        for rep in range(a.repeat):
            c = run_ids(tag, onset, rep, "coolant")[1][2]
            mine += incidents([cd for cd in cooldowns if cd["deployment_id"] == c])
        per_incident += mine
        shown = f"max {max(mine)}, mean {statistics.mean(mine):.1f} ({len(mine)})" if mine else "-"
        print(f"  {f':{onset:02d}':>5} | {' '.join(map(str, lit)):>10} | {' '.join(map(str, coo)):>10} | "
              f"{sum(coo) / max(1, sum(lit)):>5.2f} | {shown}")
    print(f"  mean: litellm {statistics.mean(lit_all):.1f}, coolant {statistics.mean(coo_all):.1f} (coolant/litellm "
          f"{statistics.mean(coo_all) / max(1e-9, statistics.mean(lit_all)):.2f}); onsets where coolant <= litellm: "
          f"{met} of {len(onsets)}; records per incident: max {max(per_incident, default=0)}, mean "
          f"{statistics.mean(per_incident) if per_incident else 0:.1f} ({len(per_incident)} incidents)")


def main() -> None:
    p = incident_args(__doc__, 0.0)
    p.add_argument("--coolant", choices=("fast", "push"), default="fast",
                   help="fast: the pods read the worker's config (fast path, PF); push: the worker decides alone")
    asyncio.run(main_async(parsed(p)))


if __name__ == "__main__":
    main()
