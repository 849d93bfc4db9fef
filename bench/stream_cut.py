"""Streams that die mid-answer (issue 24): LiteLLM alone against coolant, 3 real proxies per side.

    scripts/kafka-local start && scripts/redis-local start
    .venv/bin/python bench/stream_cut.py [--json FILE] [--kinds cut,error,truncated] [--profile outlier]
                                         [--dump DIR]

Per side, 3 `litellm --config` processes (LiteLLM 1.110.2, `num_retries: 0`, so every failed upstream call is
an error a user sees) serve a group of three deployments A, B, C on a fake upstream (`tests/support/upstream.py`),
called with the `openai` SDK and `stream=True` at --rate requests/s round-robin over the side's proxies. After
--warmup seconds, C's streams fail after a few chunks for --duration seconds, one kind at a time, each on its own
deployments:

  cut        the connection closes without a final chunk or [DONE]
  error      an error event, then the end of the stream
  truncated  [DONE] with no chunk carrying a finish_reason

A request failed when the SDK raised or the stream ended without a finish_reason. Sides: `litellm` (LiteLLM's
defaults, cooldowns shared through Redis) and `coolant` (`disable_cooldowns`, `coolant_callback` with the fast
path and the push, one `coolant worker` with --profile, and under `outlier` one `coolant probe` with its cooled
cadence). Prints per kind the failed requests after the onset on each side, coolant's cooldown records, and where
coolant's failed attempts on C come from, by when the proxy started them against the cooldown spans (as
`bench/onset_proxies.py` counts them: before the first cooldown, in flight when it came, after a span ended, or
while cooled but before the pod knew), and any failed request C did not serve. Writes `--json FILE`: a list of
`{kind, litellm, coolant}` (failed requests) with `requests`, `cooldowns`, `sources`, `elsewhere` and `load`.
Goal under the profile: coolant <= 0.1 x LiteLLM alone for each kind.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "tests" / "litellm"), str(ROOT)]

import openai  # noqa: E402
from bench_args import parser, run_bench  # noqa: E402
from onset_compare import BOOTSTRAP, PODS, REDIS_URL, paced  # noqa: E402
from onset_proxies import SOURCES, proxy_config, sources  # noqa: E402
from prober_process import start_prober  # noqa: E402
from support_litellm import Proxy  # noqa: E402

from tests.support.kafka import create_topics, delete_topics, read_json  # noqa: E402
from tests.support.redis import delete_redis_keys  # noqa: E402
from tests.support.upstream import STREAM_KINDS, FakeOpenAI  # noqa: E402
from tests.support.worker import Worker  # noqa: E402

SIDES = ("litellm", "coolant")
MESSAGES = [{"role": "user", "content": "hi"}]


def deps(tag: str, kind: str, side: str) -> tuple[str, list[str]]:
    group = f"{tag}-{kind}-{side}"
    return group, [f"{group}-A", f"{group}-B", f"{group}-C"]


def model_list(up: FakeOpenAI, tag: str, kinds: list[str], side: str) -> list[dict[str, Any]]:
    out = []
    for kind in kinds:
        group, names = deps(tag, kind, side)
        out += [{"model_name": group, "litellm_params": {"model": "openai/gpt-4o-mini", "api_key": "sk-x",
                                                         "api_base": up.base(n)}, "model_info": {"id": n}}
                for n in names]
    warm = f"{tag}-{side}-warmup"
    out.append({"model_name": warm, "litellm_params": {"model": "openai/gpt-4o-mini", "api_key": "sk-x",
                                                       "api_base": up.base(warm)}, "model_info": {"id": warm}})
    return out


@dataclasses.dataclass(frozen=True, slots=True)
class Streamed:
    """One streamed request as its caller saw it."""

    ok: bool
    """A chunk carried a finish_reason and no error came."""
    served: str | None
    """The deployment whose chunks arrived (the fake upstream's text is its name), if any did."""
    error: str | None
    """The SDK's exception, `type: message` (cut), or None."""


async def stream_once(client: openai.AsyncOpenAI, group: str) -> Streamed:
    """One streamed request, read to its end."""
    finished = False
    served = None
    try:
        stream = await client.chat.completions.create(model=group, messages=MESSAGES, stream=True)
        async for chunk in stream:
            for c in chunk.choices:
                finished = finished or bool(c.finish_reason)
                served = served or c.delta.content or None
        return Streamed(finished, served, None)
    except Exception as e:  # the SDK's error for an error event, a broken connection, a 5xx
        return Streamed(False, served, f"{type(e).__name__}: {e}"[:300])


async def run_kind(kind: str, tag: str, up: FakeOpenAI, sides: dict[str, list[Proxy]], a: argparse.Namespace,
                   log: list[dict[str, Any]]) -> tuple[float, dict[str, tuple[int, int]]]:
    """Both sides at once on `kind`: the onset, and (failed requests after it, requests after it) per side."""
    start = time.time() + 1.0
    onset = start + a.warmup
    end = onset + a.duration
    counts = {side: [0, 0] for side in sides}

    async def switch() -> None:
        await asyncio.sleep(max(0.0, onset - time.time()))
        for side in sides:
            up.failing[deps(tag, kind, side)[1][2]] = kind
        await asyncio.sleep(max(0.0, end - time.time()))
        for side in sides:
            up.failing.pop(deps(tag, kind, side)[1][2], None)

    def one(side: str) -> Any:
        group = deps(tag, kind, side)[0]

        async def call(i: int) -> None:
            sent = time.time()
            got = await stream_once(sides[side][i % PODS].client, group)
            if sent >= onset:
                counts[side][1] += 1
                counts[side][0] += not got.ok
            log.append({"kind": kind, "side": side, "pod": i % PODS, "sent": sent, "done": time.time(),
                        **dataclasses.asdict(got)})

        return call

    await asyncio.sleep(max(0.0, start - time.time()))
    await asyncio.gather(switch(), *(paced(one(side), a.rate, end) for side in sides))
    return onset, {side: (c[0], c[1]) for side, c in counts.items()}


async def main_async(a: argparse.Namespace) -> list[dict[str, Any]]:
    t_start = time.monotonic()
    kinds = a.kinds.split(",")
    tag = f"sc{uuid.uuid4().hex[:6]}"
    prefix, namespace = f"{tag}.", tag
    workdir = Path(tempfile.mkdtemp(prefix="coolant-stream-cut-"))
    up = FakeOpenAI().start()
    models = {side: model_list(up, tag, kinds, side) for side in SIDES}
    worker_config = workdir / "worker.yaml"
    worker_cfg: dict[str, Any] = {"model_list": models["coolant"]}
    if a.profile != "compatible":
        worker_cfg["coolant"] = {"profile": a.profile}
    worker_config.write_text(yaml.safe_dump(worker_cfg))
    await create_topics(BOOTSTRAP, prefix, 2)
    worker = Worker(name="stream", config=worker_config, bootstrap=BOOTSTRAP, topic_prefix=prefix,
                    app_id=f"{tag}-app", workdir=workdir, redis_url=REDIS_URL, redis_key_prefix=f"{namespace}:",
                    partitions=2)
    worker.start()
    prober: subprocess.Popen[bytes] | None = None
    sides: dict[str, list[Proxy]] = {side: [] for side in SIDES}
    results: list[dict[str, Any]] = []
    try:
        await worker.wait_ready()
        if a.profile == "outlier":
            prober = start_prober(worker_config, BOOTSTRAP, REDIS_URL, f"{namespace}:", prefix, f"{tag}-probers",
                                  workdir / "prober.log", cooled_interval=a.cooled_interval)
        for side in SIDES:
            config = proxy_config(workdir / f"proxy-{side}.yaml", models[side], side, namespace, 0)
            for i in range(PODS):
                env = {} if side == "litellm" else {
                    "COOLANT_KAFKA_BOOTSTRAP": BOOTSTRAP, "COOLANT_TOPIC_PREFIX": prefix,
                    "COOLANT_REDIS_URL": REDIS_URL, "COOLANT_REDIS_KEY_PREFIX": f"{namespace}:",
                    "COOLANT_GATEWAY_ID": f"pod-{i}", "COOLANT_CONFIG": str(worker_config)}
                sides[side].append(Proxy(f"{side}-{i}", config, env, workdir))
        for side, proxies in sides.items():
            for p in proxies:
                await p.wait_ready(900)
                for _ in range(3):
                    await stream_once(p.client, f"{tag}-{side}-warmup")
        print(f"worker and {2 * PODS} proxies ready after {time.monotonic() - t_start:.0f} s; {a.rate:g} streamed "
              f"requests/s per side; C's streams fail for {a.duration:g} s after {a.warmup:g} s; coolant profile "
              f"{a.profile}; logs in {workdir}", flush=True)
        requests: list[dict[str, Any]] = []
        for kind in kinds:
            onset, counts = await run_kind(kind, tag, up, sides, a, requests)
            load = [round(x, 2) for x in os.getloadavg()]
            results.append({"kind": kind, "litellm": counts["litellm"][0], "coolant": counts["coolant"][0],
                            "requests": {s: n for s, (_, n) in counts.items()}, "load": load, "onset": onset})
            print(f"  {kind}: litellm {counts['litellm'][0]} failed of {counts['litellm'][1]}, coolant "
                  f"{counts['coolant'][0]} failed of {counts['coolant'][1]} (load {load})", flush=True)
        await asyncio.sleep(3.0)
        cooldowns = await read_json(BOOTSTRAP, prefix + "cooldowns")
        outcomes = await read_json(BOOTSTRAP, prefix + "outcomes")
        for r in results:
            c = deps(tag, r["kind"], "coolant")[1][2]
            of_c = [cd for cd in cooldowns if cd["deployment_id"] == c]
            r["cooldowns"] = len(of_c)
            onset = r.pop("onset")
            where = sources([o for o in outcomes if o["deployment_id"] == c], of_c, onset)
            r["sources"] = {k: where[k] for k in SOURCES}
            r["elsewhere"] = elsewhere(requests, r["kind"], c, onset)
        report(results, a)
        if a.dump:
            dump(Path(a.dump), {"requests": requests, "outcomes": outcomes, "cooldowns": cooldowns,
                                "calls": [dataclasses.asdict(c) for c in up.calls]})
        return results
    finally:
        for proxies in sides.values():
            for p in proxies:
                await p.stop()
        if prober is not None:
            prober.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                prober.wait(20)
        worker.stop()
        up.stop()
        await delete_topics(BOOTSTRAP, [prefix, f"{tag}-app", f"{tag}-probers"])
        await delete_redis_keys(REDIS_URL, f"{namespace}:")
        print(f"total {time.monotonic() - t_start:.0f} s")


def elsewhere(requests: list[dict[str, Any]], kind: str, c: str, onset: float) -> dict[str, int]:
    """coolant's failed requests after the onset that C did not serve (no chunk of C's came), by the SDK's error:
    not the dying streams' doing (a proxy that refused, a connection to it that broke)."""
    return dict(Counter((r["error"] or "no finish_reason").split(":")[0] for r in requests
                        if r["kind"] == kind and r["side"] == "coolant" and r["sent"] >= onset and not r["ok"]
                        and r["served"] != c))


def dump(where: Path, tables: dict[str, list[dict[str, Any]]]) -> None:
    """--dump: the run's raw data, one JSON-lines file per table (the outcome records replay with `coolant replay`)."""
    where.mkdir(parents=True, exist_ok=True)
    for name, rows in tables.items():
        (where / f"{name}.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    print(f"raw data in {where}")


def report(results: list[dict[str, Any]], a: argparse.Namespace) -> None:
    print(f"\nfailed streamed requests while C's streams fail ({a.duration:g} s at {a.rate:g}/s per side; coolant "
          f"profile {a.profile})")
    print(f"  {'kind':<10} | {'litellm':>7} | {'coolant':>7} | ratio | requests | cooldown records of C | coolant's "
          f"failed attempts on C: " + ", ".join(SOURCES) + " | load")
    for r in results:
        ratio = r["coolant"] / r["litellm"] if r["litellm"] else float("nan")
        sent = f"{r['requests']['litellm']}/{r['requests']['coolant']}"
        print(f"  {r['kind']:<10} | {r['litellm']:>7} | {r['coolant']:>7} | {ratio:>5.2f} | {sent:>8} | "
              f"{r['cooldowns']:>21} | " + ", ".join(str(r["sources"][k]) for k in SOURCES) + f" | {r['load']}")
        if r["elsewhere"]:
            print(f"  {'':<10}   coolant's failed requests C did not serve: {r['elsewhere']}")


def main() -> None:
    p = parser(__doc__, "a list of {kind, litellm, coolant}")
    p.add_argument("--kinds", default=",".join(STREAM_KINDS), help="comma-separated, of cut, error, truncated")
    p.add_argument("--profile", choices=("compatible", "outlier"), default="outlier", help="coolant's profile")
    p.add_argument("--rate", type=float, default=15.0, help="streamed requests per second per side")
    p.add_argument("--duration", type=float, default=40.0, help="seconds C's streams fail, per kind")
    p.add_argument("--warmup", type=float, default=5.0, help="seconds of healthy traffic before each kind")
    p.add_argument("--dump", metavar="DIR", help="also write the run's requests, outcome records, cooldown records "
                                                 "and upstream calls there (JSON lines, one file each)")
    run_bench(p, main_async, {"kinds": (STREAM_KINDS, "kind")})


if __name__ == "__main__":
    main()
