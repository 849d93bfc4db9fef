"""How a record a gateway publishes becomes a Kafka message: its topic by type (§2), its key, its value.

Pure: no I/O and no state, so the publisher's hot path and the `coolant publish` command route alike.
"""

from __future__ import annotations

import msgspec

from coolant.schemas import DeploymentRecord, Health, InvalidRecord, Outcome, decode, encode
from coolant.topics import Topics

__all__ = ["MAX_EXCEPTION_MESSAGE", "Publishable", "message_of", "route"]

MAX_EXCEPTION_MESSAGE = 1024
"""Contract §1.1: publishers truncate `exception_message` to 1,024 characters."""

Publishable = Outcome | Health | DeploymentRecord


def route(record: Publishable, topics: Topics) -> str:
    """The topic of an input record (§2): outcomes, health or deployments; TypeError for anything else."""
    kind = type(record)
    if kind is Outcome:
        return topics.outcomes
    if kind is Health:
        return topics.health
    if kind is DeploymentRecord:
        return topics.deployments
    raise TypeError(f"not an input record: {kind.__name__}")


def message_of(record: Publishable, topics: Topics, *, validate: bool = True) -> tuple[str, bytes, bytes]:
    """(topic, key, value) of one record, its `exception_message` truncated (§1.1).

    `validate` decodes the value again, as the worker will, so a record the worker would dead-letter is refused
    here instead; InvalidRecord when it is not a record a gateway may publish.
    """
    kind = type(record)
    try:
        topic = route(record, topics)
    except TypeError:
        raise InvalidRecord(f"not an outcome, health or deployment record: {kind.__name__}") from None
    if kind is not DeploymentRecord:
        message = record.exception_message  # type: ignore[union-attr]
        if message is not None and len(message) > MAX_EXCEPTION_MESSAGE:
            record = msgspec.structs.replace(record, exception_message=message[:MAX_EXCEPTION_MESSAGE])
    value = encode(record)
    if validate and type(decode(value)) is not kind:
        raise InvalidRecord(f"decodes as another record type than {kind.__name__}")
    return topic, record.deployment_id.encode(), value
