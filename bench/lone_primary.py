"""A lone primary with a fallback group (issue 24): the primary answers 503 for 60 s, then heals.

    scripts/kafka-local start && scripts/redis-local start
    .venv/bin/python bench/lone_primary.py [--json FILE] [--sides litellm,coolant,coolant_outlier]
                                           [--clients router,proxy] [--cooled-interval S]
                                           [--release-after N] [--dump FILE]

The "primary flaps" scenario of a public failover benchmark, with LiteLLM 1.110.2: a model group `primary` of one
deployment P, a group `fallback` of one deployment F (`fallbacks: [{primary: [fallback]}]`), `num_retries: 2`,
one request to `primary` every --every seconds (open loop: a slow request does not delay the next one). P answers
503 from just before a request for --outage seconds, so the outage starts with a request and the heal falls just
before one (LiteLLM alone is back on P at once; a profile that cools P must have let it go by then, or waits for
the next request). Each side runs on its own deployments, side by side on one fake upstream
(`tests/support/upstream.py`), through two clients:

  router   a `litellm.Router` in this process (the coolant sides with `disable_cooldowns` and `CoolantCallback`:
           the fast path and the push, the worker's config)
  proxy    a `litellm --config` process, called with the `openai` SDK (`max_retries=0`); the coolant sides with
           `coolant_callback`, `COOLANT_CONFIG` and `COOLANT_REDIS_URL`

Sides: `litellm` (LiteLLM's defaults), `coolant` (the compatible profile, one `coolant worker`), `coolant_outlier`
(`coolant: {profile: outlier}`, one worker, and one `coolant probe` with its cooled cadence, --cooled-interval;
with `--cooled-interval 0` no prober, so X13's backoff and half-open decide alone).

Per side and client it prints and writes (`--json FILE`, a list): `primary_attempts_in_outage` (the clients'
calls that reached P while it answered 503; probes are counted apart in `probe_calls_in_outage`),
`requests_in_outage`, `served` (requests answered) of `requests`, and `back_on_primary_s` (from the heal to the
first client call P answered; `heal_late_s`: how late the switch ran, a sign of a starved machine), and on the
outlier side how the recovery got there: `first_good_probe_s` (the first probe P answered after the heal) and
`release_heard_s` (when RC4's release was heard on the push channel), both from the heal. Goals
under the profile: <= 3 primary attempts, every request served, back on P <= 4 s;
under the compatible profile, the same as LiteLLM alone. A bench, not a test: about --warmup + --outage + --after
seconds plus start-up.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "litellm"))
sys.path.insert(0, str(ROOT / "bench"))

import litellm  # noqa: E402
import orjson  # noqa: E402
import redis.asyncio as redis_asyncio  # noqa: E402
from bench_args import parser, run_bench  # noqa: E402
from prober_process import start_prober  # noqa: E402
from support_litellm import Proxy  # noqa: E402

from coolant.integrations.litellm import CoolantCallback  # noqa: E402
from coolant.io.materializer import cooldown_channel  # noqa: E402
from tests.support.kafka import create_topics, delete_topics  # noqa: E402
from tests.support.redis import delete_redis_keys  # noqa: E402
from tests.support.upstream import FakeOpenAI  # noqa: E402
from tests.support.worker import Worker  # noqa: E402

BOOTSTRAP = os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:19092")
REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:16379/0")
SIDES = ("litellm", "coolant", "coolant_outlier")
CLIENTS = ("router", "proxy")
MESSAGES = [{"role": "user", "content": "hi"}]
OUTLIER = {"profile": "outlier"}
"""The one line that turns the profile on (docs/outlier.md); every knob at its default."""

litellm.suppress_debug_info = True


@dataclass
class Run:
    side: str
    client: str
    primary: str
    fallback: str
    requests: list[dict[str, Any]] = field(default_factory=list)


def names(tag: str, side: str, client: str) -> tuple[str, str]:
    base = f"{tag}-{side.replace('_', '')}-{client}"
    return f"{base}-P", f"{base}-F"


def model_list(up: FakeOpenAI, runs: list[Run]) -> list[dict[str, Any]]:
    out = []
    for r in runs:
        for dep, group in ((r.primary, f"{r.primary}-group"), (r.fallback, f"{r.fallback}-group")):
            out.append({"model_name": group, "litellm_params": {"model": "openai/gpt-4o-mini", "api_key": "sk-x",
                                                                "api_base": up.base(dep)},
                        "model_info": {"id": dep}})
    return out


def router_settings(runs: list[Run], side: str, namespace: str) -> dict[str, Any]:
    u = urlparse(REDIS_URL)
    out: dict[str, Any] = {"redis_host": u.hostname or "127.0.0.1", "redis_port": u.port or 6379,
                           "cache_kwargs": {"namespace": namespace}, "num_retries": 2,
                           "fallbacks": [{f"{r.primary}-group": [f"{r.fallback}-group"]} for r in runs]}
    if side != "litellm":
        out["disable_cooldowns"] = True
    return out


async def drive(run: Run, call: Any, start: float, count: int, every: float) -> None:
    """One request every `every` s from `start` (open loop); each one's send time, outcome and server."""

    async def one(k: int) -> None:
        await asyncio.sleep(max(0.0, start + k * every - time.time()))
        sent = time.time()
        served_by, error = None, None
        try:
            served_by = await call()
        except Exception as exc:  # a request the user sees fail
            error = type(exc).__name__
        run.requests.append({"k": k, "sent": sent, "done": time.time(), "served_by": served_by, "error": error})

    await asyncio.gather(*(one(k) for k in range(count)))


