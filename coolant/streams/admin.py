"""Creating the contract's topics when missing (the worker does it at start, idempotently)."""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from coolant.topics import Topics, TopicSpec

log = logging.getLogger(__name__)


async def ensure_topics(
    names: Topics, client_args: dict[str, Any], partitions: int, extra: tuple[str, ...] = ()
) -> dict[str, int]:
    """Create missing topics; return every topic's partition count (existing topics keep theirs)."""
    wanted = {s.name: s for s in names.specs(partitions)}
    for name in extra:
        wanted.setdefault(name, TopicSpec(name, partitions))
    admin = AIOKafkaAdminClient(**client_args)
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        missing = [NewTopic(s.name, s.partitions, 1, topic_configs=s.config) for s in wanted.values()
                   if s.name not in existing]
        if missing:
            log.info("creating topics: %s", ", ".join(t.name for t in missing))
            with contextlib.suppress(TopicAlreadyExistsError):  # another worker won the race
                await admin.create_topics(missing)
        described = await admin.describe_topics(list(wanted))
        return {d["topic"]: len(d["partitions"]) for d in described}
    finally:
        await admin.close()
