"""The cooldowns routers see right now, read back from Redis (`coolant status`, the admin API, the demo).

It reads what routers read (the LiteLLM keys), not what coolant meant to write, so cooldowns set by LiteLLM
routers themselves show up too; coolant's detail key only adds the group and reason LiteLLM's value lacks. A
router's own value is not redacted (LiteLLM keeps the provider's text), so the exception is redacted here (S1).
"""

from __future__ import annotations

import ast
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import redis.asyncio as redis_asyncio

from coolant.io.materializer import cooldown_key, cooldown_key_glob, cooldown_key_id, detail_key
from coolant.processors.redact import redact
from coolant.schemas import Cooldown, InvalidRecord, decode

_CHUNK = 500


@dataclass(frozen=True, slots=True)
class ActiveCooldown:
    deployment_id: str
    model_group: str | None
    """None when no coolant detail key exists (LiteLLM's own cooldowns, or written by another tool)."""
    reason: str | None
    """None unless coolant's detail describes the entry in force (LiteLLM may have replaced it since)."""
    status_code: str | None
    exception: str
    started: float
    until: float
    remaining: float


def _text(raw: bytes | str) -> str:
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw


def _litellm_value(raw: bytes | str) -> Mapping[str, Any] | None:
    """As LiteLLM's `RedisCache` reads it: JSON, else a Python literal (its sync writer stores `str(dict)`)."""
    text = _text(raw)
    try:
        value = json.loads(text)
    except ValueError:
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None
    return value if isinstance(value, dict) else None


def _number(v: Any) -> float | None:
    """A finite number, else None: a stored value may be anything (an int of 400 digits, NaN, Infinity)."""
    if not isinstance(v, int | float) or isinstance(v, bool):
        return None
    try:
        x = float(v)
    except OverflowError:
        return None
    return x if math.isfinite(x) else None


def decoded_cooldown(raw: bytes | str | None) -> Cooldown | None:
    """A detail key's value as a cooldown record; None when absent or not a valid one (a router's own key)."""
    if raw is None:
        return None
    try:
        record = decode(raw)
    except InvalidRecord:
        return None
    return record if isinstance(record, Cooldown) else None


def value_end(value: Mapping[str, Any]) -> float | None:
    """When a LiteLLM cooldown value ends (`timestamp + cooldown_time`); None when LiteLLM cannot read it."""
    started, duration = _number(value.get("timestamp")), _number(value.get("cooldown_time"))
    return None if started is None or duration is None else started + duration


def _one(deployment_id: str, value: Mapping[str, Any], detail: Cooldown | None, now: float) -> ActiveCooldown | None:
    until = value_end(value)
    if until is None:
        return None  # LiteLLM cannot read it either
    if until - now <= 0:
        return None  # a router no longer sees it, whatever the key's TTL says
    started, duration = float(value["timestamp"]), float(value["cooldown_time"])
    status = value.get("status_code")
    exception = value.get("exception_received")
    reason = None
    if detail is not None and float(detail.ts) == started and float(detail.cooldown_time) == duration:
        reason = detail.reason
        status = None if detail.status_code is None else str(detail.status_code)
        exception = detail.exception_type or detail.exception_received
    return ActiveCooldown(
        deployment_id=deployment_id,
        model_group=None if detail is None else detail.model_group,
        reason=reason,
        status_code=status if isinstance(status, str) else None,
        exception=redact(exception) if isinstance(exception, str) else "",
        started=started,
        until=until,
        remaining=until - now,
    )


async def cooled(client: redis_asyncio.Redis, key_prefix: str, deployment_ids: Sequence[str]) -> list[str]:
    """The given deployments a router reading this Redis sees cooled now (by the Redis server's clock)."""
    out: list[str] = []
    for i in range(0, len(deployment_ids), _CHUNK):
        chunk = deployment_ids[i : i + _CHUNK]
        values = await client.mget([cooldown_key(key_prefix, d) for d in chunk])
        sec, usec = await client.time()
        now = sec + usec / 1_000_000
        for deployment_id, raw in zip(chunk, values, strict=True):
            value = None if raw is None else _litellm_value(raw)
            end = None if value is None else value_end(value)
            if end is not None and end > now:
                out.append(deployment_id)
    return out


async def active_cooldowns(client: redis_asyncio.Redis, key_prefix: str = "") -> list[ActiveCooldown]:
    """Every cooldown a router reading this Redis would honour now, longest remaining first.

    "Now" is the Redis server's clock, the same one the materializer judges by.
    """
    keys = [_text(k) async for k in client.scan_iter(match=cooldown_key_glob(key_prefix), count=_CHUNK)]
    ids = [d for k in keys if (d := cooldown_key_id(key_prefix, k)) is not None]
    out: list[ActiveCooldown] = []
    for i in range(0, len(ids), _CHUNK):
        chunk = ids[i : i + _CHUNK]
        values = await client.mget([cooldown_key(key_prefix, d) for d in chunk])
        details = await client.mget([detail_key(key_prefix, d) for d in chunk])
        sec, usec = await client.time()
        now = sec + usec / 1_000_000
        for deployment_id, raw, detail in zip(chunk, values, details, strict=True):
            value = None if raw is None else _litellm_value(raw)
            if value is not None and (cd := _one(deployment_id, value, decoded_cooldown(detail), now)) is not None:
                out.append(cd)
    out.sort(key=lambda c: (-c.remaining, c.deployment_id))
    return out
