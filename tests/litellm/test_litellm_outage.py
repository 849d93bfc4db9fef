"""Kafka down: the gateway's requests are unharmed, the callback's records are dropped and counted, and
publishing resumes when Kafka returns.

The broker is a private one (`scripts/kafka-local` on its own port and state dir, via tests/support/brokers.py)
that the test stops and starts; the shared broker is never touched. Providers are LiteLLM `mock_response`s.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support_litellm import MESSAGES, deployment

litellm = pytest.importorskip("litellm")

from coolant.integrations.litellm import CoolantCallback  # noqa: E402
from tests.support.brokers import LocalKafka  # noqa: E402
from tests.support.kafka import create_topics, read_json  # noqa: E402
from tests.support.waiting import wait_for  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore:.*ReadOnly.*:UserWarning")]

BUFFER = 20
PREFIX = "outage."


@pytest.fixture
def broker(tmp_path: Path, kafka_bootstrap: str) -> Iterator[LocalKafka]:
    """A private broker on ports claimed for this run (kafka_bootstrap: the shared one is up, so its jars are there
    to reuse)."""
    b = LocalKafka(tmp_path / "broker")
    b.start()
    try:
        yield b
    finally:
        with contextlib.suppress(RuntimeError):
            b.stop()


async def requests(router: Any, group: str, tag: str, n: int) -> list[float]:
    """`n` requests (each its own litellm_call_id `<tag>-<i>`); all must succeed. Their latencies in s."""
    latencies = []
    for i in range(n):
        t = time.perf_counter()
        resp = await router.acompletion(model=group, messages=MESSAGES, litellm_call_id=f"{tag}-{i}")
        latencies.append(time.perf_counter() - t)
        assert resp.choices[0].message.content == "hi"
    return latencies


async def test_kafka_down_never_reaches_the_request_path(broker: LocalKafka) -> None:
    await create_topics(broker.bootstrap, PREFIX, 1)
    group = "outage-group"
    router = litellm.Router(model_list=[deployment("d1", group, mock="hi"), deployment("d2", group, mock="hi")],
                            num_retries=0)
    cb = CoolantCallback(broker.bootstrap, topic_prefix=PREFIX, gateway="pod-o", max_buffer=BUFFER,
                         reconnect_backoff=(0.2, 1.0))
    saved = list(litellm.callbacks)
    litellm.callbacks = [cb]
    try:
        up = await requests(router, group, "before", 20)

        async def handled(n: int) -> bool:  # success hooks run on LiteLLM's logging worker, after the response
            s = cb.stats
            return s.published + s.dropped >= n

        await wait_for(lambda: handled(20), "the callback to handle 20 attempts", 20, 0.05)
        await asyncio.to_thread(cb.flush, 10.0)
        assert cb.publisher.stats.sent == 20 and cb.stats.dropped == 0

        await asyncio.to_thread(broker.stop)  # off the event loop, which the gateway keeps running
        down = await requests(router, group, "down", 100)
        await wait_for(lambda: handled(120), "the callback to handle 120 attempts", 20, 0.05)
        pub = cb.publisher.stats
        assert cb.stats.errors == 0
        assert cb.stats.dropped >= 100 - BUFFER, (cb.stats, pub)  # publish() said no: buffer full, Kafka away
        assert pub.dropped_full + pub.dropped_unavailable == cb.stats.dropped
        assert pub.buffered <= BUFFER
        # the request path did not notice: same latency as with Kafka up (generous bound for a busy machine)
        assert statistics.median(down) < max(3 * statistics.median(up), 0.05), (statistics.median(up),
                                                                                 statistics.median(down))
        assert max(down) < 1.0
        print(f"Kafka down: 100 requests ok, median {statistics.median(down) * 1000:.1f} ms (up: "
              f"{statistics.median(up) * 1000:.1f} ms); callback {cb.stats}; publisher {pub}")

        await asyncio.to_thread(broker.start)

        async def reconnected() -> bool:
            await asyncio.to_thread(cb.flush, 1.0)  # also cuts the publisher's reconnect delay short
            return bool(cb.publisher.connected and cb.publisher.stats.buffered == 0)

        await wait_for(reconnected, "the publisher to reconnect and send what it kept", 60, 0.2, broker.log_tail)
        after = await requests(router, group, "after", 20)
        assert len(after) == 20

        async def resumed() -> bool:
            await asyncio.to_thread(cb.flush, 2.0)
            ids = {r["event_id"].split(":")[0] for r in await read_json(broker.bootstrap, PREFIX + "outcomes")}
            return {f"after-{i}" for i in range(20)} <= ids

        await wait_for(resumed, "the records published after the broker returned", 90, 0.5, broker.log_tail)
        got = await read_json(broker.bootstrap, PREFIX + "outcomes")
        by_tag: dict[str, set[str]] = {"before": set(), "down": set(), "after": set()}
        for rec in got:
            call = rec["event_id"].split(":")[0]
            by_tag[call.split("-")[0]].add(call)
        assert len(by_tag["before"]) == 20 and len(by_tag["after"]) == 20
        # what was buffered when the buffer filled was kept and sent after the reconnect; the rest was dropped
        assert len(by_tag["down"]) <= BUFFER
    finally:
        litellm.callbacks = saved
        litellm.logging_callback_manager.remove_callback_from_all_lists(cb)
        await cb.aclose(2.0)
