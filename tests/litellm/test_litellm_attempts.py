"""One outcome per upstream attempt, on a real LiteLLM 1.110.2 Router and a real `litellm --config` proxy.

The upstream is the fake OpenAI server (`tests.support.upstream.FakeOpenAI`), which logs every call it gets; each
case compares the records published with those calls: as many, with the right `attempt`, `final` and
`origin`. A proxy hands its router one logging object per request, which logs one failure a request: its retries
reach the callback only through LiteLLM's deployment failure hook (`coolant.integrations.litellm.attempts`). A
bare Router logs each attempt through both hooks: each is published once. Records of the bare Router are taken
from the callback's publisher; the proxy's are read back from Kafka.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from support_litellm import MESSAGES, Collected, Proxy, deployment

from tests.support.upstream import SERVER_ERROR, STREAM_CHUNKS, FakeOpenAI

litellm = pytest.importorskip("litellm")
openai = pytest.importorskip("openai")

from coolant.integrations.litellm import CoolantCallback  # noqa: E402
from coolant.schemas import Outcome  # noqa: E402
from tests.support.kafka import create_topics, delete_topics, read_json  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore:.*ReadOnly.*:UserWarning"),
              pytest.mark.timeout(1200)]  # a proxy takes minutes to start on a loaded machine

SETTLE = 1.5
"""Seconds to keep listening once the expected records are there: a repeat would come within them."""


async def settled(read: Callable[[], Any], n: int, timeout: float = 30.0) -> list[Any]:
    """What `read()` returns once it holds `n` items and `SETTLE` s more passed (or the timeout did)."""
    deadline = time.monotonic() + timeout
    while True:
        got = await read()
        if len(got) >= n or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.2)
    await asyncio.sleep(SETTLE)
    return list(await read())


def calls_since(fake: FakeOpenAI, before: int) -> int:
    return len(fake.calls) - before


def rows(records: list[Any]) -> list[tuple[Any, ...]]:
    """(deployment, ok, status, attempt, final, origin) in attempt order."""
    def get(r: Any, name: str) -> Any:
        return r.get(name) if isinstance(r, dict) else getattr(r, name)

    out = [tuple(get(r, f) for f in ("deployment_id", "ok", "status_code", "attempt", "final", "origin"))
           for r in records]
    return sorted(out, key=lambda t: (t[3] is None, t[3] or 0))


# -- a bare Router ---------------------------------------------------------------------------------


@pytest.fixture
async def capture() -> AsyncIterator[tuple[CoolantCallback, Collected]]:
    sink = Collected()
    cb = CoolantCallback(publisher=sink, gateway="bare")
    saved = list(litellm.callbacks)
    litellm.callbacks = [cb]
    try:
        yield cb, sink
    finally:
        litellm.callbacks = saved
        litellm.logging_callback_manager.remove_callback_from_all_lists(cb)


def group() -> str:
    return f"g-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize("retries", [0, 2, 5])
async def test_bare_router_retries(fake: FakeOpenAI, capture: tuple[CoolantCallback, Collected], retries: int) -> None:
    cb, sink = capture
    g = group()
    router = litellm.Router(model_list=[deployment("d-err", g, fake.base("err"))], num_retries=retries,
                            retry_after=0)
    with pytest.raises(litellm.InternalServerError):
        await router.acompletion(model=g, messages=MESSAGES)

    async def read() -> list[Outcome]:
        return sink.records

    got = await settled(read, retries + 1)
    assert fake.count("err", 500) == retries + 1
    assert rows(got) == [("d-err", False, 500, i, i == retries, "upstream") for i in range(retries + 1)]
    assert cb.stats.repeated == retries + 1  # each attempt reached both failure hooks, and was published once


async def test_bare_router_fallback_hop(fake: FakeOpenAI, capture: tuple[CoolantCallback, Collected]) -> None:
    _, sink = capture
    g, h = group(), group()
    router = litellm.Router(model_list=[deployment("d-g", g, fake.base("err")), deployment("d-h", h, fake.base("ok"))],
                            num_retries=1, retry_after=0, fallbacks=[{g: [h]}])
    await router.acompletion(model=g, messages=MESSAGES)

    async def read() -> list[Outcome]:
        return sink.records

    got = await settled(read, 3)
    assert len(fake.calls) == 3
    assert rows(got) == [("d-g", False, 500, 0, False, "upstream"), ("d-g", False, 500, 1, True, "upstream"),
                         ("d-h", True, None, 2, True, None)]


async def test_bare_router_sync_retries(fake: FakeOpenAI, capture: tuple[CoolantCallback, Collected]) -> None:
    """`Router.completion` reaches only the sync failure hook, once per attempt."""
    cb, sink = capture
    g = group()
    router = litellm.Router(model_list=[deployment("d-sync", g, fake.base("err"))], num_retries=2, retry_after=0)

    def run() -> None:
        with pytest.raises(litellm.InternalServerError):
            router.completion(model=g, messages=MESSAGES)

    await asyncio.to_thread(run)

    async def read() -> list[Outcome]:
        return sink.records

    got = await settled(read, 3)
    assert fake.count("err", 500) == 3
    assert rows(got) == [("d-sync", False, 500, i, i == 2, "upstream") for i in range(3)]
    assert cb.stats.repeated == 0


async def consume(stream: Any) -> tuple[int, BaseException | None]:
    """Chunks read from a stream, and the error it ended with."""
    n = 0
    try:
        async for _ in stream:
            n += 1
    except Exception as exc:
        return n, exc
    return n, None


async def test_bare_router_streams(fake: FakeOpenAI, capture: tuple[CoolantCallback, Collected]) -> None:
    """A stream that dies before its first chunk is retried (each attempt published); one that dies after some
    chunks is not (the caller has content), and is published as one failed attempt with no status."""
    _, sink = capture
    g, h = group(), group()
    router = litellm.Router(model_list=[deployment("d-early", g, fake.base("early")),
                                        deployment("d-cut", h, fake.base("cut"))], num_retries=2, retry_after=0)
    with pytest.raises(litellm.APIConnectionError):
        await consume(await router.acompletion(model=g, messages=MESSAGES, stream=True))
    n, exc = await consume(await router.acompletion(model=h, messages=MESSAGES, stream=True))
    assert n == STREAM_CHUNKS and isinstance(exc, litellm.APIConnectionError)

    async def read() -> list[Outcome]:
        return sink.records

    got = await settled(read, 4)
    assert (fake.count("early", 200), fake.count("cut", 200)) == (3, 1)
    assert rows([r for r in got if r.model_group == g]) == [
        ("d-early", False, None, i, i == 2, "upstream") for i in range(3)]
    [cut] = [r for r in got if r.model_group == h]
    assert (cut.ok, cut.status_code, cut.exception_type, cut.origin) == (False, None, "APIConnectionError", "upstream")


STREAM_ENDS = [
    ("trunc", ("RemoteProtocolError", "Stream ended before a finish_reason was received")),
    ("errev", ("APIError", "stream interrupted")),
]
"""A stream that ends cleanly but without a chunk carrying a finish_reason (truncated), and one that ends with an
error event: the names its one failed attempt is published with (the outlier profile counts both, X9.1, X9.6)."""


@pytest.mark.parametrize(("mode", "published"), STREAM_ENDS)
async def test_bare_router_stream_ends_without_finishing(fake: FakeOpenAI, capture: tuple[CoolantCallback, Collected],
                                                         mode: str, published: tuple[str, str]) -> None:
    _, sink = capture
    g = group()
    router = litellm.Router(model_list=[deployment(f"d-{mode}", g, fake.base(mode))], num_retries=2, retry_after=0)
    n, exc = await consume(await router.acompletion(model=g, messages=MESSAGES, stream=True))
    assert n == STREAM_CHUNKS and exc is not None

    async def read() -> list[Outcome]:
        return sink.records

    [rec] = await settled(read, 1)
    assert (rec.ok, rec.status_code, rec.exception_type, rec.exception_message, rec.origin) == (
        False, None, *published, "upstream")


# -- a real proxy process ----------------------------------------------------------------------------


@dataclass
class ProxyRun:
    fake: FakeOpenAI
    proxy: Proxy
    bootstrap: str
    topic: str
    tag: str

    def group(self, name: str) -> str:
        return f"{self.tag}-{name}"

    async def records(self, name: str, n: int) -> list[dict[str, Any]]:
        g = self.group(name)

        async def read() -> list[dict[str, Any]]:
            return [r for r in await read_json(self.bootstrap, self.topic) if r["model_group"] in (g, g + "-to")]

        return await settled(read, n)


PROXY_GROUPS = {  # name: (mode of its deployment, fallback group's mode or None)
    "err": ("err", None),
    "fb": ("fbsrc", "ok"),
    "early": ("early", None),
    "cut": ("cut", None),
    "fbcut": ("fbsrc2", "cut"),
    "slow": ("slow", None),
    "trunc": ("trunc", None),
    "errev": ("errev", None),
}


@pytest.fixture(scope="module")
def proxy_run(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyRun]:
    """One proxy for the module: `num_retries: 2`, the callback from its config, each case its own group."""
    tag = f"at{uuid.uuid4().hex[:6]}"
    workdir = tmp_path_factory.mktemp("proxy")
    fake = FakeOpenAI().start()
    fake.failing.update(dict.fromkeys(("fbsrc", "fbsrc2"), SERVER_ERROR))
    models, fallbacks = [], []
    for name, (mode, to) in PROXY_GROUPS.items():
        g = f"{tag}-{name}"
        models.append(deployment(f"{g}-d", g, fake.base(mode)))
        if to is not None:
            models.append(deployment(f"{g}-to-d", f"{g}-to", fake.base(to)))
            fallbacks.append({g: [f"{g}-to"]})
    config = workdir / "proxy.yaml"
    config.write_text(yaml.safe_dump({
        "model_list": models,
        "router_settings": {"num_retries": 2, "retry_after": 0, "fallbacks": fallbacks},
        "litellm_settings": {"callbacks": ["coolant.integrations.litellm.coolant_callback"]},
    }))
    prefix = f"{tag}."
    asyncio.run(create_topics(kafka_bootstrap, prefix, 1))
    proxy = Proxy("attempts", config, {"COOLANT_KAFKA_BOOTSTRAP": kafka_bootstrap, "COOLANT_TOPIC_PREFIX": prefix,
                                       "COOLANT_GATEWAY_ID": "proxy-1"}, workdir)
    try:
        proxy.ready()
        yield ProxyRun(fake, proxy, kafka_bootstrap, prefix + "outcomes", tag)
    finally:
        proxy.terminate()
        fake.stop()
        asyncio.run(delete_topics(kafka_bootstrap, [prefix]))


async def test_proxy_publishes_every_retry(proxy_run: ProxyRun) -> None:
    """The issue's case: one request, three failed upstream calls, three records (LiteLLM logs one failure)."""
    before = len(proxy_run.fake.calls)
    client = proxy_run.proxy.new_client()
    with pytest.raises(openai.InternalServerError):
        await client.chat.completions.create(model=proxy_run.group("err"), messages=MESSAGES)
    got = await proxy_run.records("err", 3)
    assert calls_since(proxy_run.fake, before) == 3
    dep = f"{proxy_run.group('err')}-d"
    assert rows(got) == [(dep, False, 500, i, i == 2, "upstream") for i in range(3)]
    assert all(r["gateway"] == "proxy-1" for r in got)
    assert len({r["event_id"] for r in got}) == 3
    await client.close()


