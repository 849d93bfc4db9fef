"""The onset benchmark of issue 17 over real proxy processes: 3 `litellm --config` proxies per side, the `openai` SDK.

    scripts/kafka-local start && scripts/redis-local start
    .venv/bin/python bench/onset_proxies.py [--onsets 1,15,30,45,59] [--repeat 2] [--rate 30] [--coolant fast]
        [--num-retries N] [--settle SECONDS] [--json FILE] [--profile outlier]

`bench/onset_compare.py` runs the same incident on three Routers in one process; here each pod is its own
`litellm --config` process (LiteLLM 1.110.2, as a deployment runs it), driven by the `openai` SDK
(`AsyncOpenAI`, `max_retries=0`) at --rate requests/s round-robin over the three proxies of a side. Both sides'
routers run with LiteLLM's default retries (`num_retries` unset), or --num-retries N (0: every failed upstream
call is an error a user sees). Upstream: the tests' fake OpenAI server (`tests/support/upstream.py`). After
--warmup seconds of successes, deployment C answers 500 from a chosen second of the wall-clock minute (the onset)
for --incident seconds. Both sides run side by side on the same upstream switch, each run with its own
deployments A, B, C:

  litellm   3 proxies with LiteLLM's defaults (V2 per process, 5 s cooldowns shared through one Redis)
  coolant   3 proxies with `disable_cooldowns: true` and `coolant_callback`, each publishing as its own gateway
            (`COOLANT_GATEWAY_ID` pod-0..2) with `COOLANT_REDIS_URL` (the push); one `coolant worker`.
            --coolant fast (default): `COOLANT_CONFIG` too, so the pods' fast path decides, including PF (the
            pod's own D7 counters, docs/windows.md §6); --coolant push: no config, the worker decides alone.
            --profile outlier: the worker's config turns the outlier profile on (docs/outlier.md), and one
            `coolant probe` probes cooled deployments every second (recovery that probes).

Prints per onset the failed requests of each side (per run; --json FILE writes, per onset, `onset`, the mean
failed requests of `litellm` and of `coolant` over the runs, the `runs`, and the `load` average after them);
coolant's cooldown records per incident of C
(`onset_compare.incidents`: a record at or after the current end opens a new incident, so a re-cool after an
expiry is a new one); and where coolant's failed requests come from (`sources`: C's failed attempts, by when the
proxy started them against the worker's cooldown spans: the crossing, re-cools after an expiry, in flight,
while cooled); and each side's failed requests by the error the client got (C's 500s, or the client's
timeouts and connection errors of an overloaded machine). --coalesce sets the worker's X8 `recool_coalesce`;
with --coolant fast the pods then hold PF7's part of each cooldown (S shorter, docs/windows.md §6). --dump DIR
keeps the raw data (requests, outcome and cooldown records); --report DIR prints the report again from it. A
bench, not a test: it takes about a minute per onset and run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
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
    paced,
    parsed,
    run_ids,
    schedule,
    switch_of,
    switch_on,
)
from prober_process import start_prober  # noqa: E402
from support_litellm import MESSAGES, Proxy, deployment  # noqa: E402

from tests.support.kafka import create_topics, delete_topics, read_topic, wait_caught_up  # noqa: E402
from tests.support.redis import delete_redis_keys  # noqa: E402
from tests.support.upstream import FakeOpenAI  # noqa: E402
from tests.support.worker import Worker  # noqa: E402


def proxy_config(path: Path, models: list[dict[str, Any]], mode: str, namespace: str,
                 num_retries: int | None, **settings: Any) -> Path:
    """A side's proxy config: its routers share one Redis under `namespace`; `settings` are more
    `router_settings`; the coolant side's routers never cool (`disable_cooldowns`) and run the callback."""
    u = urlparse(REDIS_URL)
    router: dict[str, Any] = {"redis_host": u.hostname or "127.0.0.1", "redis_port": u.port or 6379,
                              "cache_kwargs": {"namespace": namespace}, **settings}
    if num_retries is not None:
        router["num_retries"] = num_retries
    cfg: dict[str, Any] = {"model_list": models, "router_settings": router}
    if mode == "coolant":
        router["disable_cooldowns"] = True
        cfg["litellm_settings"] = {"callbacks": ["coolant.integrations.litellm.coolant_callback"]}
    path.write_text(yaml.safe_dump(cfg))
    return path


