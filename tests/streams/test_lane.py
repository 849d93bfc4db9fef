"""`Lane`, the consumer -> decider hand-off of the fast path: batches, back-pressure, rebalance and stop, in memory."""

from __future__ import annotations

import asyncio

from coolant.streams.lane import Lane


async def test_take_hands_over_everything_pending_in_order() -> None:
    lane = Lane(fill=3, fill_within=0)
    for i in range(5):
        await lane.put(i)
    assert await lane.take() == [0, 1, 2, 3, 4]  # one batch, however many arrived
    assert len(lane) == 0
    await lane.put(5)
    assert await lane.take() == [5]


async def test_a_full_lane_holds_the_consumer_until_a_take_makes_room() -> None:
    lane = Lane(max_pending=3, fill=1, fill_within=0)
    await lane.put(0)
    await lane.put(1)
    blocked = asyncio.create_task(lane.put(2))  # the third fills it: the consumer waits
    for _ in range(3):
        await asyncio.sleep(0)  # let it run as far as it can
    assert not blocked.done() and len(lane) == 3
    assert await lane.take() == [0, 1, 2]
    await asyncio.wait_for(blocked, 5)


async def test_a_rebalance_clears_the_lane_and_frees_a_blocked_consumer() -> None:
    lane = Lane(max_pending=2, fill=1, fill_within=0)
    await lane.put("a")
    blocked = asyncio.create_task(lane.put("b"))
    await asyncio.sleep(0)
    assert not blocked.done()
    lane.clear()  # revoked: the new owner reads these from the committed offset
    await asyncio.wait_for(blocked, 5)
    assert len(lane) == 0
    await lane.put("c")
    assert await lane.take() == ["c"]


async def test_wake_lets_a_waiting_take_return_when_stopping() -> None:
    lane = Lane(fill=1, fill_within=0)
    waiting = asyncio.create_task(lane.take())
    await asyncio.sleep(0)
    assert not waiting.done()
    lane.wake()
    assert await asyncio.wait_for(waiting, 5) == []