async def test_proxy_fallback_hop(proxy_run: ProxyRun) -> None:
    before = len(proxy_run.fake.calls)
    client = proxy_run.proxy.new_client()
    await client.chat.completions.create(model=proxy_run.group("fb"), messages=MESSAGES)
    got = await proxy_run.records("fb", 4)
    assert calls_since(proxy_run.fake, before) == 4
    dep = f"{proxy_run.group('fb')}-d"
    assert rows(got) == [(dep, False, 500, 0, False, "upstream"), (dep, False, 500, 1, False, "upstream"),
                         (dep, False, 500, 2, True, "upstream"), (f"{proxy_run.group('fb')}-to-d", True, None, 3,
                                                                  True, None)]
    await client.close()


async def test_proxy_stream_dies_before_its_first_chunk(proxy_run: ProxyRun) -> None:
    before = len(proxy_run.fake.calls)
    client = proxy_run.proxy.new_client()
    with pytest.raises(openai.APIError):
        await consume(await client.chat.completions.create(model=proxy_run.group("early"), messages=MESSAGES,
                                                           stream=True))
    got = await proxy_run.records("early", 3)
    assert calls_since(proxy_run.fake, before) == 3
    dep = f"{proxy_run.group('early')}-d"
    assert rows(got) == [(dep, False, None, i, i == 2, "upstream") for i in range(3)]
    await client.close()


