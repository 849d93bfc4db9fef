"""Creating the contract's topics when missing (the worker at start, `coolant publish` before sending), and
dropping a short-lived run's own topics (the demo, the benchmarks, the tests)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from coolant.topics import Topics, TopicSpec

log = logging.getLogger(__name__)


async def create_missing(specs: Iterable[TopicSpec], client_args: Mapping[str, Any]) -> dict[str, int]:
    """Create the missing topics, wait for their leaders, and return every topic's partition count.

    Existing topics keep their partition count. Creating explicitly matters: a broker that
    auto-creates topics would make a deployments topic that is not compacted.
    """
    wanted = {s.name: s for s in specs}
    admin = AIOKafkaAdminClient(**client_args)
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        missing = [NewTopic(s.name, s.partitions, 1, topic_configs=s.config) for s in wanted.values()
                   if s.name not in existing]
        if missing:
            log.info("creating topics: %s", ", ".join(t.name for t in missing))
            with contextlib.suppress(TopicAlreadyExistsError):  # another worker or publisher won the race
                await admin.create_topics(missing)
        deadline = time.monotonic() + 10.0
        while True:
            described = await admin.describe_topics(list(wanted))
            ready = all(d["error_code"] == 0 and d["partitions"] and all(p["leader"] >= 0 for p in d["partitions"])
                        for d in described)
            if ready or time.monotonic() > deadline:  # without leaders the first sends are retried noisily
                return {d["topic"]: len(d["partitions"]) for d in described}
            await asyncio.sleep(0.1)
    finally:
        await admin.close()


async def ensure_topics(
    names: Topics, client_args: Mapping[str, Any], partitions: int, extra: tuple[str, ...] = ()
) -> dict[str, int]:
    """Every topic of the contract under `names` (plus `extra`), created with `partitions` when missing."""
    specs = {s.name: s for s in names.specs(partitions)}
    for name in extra:
        specs.setdefault(name, TopicSpec(name, partitions))
    return await create_missing(specs.values(), client_args)


async def delete_topics(prefixes: Iterable[str], client_args: Mapping[str, Any]) -> list[str]:
    """Delete every topic whose name starts with one of `prefixes`; returns their names.

    For runs that made topics of their own (a prefix, an app id's changelogs): each leaves a few hundred
    partitions otherwise, and a broker that collects thousands of runs' partitions runs out of file descriptors.
    """
    prefixes = tuple(prefixes)
    admin = AIOKafkaAdminClient(**client_args)
    await admin.start()
    try:
        names = [t for t in await admin.list_topics() if t.startswith(prefixes)]
        if names:
            await admin.delete_topics(names)
        return names
    finally:
        await admin.close()
