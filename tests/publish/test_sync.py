"""`SyncPublisher` from plain threads (no event loop in sight), against a real broker and a dead one."""

from __future__ import annotations

import asyncio
import concurrent.futures
import socket
import threading
import time

from coolant.publish import PublisherStats, SyncPublisher
from coolant.schemas import encode
from coolant.topics import Topics
from tests.publish.conftest import HANG_GUARD_S, consume, outcome


def test_many_threads_publish_concurrently(kafka_bootstrap: str, prefix: str) -> None:
    pub = SyncPublisher(kafka_bootstrap, topic_prefix=prefix, max_buffer=100_000)
    pub.start()
    results: list[list[bool]] = [[] for _ in range(4)]

    def worker(n: int) -> None:
        for i in range(250):
            results[n].append(pub.publish(outcome(n * 1000 + i, deployment=f"dep-{n}")))
            if i % 50 == 0:
                time.sleep(0.01)  # let the sender go idle now and then: wake-ups from other threads

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(all(r) for r in results)
    pub.flush(15)
    assert pub.stats == PublisherStats(sent=1000)
    loop_thread = pub._thread
    pub.close()
    assert loop_thread is not None and not loop_thread.is_alive()
    pub.close()  # idempotent
    assert pub.publish(outcome(1)) is False

    got = asyncio.run(consume(kafka_bootstrap, [Topics(prefix).outcomes], 1000))
    assert len(got) == 1000
    for n in range(4):
        mine = sorted((m for m in got if m.key == f"dep-{n}".encode()), key=lambda m: m.offset)
        assert [m.value for m in mine] == [encode(outcome(n * 1000 + i, deployment=f"dep-{n}")) for i in range(250)]


def test_dead_broker_publish_stays_fast_and_close_is_bounded() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with SyncPublisher(f"127.0.0.1:{port}", max_buffer=500, reconnect_backoff=(0.05, 0.5)) as pub:
        # Hold the publisher's loop thread still: a publish() that waited on it for anything would never return.
        loop = pub._loop
        assert loop is not None
        held, release = threading.Event(), threading.Event()

        def hold() -> None:
            held.set()
            release.wait()

        loop.call_soon_threadsafe(hold)
        assert held.wait(30), "the publisher's loop never ran the hold"
        with concurrent.futures.ThreadPoolExecutor(1) as calls:
            t0 = time.perf_counter()
            done = calls.submit(lambda: sum(pub.publish(outcome(i)) for i in range(1000)))
            try:
                accepted = done.result(30)  # a hang guard: publish() returns while its loop cannot run at all
            finally:
                release.set()
            took = time.perf_counter() - t0
        print(f"\nSyncPublisher, Kafka down, loop held: 1000 publish() calls took {took * 1000:.2f} ms")
        assert accepted == 500
        assert pub.stats == PublisherStats(dropped_unavailable=500, buffered=500)
        # No broker ever listens on the port, so a flush or close that ignored its timeout would never
        # return: run them on a thread and treat a result missing after the hang guard as the failure.
        t0 = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(1) as closing:
            closing.submit(lambda: (pub.flush(0.2), pub.close(0.3))).result(HANG_GUARD_S)
        print(f"flush(0.2) + close(0.3) with no broker returned after {time.monotonic() - t0:.2f} s")
    assert pub.stats == PublisherStats(dropped_unavailable=1000)
    assert not pub.connected


def test_close_without_start_counts_the_buffer_as_unsent() -> None:
    pub = SyncPublisher("127.0.0.1:1")
    assert pub.publish(outcome(1))
    pub.flush()  # not started: returns at once
    pub.close()
    assert pub.stats == PublisherStats(dropped_unavailable=1)
