"""`CoolantCallback` on a real LiteLLM 1.110.2 Router: the records it puts on Kafka for each kind of attempt.

The providers are a local fake of the OpenAI API (`tests.support.upstream.FakeOpenAI`), so LiteLLM parses real HTTP
errors (status, headers, body) into its own exception classes; nothing leaves 127.0.0.1. Records are read back
from the real broker.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from support_litellm import MESSAGES, deployment

from tests.support.upstream import BAD_KEY, LONG_MESSAGE, RETRY_AFTER, FakeOpenAI

litellm = pytest.importorskip("litellm")

from coolant.integrations.litellm import CoolantCallback, build_outcome  # noqa: E402
from coolant.schemas import OUTCOME_SCHEMA  # noqa: E402
from tests.support.kafka import create_topics, delete_topics, read_json  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore:.*ReadOnly.*:UserWarning")]


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
async def prefix(kafka_bootstrap: str) -> AsyncIterator[str]:
    p = f"lt-{uuid.uuid4().hex[:10]}."
    await create_topics(kafka_bootstrap, p, 1)
    try:
        yield p
    finally:
        await delete_topics(kafka_bootstrap, [p])


@pytest.fixture
async def callback(kafka_bootstrap: str, prefix: str) -> AsyncIterator[CoolantCallback]:
    """The callback as the only LiteLLM callback of the process, for one test."""
    cb = CoolantCallback(kafka_bootstrap, topic_prefix=prefix, gateway="pod-test")
    saved = list(litellm.callbacks)
    litellm.callbacks = [cb]
    try:
        yield cb
    finally:
        litellm.callbacks = saved
        litellm.logging_callback_manager.remove_callback_from_all_lists(cb)  # LiteLLM copies it to its own lists
        await cb.aclose()


async def records(cb: CoolantCallback, bootstrap: str, prefix: str, n: int,
                  timeout: float = 20.0) -> list[dict[str, Any]]:
    """The outcome records on the topic once `n` are there (success hooks run after the response returns)."""
    deadline = time.monotonic() + timeout
    while True:
        await asyncio.to_thread(cb.flush, 5.0)
        got = await read_json(bootstrap, prefix + "outcomes")
        if len(got) >= n or time.monotonic() > deadline:
            return got
        await asyncio.sleep(0.2)


def group() -> str:
    return f"g-{uuid.uuid4().hex[:8]}"


async def fail(router: Any, model: str, **kw: Any) -> BaseException:
    with pytest.raises(Exception) as info:
        await router.acompletion(model=model, messages=MESSAGES, **kw)
    return info.value


async def test_success_record(fake: FakeOpenAI, callback: CoolantCallback, kafka_bootstrap: str, prefix: str) -> None:
    g = group()
    router = litellm.Router(model_list=[deployment("d-ok", g, fake.base("ok"))], num_retries=0)
    t0 = time.time()
    resp = await router.acompletion(model=g, messages=MESSAGES, cooldown_time=7)
    assert resp.choices[0].message.content == "ok"
    [rec] = await records(callback, kafka_bootstrap, prefix, 1)
    assert rec["schema"] == OUTCOME_SCHEMA
    assert (rec["deployment_id"], rec["model_group"], rec["ok"]) == ("d-ok", g, True)
    assert t0 <= rec["ts"] <= time.time()
    for absent in ("status_code", "exception_type", "exception_message", "retry_after"):
        assert rec.get(absent) is None
    assert rec["cooldown_time"] == 7.0  # the request kwarg
    assert (rec["attempt"], rec["final"], rec["gateway"]) == (0, True, "pod-test")
    assert 0 < rec["latency_ms"] < 10_000
    assert 1 <= len(rec["event_id"]) <= 128
    assert callback.stats.published == 1


async def test_429_with_retry_after(fake: FakeOpenAI, callback: CoolantCallback, kafka_bootstrap: str,
                                    prefix: str) -> None:
    g = group()
    router = litellm.Router(model_list=[deployment("d-rl", g, fake.base("rl")), deployment("d-ok", g, fake.base("ok"))],
                            num_retries=0)
    while True:  # until the shuffle picks the rate-limited deployment (then LiteLLM cools it natively)
        try:
            await router.acompletion(model=g, messages=MESSAGES)
        except litellm.RateLimitError:
            break
    got = await records(callback, kafka_bootstrap, prefix, 1)
    [rec] = [r for r in got if not r["ok"]]
    assert (rec["deployment_id"], rec["model_group"]) == ("d-rl", g)
    assert (rec["status_code"], rec["exception_type"], rec["retry_after"]) == (429, "RateLimitError", RETRY_AFTER)
    assert "Rate limit reached" in rec["exception_message"]
    assert rec["cooldown_time"] is None
    assert (rec["attempt"], rec["final"]) == (0, True)


@pytest.mark.parametrize(
    ("mode", "key", "status", "exc_type"),
    [("err", None, 500, "InternalServerError"), ("ok", BAD_KEY, 401, "AuthenticationError")],
    ids=["500", "401"],
)
async def test_error_records(fake: FakeOpenAI, callback: CoolantCallback, kafka_bootstrap: str, prefix: str,
                             mode: str, key: str | None, status: int, exc_type: str) -> None:
    g = group()
    extra = {"key": key} if key else {}
    router = litellm.Router(model_list=[deployment("d-bad", g, fake.base(mode), **extra)], num_retries=0)
    exc = await fail(router, g)
    assert type(exc).__name__ == exc_type
    [rec] = await records(callback, kafka_bootstrap, prefix, 1)
    assert (rec["deployment_id"], rec["ok"], rec["status_code"], rec["exception_type"]) == ("d-bad", False, status,
                                                                                            exc_type)
    assert rec["retry_after"] is None
    assert rec["exception_message"].startswith(f"litellm.{exc_type}")
    assert (rec["attempt"], rec["final"]) == (0, True)


async def test_message_is_cut_to_1024(fake: FakeOpenAI, callback: CoolantCallback, kafka_bootstrap: str,
                                      prefix: str) -> None:
    g = group()
    router = litellm.Router(model_list=[deployment("d-long", g, fake.base("long"))], num_retries=0)
    exc = await fail(router, g)
    assert len(str(exc)) > 1024 and LONG_MESSAGE[:100] in str(exc)
    [rec] = await records(callback, kafka_bootstrap, prefix, 1)
    assert len(rec["exception_message"]) == 1024
    assert rec["exception_message"] == str(exc)[:1024]


async def test_retries_are_numbered(fake: FakeOpenAI, callback: CoolantCallback, kafka_bootstrap: str,
                                    prefix: str) -> None:
    """num_retries=2 on a failing single deployment: three attempts, one record each, the last one final. The
    caller's own litellm_call_id (a proxy sets one per request) is shared by the attempts: event ids differ."""
    g = group()
    router = litellm.Router(model_list=[deployment("d-err", g, fake.base("err"))], num_retries=2, retry_after=0)
    await fail(router, g, litellm_call_id="req-123")
    got = await records(callback, kafka_bootstrap, prefix, 3)
    assert [(r["attempt"], r["final"]) for r in got] == [(0, False), (1, False), (2, True)]
    assert all(r["deployment_id"] == "d-err" and r["status_code"] == 500 for r in got)
    assert len({r["event_id"] for r in got}) == 3
    assert all(r["event_id"].startswith("req-123:") for r in got)
    assert got[0]["ts"] < got[1]["ts"] < got[2]["ts"]