def pod_env(mode: str, i: int, prefix: str, namespace: str, worker_config: Path | None) -> dict[str, str]:
    """Pod i's environment: none on the litellm side; the callback's settings on the coolant side, each pod its
    own gateway, and with `worker_config` the fast path (the pod reads the worker's config)."""
    if mode != "coolant":
        return {}
    env = {"COOLANT_KAFKA_BOOTSTRAP": BOOTSTRAP, "COOLANT_TOPIC_PREFIX": prefix, "COOLANT_REDIS_URL": REDIS_URL,
           "COOLANT_REDIS_KEY_PREFIX": f"{namespace}:", "COOLANT_GATEWAY_ID": f"pod-{i}"}
    if worker_config is not None:
        env["COOLANT_CONFIG"] = str(worker_config)
    return env


async def run(fake: FakeOpenAI, proxies: list[Proxy], group: str, start_at: float, a: argparse.Namespace,
              log: list[dict[str, Any]]) -> tuple[int, int]:
    """Warm up from `start_at` (wall clock), then the incident; (failed requests after the onset, requests).
    Each request's group, proxy, send and answer times and outcome are appended to `log`."""
    failed = 0
    onset = start_at + a.warmup

    async def one(i: int) -> None:
        nonlocal failed
        proxy, sent, error = proxies[i % PODS], time.time(), None
        try:
            await proxy.client.chat.completions.create(model=group, messages=MESSAGES)
        except openai.APIError as exc:
            error = type(exc).__name__
            if time.time() >= onset:
                failed += 1
        log.append({"group": group, "pod": i % PODS, "sent": sent, "done": time.time(), "ok": error is None,
                    "error": error})

    await asyncio.sleep(max(0.0, start_at - time.time()))
    total = await paced(one, a.rate, onset + a.incident)
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
    coolant_cfg: dict[str, Any] = {} if a.profile == "compatible" else {"profile": a.profile}
    if a.coalesce is not None:
        coolant_cfg["recool_coalesce"] = a.coalesce
    if coolant_cfg:
        worker_cfg["coolant"] = coolant_cfg
    worker_config.write_text(yaml.safe_dump(worker_cfg))
    await create_topics(BOOTSTRAP, prefix, 2)
    worker = Worker(name="onset", config=worker_config, bootstrap=BOOTSTRAP, topic_prefix=prefix,
                    app_id=f"{tag}-app", workdir=workdir, redis_url=REDIS_URL, redis_key_prefix=f"{namespace}:",
                    partitions=2)
    worker.start()
    prober = None
    if a.profile == "outlier":  # recovery that probes (RC1-RC5): one prober with its cooled cadence
        prober = start_prober(worker_config, BOOTSTRAP, REDIS_URL, f"{namespace}:", prefix, f"{tag}-probers",
                              workdir / "prober.log")
    sides: dict[str, list[Proxy]] = {m: [] for m in MODES}
    for mode in MODES:
        config = proxy_config(workdir / f"proxy-{mode}.yaml", models[mode], mode, namespace, a.num_retries)
        for i in range(PODS):
            env = pod_env(mode, i, prefix, namespace, worker_config if a.coolant == "fast" else None)
            sides[mode].append(Proxy(f"{mode}-{i}", config, env, workdir))
    results: dict[tuple[int, str], list[int]] = {}
    loads: dict[int, tuple[float, float, float]] = {}
    requests: list[dict[str, Any]] = []
    try:
        await worker.wait_ready()
        for mode, proxies in sides.items():
            for p in proxies:
                await p.wait_ready()
                for _ in range(3):
                    await p.client.chat.completions.create(model=f"{tag}-{mode}-warmup", messages=MESSAGES)
        if a.settle > 0:
            settled = await settle(sides, tag, a)
            print(f"settled: {settled[0]} of {settled[1]} warm-up requests failed in {a.settle:g} s", flush=True)
        retries = "unset" if a.num_retries is None else a.num_retries
        print(f"worker and {2 * PODS} proxies ready (num_retries {retries}) after {time.monotonic() - t_start:.0f} s; "
              f"{a.rate:g} requests/s "
              f"over {PODS} proxies per side; C fails from the onset for {a.incident:g} s after {a.warmup:g} s of "
              f"warm-up; coolant pods: {a.coolant}; worker profile {a.profile}, recool_coalesce {a.coalesce}; logs in "
              f"{workdir}",
              flush=True)
        for onset, rep, start_at in schedule(onsets, a.repeat, a.warmup, lead=1.0):
            switched = asyncio.ensure_future(switch_on(fake, switch_of(tag, onset, rep), start_at + a.warmup))
            runs = await asyncio.gather(*(
                run(fake, sides[mode], run_ids(tag, onset, rep, mode)[0], start_at, a, requests) for mode in MODES))
            await switched
            fake.failing.pop(switch_of(tag, onset, rep), None)  # C heals when its incident's traffic ends
            for mode, (failed, _) in zip(MODES, runs, strict=True):
                results.setdefault((onset, mode), []).append(failed)
            loads[onset] = os.getloadavg()
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
        outcomes = [orjson.loads(m.value) for m in await read_topic(BOOTSTRAP, prefix + "outcomes")]
        report(a, tag, onsets, results, cooldowns, requests, outcomes)
        if a.json:
            write_json(Path(a.json), onsets, results, loads)
        if a.dump:
            dump(Path(a.dump), tag, onsets, a, results, requests, cooldowns, outcomes)
    finally:
        if prober is not None:
            prober.terminate()
            prober.wait(30)
        await stop_all(sides, worker, fake, tag)
    print(f"total {time.monotonic() - t_start:.0f} s")