async def listen(redis_url: str, prefix: str, heard: list[dict[str, Any]], ready: asyncio.Event) -> None:
    """Every message on the side's push channel (cooldowns written, probe releases), with when it was heard:
    what the pods' feeds apply. Runs until cancelled."""
    client = redis_asyncio.from_url(redis_url)
    pubsub = client.pubsub()
    try:
        await pubsub.subscribe(cooldown_channel(prefix))
        ready.set()
        while True:
            msg = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
            if msg is not None:
                heard.append({"at": time.time(), **orjson.loads(msg["data"])})
    finally:
        await pubsub.aclose()
        await client.aclose()


def measure(run: Run, up: FakeOpenAI, outage: tuple[float, float], heard: list[dict[str, Any]]) -> dict[str, Any]:
    """`outage`: when the switch actually flipped (on a loaded machine the switch task runs late, so the plan's
    times would misplace the heal). Back on the primary: from the heal to the first client call it answered.
    How the recovery got there (coolant_outlier): the first probe the primary answered after the heal, and when
    the release was heard on the push channel (both from the heal)."""
    start, heal = outage
    to_p = [c for c in up.calls if c.name == run.primary and start <= c.at < heal]
    reqs = sorted(run.requests, key=lambda r: r["sent"])
    back = next((c.at - heal for c in up.calls
                 if c.name == run.primary and not c.probe and c.answer == "200" and c.at >= heal), None)
    probe = next((c.at - heal for c in up.calls
                  if c.name == run.primary and c.probe and c.answer == "200" and c.at >= heal), None)
    release = next((m["at"] - heal for m in heard
                    if m["deployment_id"] == run.primary and "released" in m and m["at"] >= start), None)
    return {
        "side": run.side, "client": run.client,
        "primary_attempts_in_outage": sum(not c.probe for c in to_p),
        "probe_calls_in_outage": sum(c.probe for c in to_p),
        "requests_in_outage": sum(start <= r["sent"] < heal for r in reqs),
        "served": sum(r["error"] is None for r in reqs),
        "requests": len(reqs),
        "back_on_primary_s": None if back is None else round(back, 2),
        "first_good_probe_s": None if probe is None else round(probe, 2),
        "release_heard_s": None if release is None else round(release, 2),
        "errors": sorted({r["error"] for r in reqs if r["error"]}),
    }


