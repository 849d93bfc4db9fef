"""Published attempts against upstream calls, per kind of attempt, in a proxy and a bare Router (issue 28).

    scripts/kafka-local start
    .venv/bin/python bench/attempts.py [--requests 3] [--clients proxy,router] [--json FILE]

Both sides count: the upstream is the LiteLLM tests' fake OpenAI server (`tests/litellm/support_litellm.py`),
which counts every call it gets; the records are read back from Kafka, as the callback published them. Cases
(each its own model groups, run one after the other, --requests requests each):

  retries 0 / 2 / 5            a deployment answering 500, `num_retries` 0, 2, 5 (the request's own setting)
  fallback hop                 500 three times (`num_retries` 2), then the fallback group answers
  stream dies before chunk 1   a 200 stream closed before its first chunk, retried twice
  stream dies after chunk 1    a 200 stream cut after 3 chunks (the caller has content: not retried)
  stream dies after a failure  500 three times, then the fallback's stream is cut after 3 chunks
  caller leaves a stream       the caller closes a slow stream after 5 chunks (published with origin "caller";
                               the proxy only: a bare Router's LiteLLM reports nothing for it)

Clients: `proxy` (a `litellm --config` process with `coolant_callback` from its config, driven by the `openai`
SDK with its retries off) and `router` (a `litellm.Router` in this process, `acompletion`, with a
`CoolantCallback`). Goal: published == upstream calls in every row. Prints a table and the load average;
--json FILE writes a list of `{client, case, upstream_calls, published, requests}`. A bench, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import os
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "litellm"))

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from support_litellm import MESSAGES, Proxy, deployment  # noqa: E402

from tests.support.kafka import create_topics, delete_topics, read_json  # noqa: E402
from tests.support.upstream import SERVER_ERROR, FakeOpenAI  # noqa: E402

BOOTSTRAP = os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:19092")
CLIENTS = ("proxy", "router")
LEAVE_AFTER = 5
"""Chunks the caller reads before it closes a `slow` stream."""
SETTLE = 2.0
"""Seconds without a new record before a case's count is taken."""


@dataclass(frozen=True)
class Case:
    name: str
    mode: str
    """The fake upstream's mode for the requested group's deployment (`FakeOpenAI`)."""
    fallback: str | None = None
    """The fallback group's mode, if the group has one."""
    retries: int = 2
    stream: bool = False
    leave: bool = False
    proxy_only: bool = False
    """A proxy-only case: a bare Router logs nothing for a stream its caller stops reading (LiteLLM's stream
    wrapper reports nothing for a stream closed before its end, and no proxy marks the disconnect)."""


CASES = (
    Case("retries 0", "err", retries=0),
    Case("retries 2", "err", retries=2),
    Case("retries 5", "err", retries=5),
    Case("fallback hop", "fbsrc", fallback="ok"),
    Case("stream dies before chunk 1", "early", stream=True),
    Case("stream dies after chunk 1", "cut", stream=True),
    Case("stream dies after a failure", "fbsrc2", fallback="cut", stream=True),
    Case("caller leaves a stream", "slow", stream=True, leave=True, proxy_only=True),
)
FAILING = {"fbsrc", "fbsrc2"}
"""Names the fake answers 500 in (`FakeOpenAI.failing`)."""


def groups(tag: str, case: Case) -> tuple[str, str | None]:
    g = f"{tag}-{CASES.index(case)}"
    return g, (f"{g}-to" if case.fallback else None)


def model_list(fake: FakeOpenAI, tag: str) -> tuple[list[dict[str, Any]], list[dict[str, list[str]]]]:
    models: list[dict[str, Any]] = []
    fallbacks: list[dict[str, list[str]]] = []
    for case in CASES:
        g, to = groups(tag, case)
        models.append(deployment(f"{g}-d", g, fake.base(case.mode)))
        if to is not None and case.fallback is not None:
            models.append(deployment(f"{to}-d", to, fake.base(case.fallback)))
            fallbacks.append({g: [to]})
    return models, fallbacks


async def drain(stream: Any, leave: bool) -> None:
    """Read a stream to its end (or its error); with `leave`, close it after `LEAVE_AFTER` chunks."""
    n = 0
    try:
        async for _ in stream:
            n += 1
            if leave and n == LEAVE_AFTER:
                break
    except Exception:  # a stream that dies: the caller sees it, the bench counts the attempt
        pass
    if leave:  # the SDK's stream closes with `close()`, LiteLLM's with `aclose()`
        close = getattr(stream, "aclose", None) or getattr(stream, "close", None)
        done = close() if close is not None else None
        if inspect.isawaitable(done):
            await done


Send = Callable[[Case, str], Awaitable[None]]


def proxy_sender(proxy: Proxy) -> Send:
    async def send(case: Case, group: str) -> None:
        extra = {"num_retries": case.retries}
        try:
            answer = await proxy.client.chat.completions.create(model=group, messages=MESSAGES, stream=case.stream,
                                                                extra_body=extra)
        except Exception:
            return
        if case.stream:
            await drain(answer, case.leave)

    return send


def router_sender(router: Any) -> Send:
    async def send(case: Case, group: str) -> None:
        try:
            answer = await router.acompletion(model=group, messages=MESSAGES, stream=case.stream,
                                              num_retries=case.retries)
        except Exception:
            return
        if case.stream:
            await drain(answer, case.leave)

    return send