async def settle(sides: dict[str, list[Proxy]], tag: str, a: argparse.Namespace) -> tuple[int, int]:
    """--settle: both sides' traffic at --rate on their warm-up group before the first run (failed, sent). A
    proxy's first minute is slow on a loaded machine: without this, the first run's requests time out on both
    sides, whatever the incident."""
    failed = 0

    async def one(i: int) -> None:
        nonlocal failed
        mode = MODES[i % len(MODES)]
        try:
            await sides[mode][i // len(MODES) % PODS].client.chat.completions.create(
                model=f"{tag}-{mode}-warmup", messages=MESSAGES)
        except openai.APIError:
            failed += 1

    sent = await paced(one, len(MODES) * a.rate, time.time() + a.settle)
    return failed, sent


async def stop_all(sides: dict[str, list[Proxy]], worker: Worker, fake: FakeOpenAI, tag: str) -> None:
    """Stop a run's proxies, worker and upstream; delete its topics (`<tag>.`, the worker's app) and Redis keys."""
    for proxies in sides.values():
        for p in proxies:
            await p.stop()
    worker.stop()
    fake.stop()
    await delete_topics(BOOTSTRAP, [f"{tag}.", f"{tag}-app"])
    await delete_redis_keys(REDIS_URL, f"{tag}:")


def write_json(path: Path, onsets: list[int], results: dict[tuple[int, str], list[int]],
               loads: dict[int, tuple[float, float, float]]) -> None:
    """--json: per onset, the mean failed requests of each side over its runs, and the load after them."""
    rows = [{"onset": onset, "litellm": statistics.mean(results[(onset, "litellm")]),
             "coolant": statistics.mean(results[(onset, "coolant")]), "runs": len(results[(onset, "coolant")]),
             "load": list(loads.get(onset, ()))} for onset in onsets]
    path.write_text(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode() + "\n")


SOURCES = ("crossing", "crossing in flight", "re-cool", "re-cool in flight", "while cooled")
"""Where coolant's failed requests come from (`sources`), in the order the report prints them."""


def spans(cooldowns: list[dict[str, Any]]) -> list[tuple[float, float, int]]:
    """The cooldown spans of one deployment's records: (opened, end, records); a record at or after the current
    end opens a new span, as `onset_compare.incidents` counts incidents."""
    out: list[tuple[float, float, int]] = []
    for cd in sorted(cooldowns, key=lambda c: c["ts"]):
        if out and cd["ts"] < out[-1][1]:
            opened, end, n = out[-1]
            out[-1] = (opened, max(end, cd["until"]), n + 1)
        else:
            out.append((cd["ts"], cd["until"], 1))
    return out