async def test_fallback_hops_continue_the_numbering(fake: FakeOpenAI, callback: CoolantCallback,
                                                    kafka_bootstrap: str, prefix: str) -> None:
    """g fails twice (first try, one retry), then the fallback group h answers: attempts 0, 1, 2. LiteLLM's own
    retry index restarts at 0 on the hop; the callback counts the request's attempts instead. `final` on g's
    last failure is a forecast (LiteLLM decides the fallback after the hook): true, though h came next."""
    g, h = group(), group()
    router = litellm.Router(model_list=[deployment("d-g", g, fake.base("err")), deployment("d-h", h, fake.base("ok"))],
                            num_retries=1, retry_after=0, fallbacks=[{g: [h]}])
    resp = await router.acompletion(model=g, messages=MESSAGES)
    assert resp._hidden_params["model_id"] == "d-h"
    got = await records(callback, kafka_bootstrap, prefix, 3)
    assert [(r["deployment_id"], r["model_group"], r["ok"], r["attempt"]) for r in got] == [
        ("d-g", g, False, 0), ("d-g", g, False, 1), ("d-h", h, True, 2)]
    assert [r["final"] for r in got] == [False, True, True]


async def test_sync_router_uses_the_sync_hooks(fake: FakeOpenAI, callback: CoolantCallback, kafka_bootstrap: str,
                                               prefix: str) -> None:
    g = group()
    router = litellm.Router(model_list=[deployment("d-sync", g, fake.base("ok"), key=BAD_KEY)], num_retries=0)
    ok_router = litellm.Router(model_list=[deployment("d-sync-ok", g, fake.base("ok"))], num_retries=0)

    def run() -> None:
        with pytest.raises(litellm.AuthenticationError):
            router.completion(model=g, messages=MESSAGES)
        ok_router.completion(model=g, messages=MESSAGES)

    await asyncio.to_thread(run)
    got = sorted(await records(callback, kafka_bootstrap, prefix, 2), key=lambda r: r["ok"])
    assert [(r["deployment_id"], r["ok"], r.get("status_code")) for r in got] == [
        ("d-sync", False, 401), ("d-sync-ok", True, None)]


