"""Faust's producer, each topic tracked by the Kafka client's metadata before its first send, and a one-line
account of its unacknowledged batches for the stall log.

aiokafka refreshes metadata for all topics while it tracks none, and only for the tracked ones after that;
Faust's topic declarations refresh with nothing tracked, so the producer sends to topics it knows but does not
track. The first topic it did track (one missing from the last refresh, e.g. a changelog topic created just
before it) made the next refresh drop every other topic from the producer's metadata; a batch waiting for such a
topic then had no partition leader, and the refreshes its sender asked for never brought the topic back: it
waited for Faust's producer request timeout (20 minutes), and so did Faust's commit (`producer.flush()`) and any
lane awaiting a send to that topic (issue 26's stall). `TrackedProducer` registers each topic
(`client.add_topic`) before its first send, reading the client's tracked set (`_topics`); `producer_state` reads
the accumulator's batches (`_message_accumulator`, `_batches`, `_pending_batches`, `_ctime`).
"""

from __future__ import annotations

import time
from typing import Any

from faust.transport.drivers import aiokafka as faust_aiokafka


class TrackedProducer(faust_aiokafka.Producer):  # type: ignore[misc,unused-ignore]  # faust is untyped
    """Faust's producer, each topic tracked by the Kafka client's metadata before its first send, so
    that no metadata refresh can drop a topic with batches waiting for it."""

    async def send(self, topic: str, *args: Any, **kwargs: Any) -> Any:
        client = self._ensure_producer().client
        if topic not in client._topics:
            client.add_topic(topic)  # (asks for a refresh that includes it; the send waits for one if it must)
        return await super().send(topic, *args, **kwargs)


def producer_state(app: Any) -> str:
    """One line on the Kafka producer, for the stall log: the partitions with batches not yet acknowledged by the
    broker (queued or in flight, the oldest's age, whether the producer knows the partition's leader), and how
    many topics its metadata tracks and knows."""
    producer = getattr(app.producer, "_producer", None)
    if producer is None:
        return "producer: not started"
    client = producer.client
    cluster = client.cluster
    accumulator = producer._message_accumulator
    now = time.monotonic()
    waiting: dict[Any, list[float]] = {}
    for tp, batches in accumulator._batches.items():
        waiting.setdefault(tp, []).extend(now - b._ctime for b in batches)
    in_flight = {b.tp for b in accumulator._pending_batches}
    for batch in accumulator._pending_batches:
        waiting.setdefault(batch.tp, []).append(now - batch._ctime)
    parts = []
    for tp, ages in sorted(waiting.items(), key=lambda item: -max(item[1]))[:8]:
        leader = cluster.leader_for_partition(tp)
        parts.append(f"{tp.topic}[{tp.partition}] {len(ages)} batch(es), oldest {max(ages):.1f} s"
                     f"{', in flight' if tp in in_flight else ''}"
                     f"{', leader unknown' if leader is None or leader == -1 else ''}"
                     f"{', topic not tracked' if tp.topic not in client._topics else ''}")
    return (f"producer: {len(waiting)} partition(s) with unacknowledged batches"
            f"{': ' + '; '.join(parts) if parts else ''}; metadata tracks {len(client._topics)} topic(s), knows "
            f"{len(cluster.topics())}")