def sources(outcomes: list[dict[str, Any]], cooldowns: list[dict[str, Any]], onset: float) -> Counter[str]:
    """C's failed attempts after the onset (retries included), by when the proxy started
    the attempt (`ts - latency_ms`, just after routing it) against the worker's cooldown spans: before the first
    span opened (`crossing`: the rate had not crossed yet); after a span ended, before the next opened
    (`re-cool`: the first failures after an expiry, which re-cool); inside a span (`while cooled`: the pod had
    not applied the cooldown yet). `in flight`: started before the span that was open when it failed."""
    out: Counter[str] = Counter()
    opened = [(o, e) for o, e, _ in spans(cooldowns)]
    for r in outcomes:
        ts = r["ts"]
        if r["ok"] or ts < onset:
            continue
        began = ts - (r.get("latency_ms") or 0) / 1000
        before = [(o, e) for o, e in opened if o <= began]
        if before and began < before[-1][1]:
            out["while cooled"] += 1
            continue
        kind = "re-cool" if before else "crossing"
        nxt = next((o for o, _ in opened if o > began), None)
        out[kind + (" in flight" if nxt is not None and ts > nxt else "")] += 1
    return out


def report(a: argparse.Namespace, tag: str, onsets: list[int], results: dict[tuple[int, str], list[int]],
           cooldowns: list[dict[str, Any]], requests: list[dict[str, Any]], outcomes: list[dict[str, Any]]) -> None:
    print(f"\nfailed requests after the onset (per run), and the worker's cooldown records per incident of C "
          f"(coolant pods: {a.coolant}; recool_coalesce {a.coalesce})")
    print(f"  {'onset':>5} | {'litellm':>10} | {'coolant':>10} | {'ratio':>5} | records/incident | coolant's failures: "
          + ", ".join(SOURCES))
    lit_all: list[int] = []
    coo_all: list[int] = []
    met = 0
    per_incident: list[int] = []
    total: Counter[str] = Counter()
    for onset in onsets:
        lit, coo = results[(onset, "litellm")], results[(onset, "coolant")]
        lit_all += lit
        coo_all += coo
        met += sum(coo) <= sum(lit)
        mine: list[int] = []
        where: Counter[str] = Counter()
        for rep in range(a.repeat):
            group, deps = run_ids(tag, onset, rep, "coolant")
            of_c = [cd for cd in cooldowns if cd["deployment_id"] == deps[2]]
            mine += incidents(of_c)
            sent = [r["sent"] for r in requests if r["group"] == group]
            if sent:
                where += sources([o for o in outcomes if o["deployment_id"] == deps[2]], of_c, min(sent) + a.warmup)
        per_incident += mine
        total += where
        shown = f"max {max(mine)}, mean {statistics.mean(mine):.1f} ({len(mine)})" if mine else "-"
        print(f"  {f':{onset:02d}':>5} | {' '.join(map(str, lit)):>10} | {' '.join(map(str, coo)):>10} | "
              f"{sum(coo) / max(1, sum(lit)):>5.2f} | {shown:>16} | " + ", ".join(str(where[k]) for k in SOURCES))
    print(f"  mean: litellm {statistics.mean(lit_all):.1f}, coolant {statistics.mean(coo_all):.1f} (coolant/litellm "
          f"{statistics.mean(coo_all) / max(1e-9, statistics.mean(lit_all)):.2f}); onsets where coolant <= litellm: "
          f"{met} of {len(onsets)}; runs where coolant <= litellm: "
          f"{sum(c <= li for c, li in zip(coo_all, lit_all, strict=True))} of {len(coo_all)}; records per incident: "
          f"max {max(per_incident, default=0)}, mean {statistics.mean(per_incident) if per_incident else 0:.1f} "
          f"({len(per_incident)} incidents)")
    print("  coolant's failures, all runs: " + ", ".join(f"{k} {total[k]}" for k in SOURCES))
    for mode in MODES:
        print(f"  {mode}'s failed requests by the client's error, all runs: {errors(a, tag, onsets, mode, requests)}")