async def published(topic: str, wanted: set[str], flush: Callable[[], Awaitable[None]]) -> list[dict[str, Any]]:
    """The records of `wanted` groups once no new one came for `SETTLE` s (success hooks run after the answer)."""
    last, stable_since = -1, time.monotonic()
    while True:
        await flush()
        got = [r for r in await read_json(BOOTSTRAP, topic) if r["model_group"] in wanted]
        if len(got) != last:
            last, stable_since = len(got), time.monotonic()
        elif time.monotonic() - stable_since >= SETTLE:
            return got
        await asyncio.sleep(0.3)


async def run_cases(client: str, fake: FakeOpenAI, send: Send, tag: str, topic: str, requests: int,
                    flush: Callable[[], Awaitable[None]]) -> list[dict[str, Any]]:
    rows = []
    for case in CASES:
        if case.proxy_only and client != "proxy":
            continue
        g, to = groups(tag, case)
        before = len(fake.calls)
        for _ in range(requests):
            await send(case, g)
        records = await published(topic, {g} | ({to} if to else set()), flush)
        upstream = len(fake.calls) - before
        origins = Counter(r.get("origin") for r in records if not r["ok"])
        row = {"client": client, "case": case.name, "upstream_calls": upstream, "published": len(records),
               "requests": requests, "failed_published": sum(origins.values()),
               "caller": origins.get("caller", 0)}
        rows.append(row)
        print(f"  {client:6} | {case.name:28} | {upstream:>14} | {len(records):>9} | "
              f"{'yes' if upstream == len(records) else 'NO':>4} | {row['caller']}", flush=True)
    return rows


async def on_proxy(fake: FakeOpenAI, requests: int, workdir: Path) -> list[dict[str, Any]]:
    tag = f"ap{uuid.uuid4().hex[:6]}"
    models, fallbacks = model_list(fake, tag)
    config = workdir / "proxy.yaml"
    config.write_text(yaml.safe_dump({
        "model_list": models,
        "router_settings": {"num_retries": 2, "retry_after": 0, "fallbacks": fallbacks},
        "litellm_settings": {"callbacks": ["coolant.integrations.litellm.coolant_callback"]},
    }))
    await create_topics(BOOTSTRAP, f"{tag}.", 1)
    proxy = Proxy("attempts", config, {"COOLANT_KAFKA_BOOTSTRAP": BOOTSTRAP, "COOLANT_TOPIC_PREFIX": f"{tag}.",
                                       "COOLANT_GATEWAY_ID": "proxy"}, workdir)
    try:
        await proxy.wait_ready()

        async def nothing() -> None:
            return None

        return await run_cases("proxy", fake, proxy_sender(proxy), tag, f"{tag}.outcomes", requests, nothing)
    finally:
        await proxy.stop()
        await delete_topics(BOOTSTRAP, [f"{tag}."])


async def on_router(fake: FakeOpenAI, requests: int) -> list[dict[str, Any]]:
    import litellm

    from coolant.integrations.litellm import CoolantCallback

    tag = f"ar{uuid.uuid4().hex[:6]}"
    models, fallbacks = model_list(fake, tag)
    await create_topics(BOOTSTRAP, f"{tag}.", 1)
    cb = CoolantCallback(BOOTSTRAP, topic_prefix=f"{tag}.", gateway="router")
    saved = list(litellm.callbacks)
    litellm.callbacks = [cb]
    try:
        router = litellm.Router(model_list=models, num_retries=2, retry_after=0, fallbacks=fallbacks)

        async def flush() -> None:
            await cb.aflush()

        return await run_cases("router", fake, router_sender(router), tag, f"{tag}.outcomes", requests, flush)
    finally:
        litellm.callbacks = saved
        litellm.logging_callback_manager.remove_callback_from_all_lists(cb)
        await cb.aclose()
        await delete_topics(BOOTSTRAP, [f"{tag}."])


async def main_async(a: argparse.Namespace) -> list[dict[str, Any]]:
    fake = FakeOpenAI().start()
    fake.failing.update(dict.fromkeys(FAILING, SERVER_ERROR))
    workdir = Path(tempfile.mkdtemp(prefix="coolant-attempts-"))
    print(f"load average {os.getloadavg()}; {a.requests} requests per case; proxy log in {workdir}", flush=True)
    print(f"  {'client':6} | {'case':28} | {'upstream calls':>14} | {'published':>9} | {'met':>4} | caller",
          flush=True)
    rows: list[dict[str, Any]] = []
    try:
        for client in a.clients.split(","):
            if client == "proxy":
                rows += await on_proxy(fake, a.requests, workdir)
            elif client == "router":
                rows += await on_router(fake, a.requests)
            else:
                raise SystemExit(f"unknown client {client!r} (one of {', '.join(CLIENTS)})")
    finally:
        fake.stop()
    met = sum(r["upstream_calls"] == r["published"] for r in rows)
    print(f"published == upstream calls in {met} of {len(rows)} rows; load average {os.getloadavg()}")
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--requests", type=int, default=3, help="requests per case (default 3)")
    p.add_argument("--clients", default=",".join(CLIENTS), help="proxy, router or both (default both)")
    p.add_argument("--json", metavar="FILE", help="write the rows there: a list of {client, case, upstream_calls, "
                                                  "published, requests, ...}")
    a = p.parse_args()
    if a.requests < 1:
        p.error("--requests must be at least 1")
    rows = asyncio.run(main_async(a))
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
