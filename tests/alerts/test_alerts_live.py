"""`coolant alerts` on the real broker with a local webhook receiver.

The alert loop runs in-process (`Alerter`), so a test can drive its clock for suppression and read its
consumer group's committed offsets; one test runs the real CLI as a subprocess. Each test has its own
topic prefix and consumer group. Waits are polls with a deadline, never fixed sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterable
from uuid import uuid4

import orjson
import pytest
from aiokafka.admin import AIOKafkaAdminClient

from coolant.alerts.alerter import Alerter, AlertOptions
from coolant.alerts.feed import topic_names
from coolant.alerts.retry import RetryPolicy
from coolant.alerts.slack import Payload
from coolant.alerts.webhook import Webhook
from coolant.schemas import Cooldown, HealthTransition, encode
from coolant.topics import Topics
from tests.alerts.support import Receiver, cooldown, transition
from tests.support.kafka import group_lag, produce
from tests.support.records import ROOT
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    rx = Receiver()
    await rx.start()
    yield rx
    await rx.close()


async def publish(bootstrap: str, prefix: str, records: Iterable[Cooldown | HealthTransition | bytes]) -> None:
    names = Topics(prefix)
    for r in records:  # one at a time: keeps the order across the two topics
        if isinstance(r, bytes):
            await produce(bootstrap, names.cooldowns, [(b"dep-bad", r)])
        else:
            topic = names.cooldowns if isinstance(r, Cooldown) else names.health_transitions
            await produce(bootstrap, topic, [(r.deployment_id.encode(), encode(r))])


class Running:
    """An Alerter posting to `url`, as a task; `stop()` cancels it the way Ctrl-C/SIGTERM do."""

    def __init__(self, bootstrap: str, prefix: str, url: str, group: str, period: float = 300.0,
                 clock: Callable[[], float] = time.time, policy: RetryPolicy | None = None) -> None:
        self.bootstrap, self.url, self.policy = bootstrap, url, policy or RetryPolicy(base_delay=0.05)
        self.opts = AlertOptions(
            client_args={"bootstrap_servers": bootstrap}, topics=topic_names(prefix, True, True), prefix=prefix,
            group=group, suppress_period=period, from_beginning=True,
        )
        self.clock = clock
        self.task: asyncio.Task[object] | None = None

    async def __aenter__(self) -> Alerter:
        import aiohttp

        self.session = aiohttp.ClientSession()
        hook = Webhook(self.url, self.session, self.policy, timeout=5)

        async def send(payload: Payload, what: str) -> bool:
            return (await hook.deliver(payload, what)).ok

        self.alerter = Alerter(self.opts, send, self.clock)
        await asyncio.wait_for(self.alerter.open(), 30)
        self.task = asyncio.create_task(self.alerter.serve())
        await asyncio.wait_for(self.alerter.assigned.wait(), 60)
        return self.alerter

    async def __aexit__(self, *exc: object) -> None:
        assert self.task is not None
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        await self.session.close()


async def lag(bootstrap: str, group: str, prefix: str) -> int:
    total = 0
    for topic in topic_names(prefix, True, True):
        n = await group_lag(bootstrap, group, topic)
        total += n or 0
    return total


async def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        offsets = await admin.list_consumer_group_offsets(group)
    finally:
        await admin.close()
    return {tp.partition: meta.offset for tp, meta in offsets.items() if tp.topic == topic}


async def test_one_alert_per_cooldown_then_a_recovery_notice_after_until(
    kafka_bootstrap: str, prefix: str, receiver: Receiver
) -> None:
    now = time.time()
    records = [cooldown(1, "dep-a", ts=now, seconds=3), cooldown(1, "dep-b", ts=now, seconds=4)]
    group = f"g{uuid4().hex[:8]}"
    async with Running(kafka_bootstrap, prefix, receiver.url, group) as alerter:
        await publish(kafka_bootstrap, prefix, records)

        async def four_posts() -> bool:  # the receiver holds a post before the alerter hears its answer and counts it
            return len(receiver.posts) >= 4 and sum(alerter.stats.by_kind.values()) >= 4

        await wait_for(four_posts, "two cooldown alerts and two recovery notices", 60, 0.1)
        arrived = time.time()
        assert alerter.stats.by_kind == {"cooldown": 2, "recovery": 2}
    texts = receiver.texts()
    assert sorted(t.split(":")[0] for t in texts) == ["Cooldown", "Cooldown", "Recovered", "Recovered"]
    assert {t.split(" ")[1] for t in texts if t.startswith("Cooldown")} == {"dep-a", "dep-b"}
    assert arrived >= max(r.until for r in records)  # no recovery before the cooldown ended
    assert texts.index(next(t for t in texts if t.startswith("Recovered: dep-a"))) > texts.index(
        next(t for t in texts if t.startswith("Cooldown: dep-a"))
    )
    assert await lag(kafka_bootstrap, group, prefix) == 0


async def test_an_extension_delays_the_recovery_and_flapping_is_counted(
    kafka_bootstrap: str, prefix: str, receiver: Receiver
) -> None:
    offset = [0.0]
    base = time.time()

    def clock() -> float:  # wall time plus what the test adds: suppression periods pass on demand
        return time.time() + offset[0]

    group = f"g{uuid4().hex[:8]}"
    async with Running(kafka_bootstrap, prefix, receiver.url, group, 300.0,
                       clock) as alerter:
        await publish(kafka_bootstrap, prefix, [cooldown(i, "dep-a", ts=base, seconds=10_000 + i) for i in range(3)])

        async def three_records() -> bool:
            return alerter.stats.records >= 3

        await wait_for(three_records, "three cooldown records read", 60, 0.1)
        assert (len(receiver.posts), alerter.stats.suppressed) == (1, 2)
        assert len(alerter.state.recoveries) == 1 and alerter.state.recoveries["dep-a"].until == base + 10_002

        offset[0] = 301.0  # the period is over
        await publish(kafka_bootstrap, prefix, [cooldown(3, "dep-a", ts=base, seconds=10_003)])

        async def second_post() -> bool:
            return len(receiver.posts) >= 2

        await wait_for(second_post, "the alert after the suppression period", 60, 0.1)
    assert receiver.texts()[1].endswith("(2 similar alerts suppressed)")
    assert receiver.posts[1]["blocks"][1]["elements"][0]["text"] == "2 similar alerts suppressed"


async def test_health_transitions_alert_and_invalid_bytes_are_skipped(
    kafka_bootstrap: str, prefix: str, receiver: Receiver
) -> None:
    group = f"g{uuid4().hex[:8]}"
    async with Running(kafka_bootstrap, prefix, receiver.url, group) as alerter:
        await publish(kafka_bootstrap, prefix, [
            transition(1, healthy=True, previous=None),  # first probe, healthy: no news
            b"\xff not json",
            transition(2, healthy=False, previous=True),
            transition(3, healthy=True, previous=False),
        ])

        async def done() -> bool:
            return alerter.stats.records >= 4 and len(receiver.posts) >= 2

        await wait_for(done, "two health alerts", 60, 0.1)
        assert alerter.stats.invalid == 1
    assert [t.split(":")[0] for t in receiver.texts()] == ["Unhealthy", "Healthy again"]


async def test_retries_then_delivery_and_the_offset_waits_for_it(kafka_bootstrap: str, prefix: str) -> None:
    rx = Receiver(failures=[500, 429, 503], retry_after="1")
    url = await rx.start()
    group = f"g{uuid4().hex[:8]}"
    try:
        async with Running(kafka_bootstrap, prefix, url, group, 0.0) as alerter:
            await publish(kafka_bootstrap, prefix, [cooldown(1, ts=time.time(), seconds=3600)])

            async def delivered() -> bool:
                return len(rx.posts) == 1

            await wait_for(delivered, "the alert after three failed attempts", 60, 0.1)
            assert (rx.attempts, alerter.stats.sent, alerter.stats.failed) == (4, 1, 0)

            async def caught_up() -> bool:
                return await lag(kafka_bootstrap, group, prefix) == 0

            await wait_for(caught_up, "the offset committed after delivery", 30, 0.2)
    finally:
        await rx.close()


async def test_no_commit_past_an_alert_still_being_retried_and_a_restart_resumes(
    kafka_bootstrap: str, prefix: str
) -> None:
    down = Receiver(failures=[200] + [500] * 10_000)  # first alert goes through, then the webhook is down
    url = await down.start()
    group = f"g{uuid4().hex[:8]}"
    topic = Topics(prefix).cooldowns
    now = time.time()
    # one deployment, so one partition and a fixed order; period 0 so nothing is suppressed
    records = [cooldown(i, "dep-a", ts=now, seconds=3600 + i) for i in range(3)]
    try:
        async with Running(kafka_bootstrap, prefix, url, group, 0.0, policy=RetryPolicy(1000, 0.05, 0.1)):
            await publish(kafka_bootstrap, prefix, records)

            async def retrying_the_second() -> bool:
                return down.attempts >= 5

            await wait_for(retrying_the_second, "the second alert being retried", 60, 0.1)
            offsets = await committed(kafka_bootstrap, group, topic)
            assert sorted(o for o in offsets.values() if o > 0) == [1]  # past the first record only
    finally:
        await down.close()
    offsets = await committed(kafka_bootstrap, group, topic)
    assert sorted(o for o in offsets.values() if o > 0) == [1]  # still, after stopping mid-retry

    up = Receiver()
    url = await up.start()
    try:
        async with Running(kafka_bootstrap, prefix, url, group, 0.0):
            async def two_more() -> bool:
                return len(up.posts) >= 2

            await wait_for(two_more, "the two alerts not delivered before the restart", 60, 0.1)

            async def caught_up() -> bool:
                return await lag(kafka_bootstrap, group, prefix) == 0

            await wait_for(caught_up, "everything committed", 30, 0.2)
        assert [p["text"].split(" ")[1] for p in up.posts] == ["dep-a", "dep-a"]
        assert ["ev-dep-a-1" in p["blocks"][0]["text"]["text"] for p in up.posts] == [True, False]
    finally:
        await up.close()

    # a third run of the same group finds nothing new: no alert is sent twice
    again = Receiver()
    url = await again.start()
    try:
        async with Running(kafka_bootstrap, prefix, url, group, 0.0) as alerter:
            await publish(kafka_bootstrap, prefix, [cooldown(9, "dep-z", ts=now, seconds=3600)])

            async def the_new_one() -> bool:
                return len(again.posts) >= 1

            await wait_for(the_new_one, "the alert of the record published after the restart", 60, 0.1)
            assert alerter.stats.records == 1
        assert [p["text"].split(" ")[1] for p in again.posts] == ["dep-z"]
    finally:
        await again.close()


async def test_given_up_alerts_do_not_block_the_feed(kafka_bootstrap: str, prefix: str) -> None:
    rx = Receiver(always=500)
    url = await rx.start()
    group = f"g{uuid4().hex[:8]}"
    try:
        async with Running(kafka_bootstrap, prefix, url, group, 0.0, policy=RetryPolicy(2, 0.01, 0.05)) as alerter:
            await publish(kafka_bootstrap, prefix, [cooldown(i, f"dep-{i}", ts=time.time(), seconds=3600)
                                                    for i in range(3)])

            async def all_given_up() -> bool:
                return alerter.stats.failed == 3

            await wait_for(all_given_up, "three alerts given up", 60, 0.1)
            assert rx.attempts == 9

            async def caught_up() -> bool:
                return await lag(kafka_bootstrap, group, prefix) == 0

            await wait_for(caught_up, "offsets committed past the given-up alerts", 30, 0.2)
    finally:
        await rx.close()


async def test_the_cli_dry_run_prints_payloads(kafka_bootstrap: str, prefix: str) -> None:
    now = time.time()
    await publish(kafka_bootstrap, prefix, [cooldown(1, "dep-cli", ts=now, seconds=3600)])
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "coolant.cli", "alerts", "--dry-run", "--from-beginning", "--bootstrap",
        kafka_bootstrap, "--topic-prefix", prefix, "--group", f"g{uuid4().hex[:8]}",
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "COLUMNS": "200"},
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 60)
        payload = orjson.loads(line)
        await asyncio.sleep(0.5)  # (not a timing assertion: gives a wrongly exiting process time to show it)
        assert proc.returncode is None, "coolant alerts stopped by itself"
        assert payload["text"].startswith("Cooldown: dep-cli (grp-1) rate_limited, 429")
    finally:
        if proc.returncode is None:
            proc.terminate()  # SIGTERM: a clean stop with a summary
        _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, err.decode()
    assert b"Traceback" not in err
    assert b"coolant alerts: 1 records, 1 alerts sent" in err