def errors(a: argparse.Namespace, tag: str, onsets: list[int], mode: str, requests: list[dict[str, Any]]) -> str:
    """A side's failed requests after the onsets by the `openai` error the client got: C's 500s are
    `InternalServerError`; `APITimeoutError` (the client's 30 s) and `APIConnectionError` are the machine's
    overload, which both sides pay and no cooldown avoids."""
    seen: Counter[str] = Counter()
    for onset in onsets:
        for rep in range(a.repeat):
            group = run_ids(tag, onset, rep, mode)[0]
            mine = [r for r in requests if r["group"] == group]
            if mine:
                at = min(r["sent"] for r in mine) + a.warmup
                seen.update(r.get("error") or "unrecorded" for r in mine if not r["ok"] and r["done"] >= at)
    return ", ".join(f"{k} {n}" for k, n in seen.most_common()) or "none"


def dump(where: Path, tag: str, onsets: list[int], a: argparse.Namespace, results: dict[tuple[int, str], list[int]],
         requests: list[dict[str, Any]], cooldowns: list[dict[str, Any]], outcomes: list[dict[str, Any]]) -> None:
    """--dump: the run's raw data as JSON lines (`--report DIR` prints the report again from them; the outcome
    records can be replayed with other options, e.g. through `coolant replay`)."""
    where.mkdir(parents=True, exist_ok=True)
    run = {"tag": tag, "onsets": onsets, "repeat": a.repeat, "warmup": a.warmup, "coolant": a.coolant,
           "coalesce": a.coalesce, "load": os.getloadavg(),
           "results": [[onset, mode, failed] for (onset, mode), failed in results.items()]}
    for name, rows in (("run", [run]), ("requests", requests), ("cooldowns", cooldowns), ("outcomes", outcomes)):
        (where / f"{name}.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    print(f"raw data in {where}")


def report_again(where: Path) -> None:
    """--report: the report of a --dump directory."""
    def rows(name: str) -> list[dict[str, Any]]:
        return [orjson.loads(line) for line in (where / f"{name}.jsonl").read_bytes().splitlines()]

    run = rows("run")[0]
    a = argparse.Namespace(repeat=run["repeat"], warmup=run["warmup"], coolant=run["coolant"],
                           coalesce=run["coalesce"])
    results = {(onset, mode): failed for onset, mode, failed in run["results"]}
    report(a, run["tag"], run["onsets"], results, rows("cooldowns"), rows("requests"), rows("outcomes"))


def main() -> None:
    p = incident_args(__doc__, 0.0)
    p.add_argument("--profile", choices=("compatible", "outlier"), default="compatible",
                   help="the worker's (and fast path's) coolant.profile; outlier also starts one `coolant probe` with "
                        "--cooled-interval 1 (recovery that probes, docs/outlier.md)")
    p.add_argument("--coolant", choices=("fast", "push"), default="fast",
                   help="fast: the pods read the worker's config (fast path, PF, PF7 under X8); push: the worker "
                        "decides alone")
    p.add_argument("--dump", metavar="DIR", help="also write the requests, outcome and cooldown records there "
                                                 "(JSON lines)")
    p.add_argument("--report", metavar="DIR", help="print the report of a --dump directory again, run nothing")
    p.add_argument("--num-retries", type=int, default=None, metavar="N",
                   help="router_settings.num_retries on both sides (default: unset, LiteLLM's default)")
    p.add_argument("--settle", type=float, default=20.0, metavar="SECONDS",
                   help="before the first run, send --rate requests/s per side to a warm-up group for this long "
                        "(a proxy's first minute is slow on a loaded machine; 0: off)")
    p.add_argument("--json", metavar="FILE", help="write per onset {onset, litellm, coolant, runs, load} there "
                                                  "(mean failed requests over the runs)")
    a = parsed(p)
    if a.report:
        report_again(Path(a.report))
        return
    asyncio.run(main_async(a))


if __name__ == "__main__":
    main()