async def main_async(a: argparse.Namespace) -> list[dict[str, Any]]:
    t_start = time.monotonic()
    tag = f"lp{uuid.uuid4().hex[:6]}"
    sides = a.sides.split(",")
    clients = a.clients.split(",")
    workdir = Path(tempfile.mkdtemp(prefix="coolant-lone-primary-"))
    up = FakeOpenAI().start()
    runs = {(s, c): Run(s, c, *names(tag, s, c)) for s in sides for c in clients}
    by_side = {s: [r for (s2, _), r in runs.items() if s2 == s] for s in sides}
    ns = {s: f"{tag}{s.replace('_', '')}" for s in sides}
    prefix = {s: f"{tag}.{s.replace('_', '')}." for s in sides}
    configs: dict[str, Path] = {}
    worker_configs: dict[str, Path] = {}
    workers: list[Worker] = []
    procs: list[subprocess.Popen[bytes]] = []
    proxies: dict[str, Proxy] = {}
    routers: dict[str, Any] = {}
    callbacks: list[CoolantCallback] = []
    listener: asyncio.Task[None] | None = None
    try:
        for s in sides:
            cfg: dict[str, Any] = {"model_list": model_list(up, by_side[s]),
                                   "router_settings": router_settings(by_side[s], s, ns[s])}
            if s == "coolant_outlier":
                cfg["coolant"] = dict(OUTLIER)
                if a.release_after is not None:
                    cfg["coolant"]["recovery"] = {"release_after": a.release_after}
            if s != "litellm":
                cfg["litellm_settings"] = {"callbacks": ["coolant.integrations.litellm.coolant_callback"]}
            configs[s] = workdir / f"{s}.yaml"
            configs[s].write_text(yaml.safe_dump(cfg))
            if s == "litellm":
                continue
            # the worker's (and the pods' fast path's, and the prober's) config: the routers' own, where coolant
            # decides, so without `disable_cooldowns` (G4 would read it as "LiteLLM cools nothing here")
            mine = {**cfg, "router_settings": {k: v for k, v in cfg["router_settings"].items()
                                               if k != "disable_cooldowns"}}
            mine.pop("litellm_settings", None)
            worker_configs[s] = workdir / f"{s}-worker.yaml"
            worker_configs[s].write_text(yaml.safe_dump(mine))
            await create_topics(BOOTSTRAP, prefix[s], 2)
            w = Worker(name=s, config=worker_configs[s], bootstrap=BOOTSTRAP, topic_prefix=prefix[s],
                       app_id=f"{tag}-{s}", workdir=workdir, redis_url=REDIS_URL, redis_key_prefix=f"{ns[s]}:",
                       partitions=2)
            w.start()
            workers.append(w)
        for w in workers:
            await w.wait_ready()
        heard: list[dict[str, Any]] = []
        if "coolant_outlier" in sides:
            s = "coolant_outlier"
            ready = asyncio.Event()
            listener = asyncio.create_task(listen(REDIS_URL, f"{ns[s]}:", heard, ready))
            await asyncio.wait_for(ready.wait(), 30)
            if a.cooled_interval > 0:
                procs.append(start_prober(worker_configs[s], BOOTSTRAP, REDIS_URL, f"{ns[s]}:", prefix[s],
                                          f"{tag}-probers", workdir / "prober.log", interval=a.probe_interval,
                                          cooled_interval=a.cooled_interval))
        for s in sides:
            cfg = yaml.safe_load(configs[s].read_text())
            rs = cfg["router_settings"]
            if "router" in clients:
                u = urlparse(REDIS_URL)
                router = litellm.Router(model_list=cfg["model_list"], redis_host=u.hostname, redis_port=u.port,
                                        cache_kwargs=rs["cache_kwargs"], num_retries=2, fallbacks=rs["fallbacks"],
                                        disable_cooldowns=rs.get("disable_cooldowns", False))
                routers[s] = router
                if s != "litellm":
                    cb = CoolantCallback(BOOTSTRAP, topic_prefix=prefix[s], gateway=f"router-{s}",
                                         config=worker_configs[s], redis_url=REDIS_URL,
                                         redis_key_prefix=f"{ns[s]}:", routers=[router])
                    callbacks.append(cb)
                    litellm.callbacks.append(cb)
                    await cb.start_push()
            if "proxy" in clients:
                env = {} if s == "litellm" else {
                    "COOLANT_KAFKA_BOOTSTRAP": BOOTSTRAP, "COOLANT_TOPIC_PREFIX": prefix[s],
                    "COOLANT_REDIS_URL": REDIS_URL, "COOLANT_REDIS_KEY_PREFIX": f"{ns[s]}:",
                    "COOLANT_GATEWAY_ID": f"proxy-{s}", "COOLANT_CONFIG": str(worker_configs[s])}
                proxies[s] = Proxy(f"proxy-{s}", configs[s], env, workdir)
        for p in proxies.values():
            await p.wait_ready(900)
        for (s, c), r in runs.items():  # a first call per client and group (LiteLLM's first call is slow)
            for group in (f"{r.primary}-group", f"{r.fallback}-group"):
                await (routers[s].acompletion(model=group, messages=MESSAGES) if c == "router" else
                       proxies[s].client.chat.completions.create(model=group, messages=MESSAGES))
        await asyncio.sleep(2.0)
        print(f"{len(workers)} workers, {len(proxies)} proxies, {len(routers)} routers ready after "
              f"{time.monotonic() - t_start:.0f} s; logs in {workdir}", flush=True)

        def caller(s: str, c: str, group: str) -> Any:
            if c == "router":
                async def via_router() -> str | None:
                    resp = await routers[s].acompletion(model=group, messages=MESSAGES)
                    return str(resp.choices[0].message.content)
                return via_router

            async def via_proxy() -> str | None:
                resp = await proxies[s].client.chat.completions.create(model=group, messages=MESSAGES)
                return resp.choices[0].message.content

            return via_proxy

        start = time.time() + 1.0
        warm = int(a.warmup // a.every)
        outage = (start + warm * a.every - 0.1, start + warm * a.every - 0.1 + a.outage)
        count = warm + int((a.outage + a.after) // a.every)

        flipped: list[float] = []

        async def switch() -> None:
            await asyncio.sleep(max(0.0, outage[0] - time.time()))
            for r in runs.values():
                up.failing[r.primary] = 503
            flipped.append(time.time())
            await asyncio.sleep(max(0.0, outage[1] - time.time()))
            for r in runs.values():
                up.failing.pop(r.primary, None)
            flipped.append(time.time())

        await asyncio.gather(switch(), *(drive(r, caller(s, c, f"{r.primary}-group"), start, count, a.every)
                                         for (s, c), r in runs.items()))
        load = os.getloadavg()
        late = round(flipped[1] - outage[1], 2)
        outage = (flipped[0], flipped[1])
        results = [measure(r, up, outage, heard) | {"load": [round(x, 2) for x in load], "heal_late_s": late}
                   for r in runs.values()]
        report(results, a)
        if a.dump:
            Path(a.dump).write_text(json.dumps({"outage": outage, "runs": [asdict(r) for r in runs.values()],
                                                "calls": [asdict(c) for c in up.calls], "pushed": heard}))
        return results
    finally:
        if listener is not None:
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await listener
        for cb in callbacks:
            with contextlib.suppress(Exception):
                await cb.aclose()
        for p in proxies.values():
            await p.stop()
        for proc in procs:
            proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(20)
        for w in workers:
            w.stop()
        up.stop()
        await delete_topics(BOOTSTRAP, [f"{tag}."] + [f"{tag}-{s}" for s in sides])
        for s in sides:
            await delete_redis_keys(REDIS_URL, f"{ns[s]}:")
        print(f"total {time.monotonic() - t_start:.0f} s")


def report(results: list[dict[str, Any]], a: argparse.Namespace) -> None:
    print(f"\nthe primary answers 503 for {a.outage:g} s, one request every {a.every:g} s, num_retries 2, a fallback "
          f"group; load {results[0]['load'] if results else '-'}")
    print(f"  {'side':<16} {'client':<7} | primary attempts in outage | probes | requests in outage | served "
          f"| back on primary | first good probe | release heard")

    def secs(v: float | None, none: str = "-") -> str:
        return none if v is None else f"{v:.1f} s"

    for r in results:
        print(f"  {r['side']:<16} {r['client']:<7} | {r['primary_attempts_in_outage']:>26} | "
              f"{r['probe_calls_in_outage']:>6} | {r['requests_in_outage']:>18} | "
              f"{r['served']:>3} of {r['requests']:<3}| {secs(r['back_on_primary_s'], 'never'):>15} | "
              f"{secs(r['first_good_probe_s']):>16} | {secs(r['release_heard_s']):>13}"
              + (f"  errors: {r['errors']}" if r["errors"] else ""))


def main() -> None:
    p = parser(__doc__, "a list, one object per side and client",
               "the prober's --cooled-interval; 0: no prober at all (the profile's X13 alone)")
    p.add_argument("--sides", default=",".join(SIDES), help=f"comma-separated, of {', '.join(SIDES)}")
    p.add_argument("--clients", default=",".join(CLIENTS), help=f"comma-separated, of {', '.join(CLIENTS)}")
    p.add_argument("--outage", type=float, default=60.0, help="seconds the primary answers 503")
    p.add_argument("--every", type=float, default=4.0, help="seconds between two requests")
    p.add_argument("--warmup", type=float, default=8.0, help="seconds of requests before the outage")
    p.add_argument("--after", type=float, default=24.0, help="seconds of requests after the heal")
    p.add_argument("--probe-interval", type=float, default=60.0, help="the prober's --interval (its rounds)")
    p.add_argument("--release-after", type=int, help="coolant.recovery.release_after on the outlier side "
                   "(default: the profile's)")
    p.add_argument("--dump", metavar="FILE", help="also write every request and upstream call there (JSON)")
    run_bench(p, main_async, {"sides": (SIDES, "side"), "clients": (CLIENTS, "client")})


if __name__ == "__main__":
    main()
