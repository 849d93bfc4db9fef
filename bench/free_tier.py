"""The free-tier bursts of issue 28 (scenario S1) over real `litellm --config` proxies: upstream 429s per key.

    scripts/kafka-local start && scripts/redis-local start
    .venv/bin/python bench/free_tier.py [--pods 3] [--bursts 3] [--calls 12] [--gap 20] [--json FILE]

Each side has its own keys on the fake OpenAI server of the LiteLLM tests (`tests/litellm/support_litellm.py`):
group `flash` with two free keys, each allowing 15 requests in a 60 s sliding window (429 with `Retry-After: 30`
beyond), and group `pro`, one paid key without a limit; `fallbacks: flash -> [pro]`, `num_retries: 5`,
`allowed_fails: 1`, `cooldown_time: 60` (S1's set-up). --pods proxies per side share one Redis namespace.
Three coding agents burst: --bursts bursts of --calls tool calls one after the other, --gap s apart, agent a
on pod a % pods, the second and third agent starting 1 s and 2 s after the first.

  litellm   LiteLLM alone: its own cooldowns (allowed_fails 1 per process).
  coolant   coolant's default, the recommended configuration (docs/litellm.md §6): `disable_cooldowns: true`,
            `coolant_callback` with the fast path (`COOLANT_CONFIG`) and the push (`COOLANT_REDIS_URL`), one worker;
            --rate-limit-fails N adds `allowed_fails_policy: {RateLimitErrorAllowedFails: N}` to its config.

Prints, per side, the upstream 429s of each free key, the calls to `pro` and the requests that failed; goal:
coolant's 429s <= LiteLLM's. --json FILE writes a list of `{side, key, upstream_429s, calls}` (one row per free
key, then `pro`) with the `load` average. A bench, not a test: about --bursts x --gap s plus start-up.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "litellm"))
sys.path.insert(0, str(ROOT / "bench"))

from onset_compare import BOOTSTRAP, MODES, REDIS_URL  # noqa: E402
from onset_proxies import pod_env, proxy_config, stop_all  # noqa: E402
from support_litellm import MESSAGES, Proxy, deployment  # noqa: E402

from tests.support.kafka import create_topics  # noqa: E402
from tests.support.upstream import FakeOpenAI  # noqa: E402
from tests.support.worker import Worker  # noqa: E402

FREE_LIMIT, FREE_WINDOW = 15, 60.0
AGENTS = 3
SETTINGS = {"num_retries": 5, "allowed_fails": 1, "cooldown_time": 60, "retry_after": 0}


def keys(tag: str, side: str) -> tuple[str, str, str]:
    """The fake's modes (one per key) of a side: free 1, free 2, pro."""
    return f"{tag}{side}f1", f"{tag}{side}f2", f"{tag}{side}pro"


def models(fake: FakeOpenAI, tag: str, side: str) -> list[dict[str, Any]]:
    free1, free2, pro = keys(tag, side)
    return [deployment(f"{side}-free-1", f"{side}-flash", fake.base(free1)),
            deployment(f"{side}-free-2", f"{side}-flash", fake.base(free2)),
            deployment(f"{side}-pro", f"{side}-pro", fake.base(pro))]


async def agent(proxies: list[Proxy], a: int, side: str, args: argparse.Namespace, failed: list[int]) -> int:
    """One agent's bursts; returns its requests."""
    await asyncio.sleep(a)
    client, sent = proxies[a % len(proxies)].client, 0
    for burst in range(args.bursts):
        if burst:
            await asyncio.sleep(args.gap)
        for _ in range(args.calls):
            sent += 1
            try:
                await client.chat.completions.create(model=f"{side}-flash", messages=MESSAGES)
            except Exception:
                failed[0] += 1
    return sent


