"""`coolant status` never crashes on a stored value (issue 17: a ts in milliseconds is the year 58886)."""

from __future__ import annotations

import io
import uuid

from redis.asyncio import Redis
from rich.console import Console

from coolant.cli.status import render
from coolant.io.cooldowns import active_cooldowns


async def test_any_stored_value_is_shown_or_skipped(redis_url: str) -> None:
    prefix = f"stest-{uuid.uuid4().hex[:10]}:"
    values: dict[str, bytes] = {
        "ms": b'{"exception_received":"x","status_code":"500","timestamp":1767225600000.0,"cooldown_time":5}',
        "huge-int": b'{"exception_received":"x","status_code":"500","timestamp":1' + b"0" * 400
                    + b',"cooldown_time":5}',
        "infinity": b'{"exception_received":"x","status_code":"500","timestamp":Infinity,"cooldown_time":5}',
        "nan": b'{"exception_received":"x","status_code":"500","timestamp":NaN,"cooldown_time":5}',
        "not-utf8": b'{"exception_received":"\xff\xfe","status_code":"500","timestamp":4102444800.0,'
                    b'"cooldown_time":5}',
        "secret": b'{"exception_received":"AKIAIOSFODNN7EXAMPLE denied","status_code":"403",'
                  b'"timestamp":4102444800.0,"cooldown_time":5}',
        "pem": b'{"exception_received":"-----BEGIN RSA PRIVATE KEY-----\\nMIIEpAIBAAKCAQEA3Tz2\\n-----END RSA PRIVATE '
               b'KEY-----","status_code":"500","timestamp":4102444800.0,"cooldown_time":5}',
        "[red]x": b'{"exception_received":"line\\nFORGED","status_code":"500","timestamp":4102444800.0,'
                  b'"cooldown_time":5}',
        "literal": b"{'exception_received': 'x', 'status_code': '500', 'timestamp': 1e400, 'cooldown_time': 5}",
    }
    client = Redis.from_url(redis_url)
    try:
        for name, value in values.items():
            await client.set(f"{prefix}deployment:{name}:cooldown", value, ex=60)
        active = await active_cooldowns(client, prefix)
        out = io.StringIO()
        render(active, Console(file=out, width=200))
    finally:
        keys = [k async for k in client.scan_iter(match=f"{prefix}*")]
        if keys:
            await client.delete(*keys)
        await client.aclose()
    shown = {c.deployment_id for c in active}
    assert shown == {"ms", "not-utf8", "secret", "pem", "[red]x"}  # non-finite numbers are unreadable to LiteLLM too
    text = out.getvalue()
    assert "out of range" in text  # the year 58886, shown as the number it is
    assert "AKIAIOSFODNN7EXAMPLE" not in text and "MIIEpAIB" not in text
    assert "MIIEpAIB" not in str([c.exception for c in active])  # what the admin API answers, too
    assert "[red]x" in text  # a cell is not read as markup
    assert "line\\nFORGED" in text and "\nFORGED" not in text  # a newline escaped: one row per cooldown