async def test_proxy_stream_dies_mid_answer(proxy_run: ProxyRun) -> None:
    before = len(proxy_run.fake.calls)
    client = proxy_run.proxy.new_client()
    n, exc = await consume(await client.chat.completions.create(model=proxy_run.group("cut"), messages=MESSAGES,
                                                                stream=True))
    assert n == STREAM_CHUNKS and exc is not None
    [rec] = await proxy_run.records("cut", 1)
    assert calls_since(proxy_run.fake, before) == 1
    assert (rec["ok"], rec.get("status_code"), rec["exception_type"], rec["origin"]) == (
        False, None, "APIConnectionError", "upstream")
    await client.close()


@pytest.mark.parametrize(("name", "published"), STREAM_ENDS)
async def test_proxy_stream_ends_without_finishing(proxy_run: ProxyRun, name: str, published: tuple[str, str]) -> None:
    """The caller gets an error after the chunks, and the one attempt is published as the deployment's failure,
    never as a success or a caller's disconnect."""
    before = len(proxy_run.fake.calls)
    client = proxy_run.proxy.new_client()
    n, exc = await consume(await client.chat.completions.create(model=proxy_run.group(name), messages=MESSAGES,
                                                                stream=True))
    assert n == STREAM_CHUNKS and exc is not None
    [rec] = await proxy_run.records(name, 1)
    assert calls_since(proxy_run.fake, before) == 1
    assert (rec["ok"], rec.get("status_code"), rec["exception_type"], rec["exception_message"], rec["origin"]) == (
        False, None, *published, "upstream")
    await client.close()