async def main_async(args: argparse.Namespace) -> list[dict[str, Any]]:
    tag = f"ft{uuid.uuid4().hex[:6]}"
    prefix, namespace = f"{tag}.", tag
    workdir = Path(tempfile.mkdtemp(prefix="coolant-free-tier-"))
    fake = FakeOpenAI().start()
    for side in MODES:
        for mode in keys(tag, side)[:2]:
            fake.limits[mode] = (FREE_LIMIT, FREE_WINDOW)
    worker_config = workdir / "worker.yaml"
    policy = {} if args.rate_limit_fails is None else {
        "allowed_fails_policy": {"RateLimitErrorAllowedFails": args.rate_limit_fails}}
    worker_config.write_text(yaml.safe_dump({
        "model_list": models(fake, tag, "coolant"),
        "router_settings": {k: v for k, v in SETTINGS.items() if k in ("allowed_fails", "cooldown_time")} | {
            "fallbacks": [{"coolant-flash": ["coolant-pro"]}]} | policy}))
    await create_topics(BOOTSTRAP, prefix, 2)
    worker = Worker(name="free-tier", config=worker_config, bootstrap=BOOTSTRAP, topic_prefix=prefix,
                    app_id=f"{tag}-app", workdir=workdir, redis_url=REDIS_URL, redis_key_prefix=f"{namespace}:",
                    partitions=2)
    worker.start()
    sides: dict[str, list[Proxy]] = {}
    for side in MODES:
        config = proxy_config(workdir / f"proxy-{side}.yaml", models(fake, tag, side), side, namespace,
                              SETTINGS["num_retries"], **{k: v for k, v in SETTINGS.items() if k != "num_retries"},
                              fallbacks=[{f"{side}-flash": [f"{side}-pro"]}], **(policy if side == "coolant" else {}))
        sides[side] = [Proxy(f"{side}-{i}", config, pod_env(side, i, prefix, namespace, worker_config), workdir)
                       for i in range(args.pods)]
    rows: list[dict[str, Any]] = []
    try:
        await worker.wait_ready()
        for proxies in sides.values():
            for p in proxies:
                await p.wait_ready()
        print(f"worker and {2 * args.pods} proxies ready; load average {os.getloadavg()}; logs in {workdir}",
              flush=True)
        t0 = time.monotonic()
        failed = {side: [0] for side in MODES}
        sent = await asyncio.gather(*(agent(sides[side], a, side, args, failed[side])
                                      for side in MODES for a in range(AGENTS)))
        load = os.getloadavg()
        print(f"bursts done in {time.monotonic() - t0:.0f} s; load average {load}")
        for s, side in enumerate(MODES):
            requests = sum(sent[s * AGENTS:(s + 1) * AGENTS])
            names = ("free-1", "free-2", "pro")
            for name, mode in zip(names, keys(tag, side), strict=True):
                rows.append({"side": side, "key": name, "upstream_429s": fake.count(mode, 429),
                             "calls": fake.count(mode),
                             "requests": requests, "failed_requests": failed[side][0], "load": list(load)})
            mine = [r for r in rows if r["side"] == side]
            print(f"  {side:8} free-1 {mine[0]['upstream_429s']:>3} 429s of {mine[0]['calls']:>3} calls, free-2 "
                  f"{mine[1]['upstream_429s']:>3} of {mine[1]['calls']:>3}; pro {mine[2]['calls']:>3} calls; "
                  f"{failed[side][0]} of {requests} requests failed")
    finally:
        await stop_all(sides, worker, fake, tag)
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pods", type=int, default=3, help="proxies per side (default 3)")
    p.add_argument("--bursts", type=int, default=3, help="bursts per agent (default 3)")
    p.add_argument("--calls", type=int, default=12, help="tool calls per burst, one after the other (default 12)")
    p.add_argument("--gap", type=float, default=20.0, help="seconds between two bursts of an agent (default 20)")
    p.add_argument("--rate-limit-fails", type=int, default=None, metavar="N",
                   help="the coolant side's `allowed_fails_policy: {RateLimitErrorAllowedFails: N}` (docs/litellm.md "
                        "§6 recommends 0: a 429 then cools its key in the pod at once); default: S1's settings alone")
    p.add_argument("--json", metavar="FILE", help="write the rows there: {side, key, upstream_429s, calls, ...}")
    args = p.parse_args()
    rows = asyncio.run(main_async(args))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