async def test_unrouted_calls_are_not_published(fake: FakeOpenAI, callback: CoolantCallback) -> None:
    """A plain litellm.acompletion has no deployment id or model group: not a deployment attempt."""
    await litellm.acompletion(model="openai/gpt-4o-mini", api_key="sk-good", api_base=fake.base("ok"),
                              messages=MESSAGES)
    deadline = time.monotonic() + 10
    while callback.stats.not_routed < 1 and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert callback.stats.not_routed == 1 and callback.stats.published == 0


def test_hooks_never_raise() -> None:
    """Whatever LiteLLM hands over, the hooks return (bad input is counted, not raised)."""

    class Broken:
        def publish(self, record: object) -> bool:
            raise RuntimeError("publisher bug")

    cb = CoolantCallback(publisher=Broken(), gateway="g")
    kwargs = {"litellm_params": {"model_info": {"id": "d"}, "metadata": {"model_group": "g"}}}
    cb.log_success_event(kwargs, None, None, None)
    cb.log_failure_event(None, None, None, None)
    cb.log_failure_event({"litellm_params": "junk"}, None, object(), object())
    asyncio.run(cb.async_log_failure_event(kwargs, None, None, None))
    assert cb.stats.errors == 2 and cb.stats.not_routed == 2


def test_outside_failures_are_not_published() -> None:
    """A 404 on a response-id lookup is LiteLLM's "not the deployment's fault": no record (spec §1 scope)."""
    exc = litellm.NotFoundError("no such response", llm_provider="openai", model="gpt-4o-mini")
    kwargs = {"call_type": "aget_responses", "exception": exc,
              "litellm_params": {"model_info": {"id": "d"}, "metadata": {"model_group": "g"}}}
    sent: list[object] = []

    class Sink:
        def publish(self, record: object) -> bool:
            sent.append(record)
            return True

    cb = CoolantCallback(publisher=Sink(), gateway="g")
    cb.log_failure_event(kwargs, None, None, None)
    assert sent == [] and cb.stats.outside == 1
    kwargs["call_type"] = "acompletion"  # the same 404 on a completion is the deployment's (a missing model)
    cb.log_failure_event(kwargs, None, None, None)
    [rec] = sent
    assert (rec.status_code, rec.exception_type) == (404, "NotFoundError")  # type: ignore[attr-defined]


def test_build_outcome_reads_epoch_floats_and_dict_headers() -> None:
    class Err(Exception):
        status_code = "503"
        litellm_response_headers: ClassVar = {"Retry-After": "Fri, 15 Jan 2027 08:00:50 GMT", "retry-after-ms": "5"}

    kwargs = {"exception": Err("down"), "litellm_call_id": "c1",
              "litellm_params": {"model_info": {"id": "d"}, "metadata": {"model_group": "g"}, "cooldown_time": True}}
    rec = build_outcome(kwargs, 100.0, 100.25, ok=False, gateway="gw")
    assert (rec.ts, rec.latency_ms, rec.status_code, rec.exception_type) == (100.25, 250.0, 503, "Err")
    assert rec.retry_after == "Fri, 15 Jan 2027 08:00:50 GMT"
    assert rec.cooldown_time is None  # a YAML boolean is no duration
    assert rec.event_id.startswith("c1:") and rec.event_id == build_outcome(kwargs, 100.0, 100.25, ok=False).event_id


def test_proxy_loads_the_callback_from_its_dotted_path(tmp_path: Path) -> None:
    """What `litellm_settings: {callbacks: [...]}` does in the 1.110.2 proxy: `initialize_callbacks_on_proxy`
    (proxy/common_utils/callback_utils.py) resolves each unknown string with `get_instance_fn(value,
    config_file_path)` (proxy/types_utils/utils.py): a `<config dir>/coolant/integrations/litellm.py` file if
    one exists, else `importlib.import_module("coolant.integrations.litellm")`, then the attribute
    `coolant_callback`; `_loaded_callback_or_raise` accepts it as a CustomLogger instance."""
    from litellm.proxy.common_utils.callback_utils import _loaded_callback_or_raise
    from litellm.proxy.types_utils.utils import get_instance_fn

    from coolant.integrations.litellm import coolant_callback

    path = "coolant.integrations.litellm.coolant_callback"
    loaded = get_instance_fn(value=path, config_file_path=str(tmp_path / "config.yaml"))
    assert loaded is coolant_callback
    assert _loaded_callback_or_raise(entry=path, loaded=loaded) is coolant_callback
    assert isinstance(loaded, litellm.integrations.custom_logger.CustomLogger)