async def test_proxy_stream_dies_after_a_failed_attempt(proxy_run: ProxyRun) -> None:
    """Three 500s, then the fallback's stream dies mid-answer: the request's logging object has logged a failure
    already, so no logging hook hears of the stream's; it is published all the same (`litellm/streams.py`)."""
    before = len(proxy_run.fake.calls)
    client = proxy_run.proxy.new_client()
    n, exc = await consume(await client.chat.completions.create(model=proxy_run.group("fbcut"), messages=MESSAGES,
                                                                stream=True))
    assert n == STREAM_CHUNKS and exc is not None
    got = await proxy_run.records("fbcut", 4)
    assert calls_since(proxy_run.fake, before) == 4
    dep = f"{proxy_run.group('fbcut')}-d"
    assert rows(got) == [(dep, False, 500, 0, False, "upstream"), (dep, False, 500, 1, False, "upstream"),
                         (dep, False, 500, 2, True, "upstream"), (f"{proxy_run.group('fbcut')}-to-d", False, None, 3,
                                                                  False, "upstream")]
    assert got[-1]["exception_type"] == "APIConnectionError"
    await client.close()


async def test_proxy_caller_leaves_a_stream(proxy_run: ProxyRun) -> None:
    """The caller closes the stream half-way: one attempt, published as a failure with origin "caller"."""
    before = len(proxy_run.fake.calls)
    client = proxy_run.proxy.new_client()
    stream = await client.chat.completions.create(model=proxy_run.group("slow"), messages=MESSAGES, stream=True)
    read = 0
    async for _ in stream:
        read += 1
        if read == 5:
            break
    await stream.close()
    [rec] = await proxy_run.records("slow", 1)
    assert calls_since(proxy_run.fake, before) == 1
    assert (rec["ok"], rec.get("status_code"), rec["exception_type"], rec["origin"]) == (
        False, None, "ClientDisconnected", "caller")
    await client.close()
