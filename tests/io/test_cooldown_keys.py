"""The cooldown key, spelled once (`coolant.io.materializer`): built, scanned for and read back the same way."""

from __future__ import annotations

import uuid

import pytest
from redis.asyncio import Redis

from coolant.io.materializer import cooldown_key, cooldown_key_glob, cooldown_key_id

IDS = ["dep-1", "a:b", "", "*", "x?y", "[z]", "back\\slash", "deployment:inner:cooldown"]


@pytest.mark.parametrize("prefix", ["", "ns:", "odd*[pre]?\\fix:"])
def test_an_id_survives_its_key(prefix: str) -> None:
    for deployment_id in IDS:
        assert cooldown_key_id(prefix, cooldown_key(prefix, deployment_id)) == deployment_id


def test_other_keys_name_no_deployment() -> None:
    for key in ["deployment:x:cooldownx", "ns:deployment:x:cooldown", "coolant:cooldown:x", "deployment:cooldown"]:
        assert cooldown_key_id("", key) is None, key
    assert cooldown_key_id("ns:", "deployment:x:cooldown") is None


async def test_the_glob_finds_exactly_the_prefixs_keys(redis_url: str) -> None:
    """Redis' own SCAN, with glob characters in the prefix: a neighbour's keys are never matched."""
    run = uuid.uuid4().hex[:10]
    prefix, neighbour = f"keys-{run}*[a]?:", f"keys-{run}xa!:"
    client = Redis.from_url(redis_url)
    try:
        mine = [cooldown_key(prefix, d) for d in IDS if d]
        others = [cooldown_key(neighbour, "dep-1"), f"{prefix}coolant:cooldown:dep-1", f"{prefix}deployment:dep-1"]
        for key in mine + others:
            await client.set(key, b"{}", ex=60)
        found = {k.decode() async for k in client.scan_iter(match=cooldown_key_glob(prefix), count=500)}
        assert found == set(mine)
    finally:
        keys = [k async for k in client.scan_iter(match=f"keys-{run}*")]
        if keys:
            await client.delete(*keys)
        await client.aclose()
