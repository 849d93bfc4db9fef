"""The live registry (R2): the config's deployments overlaid by the compacted deployments topic.

Every worker must see every deployment record, so this is not a group agent (which would split
partitions between workers) but a plain consumer per worker reading the whole topic.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from typing import Any

from aiokafka import AIOKafkaConsumer

from coolant.config.loader import entry_from_record
from coolant.processors import Policy
from coolant.schemas import DeploymentRecord, InvalidRecord, decode
from coolant.streams import metrics

log = logging.getLogger(__name__)


class LiveRegistry:
    """Holds the current `Policy`; agents read `.policy` on every record (a plain attribute read)."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy

    def apply(self, rec: DeploymentRecord) -> None:
        registry = self.policy.registry
        if rec.deleted:
            registry = registry.remove(rec.deployment_id)
            metrics.REGISTRY_UPDATES.labels("deleted").inc()
        else:
            entry, warnings = entry_from_record(rec)
            for warning in warnings:
                log.warning("%s", warning)
            registry = registry.upsert(entry)
            metrics.REGISTRY_UPDATES.labels("upserted").inc()
        self.policy = replace(self.policy, registry=registry)

    def apply_raw(self, raw: bytes | None, where: str) -> None:
        if raw is None:  # a compaction tombstone: nothing to apply, the config entry stays
            return
        try:
            rec = decode(raw)
        except InvalidRecord as exc:
            log.warning("ignoring invalid deployment record at %s: %s", where, exc)
            return
        if isinstance(rec, DeploymentRecord):
            self.apply(rec)
        else:
            log.warning("ignoring a %s record on the deployments topic at %s", rec.schema, where)


async def follow(registry: LiveRegistry, topic: str, consumer_args: dict[str, Any]) -> None:
    """Read the deployments topic from the beginning, forever, applying each record in order."""
    while True:
        consumer = AIOKafkaConsumer(topic, group_id=None, auto_offset_reset="earliest", **consumer_args)
        try:
            await consumer.start()
            async for msg in consumer:
                registry.apply_raw(msg.value, f"{msg.topic}[{msg.partition}]@{msg.offset}")
        except asyncio.CancelledError:
            raise
        except Exception:  # the registry must keep following through broker restarts
            log.exception("deployments consumer failed; restarting in 2 s")
            await asyncio.sleep(2)
        finally:
            await consumer.stop()
