"""`coolant demo --minutes 1` as a newcomer runs it, with output to a pipe (a log, CI) at 80 columns.

Its own Redis (the harness's) holds a cooldown left by an earlier worker for one of the demo's deployment ids,
in force for an hour: the demo must not take it for its own (it would never expire, and the demo would fail).
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson
import pytest
import redis.asyncio as redis_asyncio
from aiokafka.admin import AIOKafkaAdminClient

from tests.support.waiting import wait_for
from tests.support.worker import Case

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]  # a real-time demo through a pipe


async def test_demo_one_minute_through_a_pipe(case: Case, kafka_bootstrap: str) -> None:
    server = case.redis_server()
    client = redis_asyncio.from_url(server.url)
    try:
        stale = {"exception_received": "litellm.RateLimitError: earlier run", "status_code": "429",
                 "timestamp": time.time(), "cooldown_time": 3600}
        await client.set("deployment:gemini-flash-free-1:cooldown", orjson.dumps(stale), ex=3600)
    finally:
        await client.aclose()
    tmp = Path(tempfile.gettempdir())
    before = set(tmp.glob("coolant-demo-*"))
    env = {**os.environ, "COLUMNS": "80", "TERM": "dumb"}
    proc = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "coolant.cli", "demo", "--minutes", "1", "--bootstrap", kafka_bootstrap,
         "--redis-url", server.url],
        capture_output=True, text=True, env=env, timeout=600, check=False,
    )
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    progress = re.findall(r"^\[\s*\d+ s\] .*records published", out, re.MULTILINE)
    assert len(progress) >= 5, f"expected a progress line every few seconds:\n{out}"
    assert re.search(r"^published \d+ outcome records", out, re.MULTILINE), f"summary not on its own line:\n{out}"
    assert "gemini-flash-free-2" in out, "the broken key's id, whole, in the feed table"
    assert "…" not in out, f"something was cut:\n{out}"
    assert set(tmp.glob("coolant-demo-*")) == before, "the demo left its working directory behind"
    run = re.search(r"topics (demo-[0-9a-f]+)\.\*", out)
    assert run, f"the demo names its topics:\n{out}"

    async def topics_gone() -> bool:
        admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
        await admin.start()
        try:
            return not [t for t in await admin.list_topics() if t.startswith(run[1])]
        finally:
            await admin.close()

    await wait_for(topics_gone, f"the demo's topics ({run[1]}*) to be deleted", timeout=30)
