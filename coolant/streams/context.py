"""What every room of the live shell is handed: the app, the worker's options and connection, the shell's own
topics, its dead letters and its problem list. Built once by the composer (`app.py`), frozen; no room reaches
back into another through it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from coolant.streams.connections import Connections
from coolant.streams.deadletter import DeadLetters
from coolant.streams.options import WorkerOptions
from coolant.topics import Topics

RAW: dict[str, Any] = {"key_serializer": "raw", "value_serializer": "raw"}
"""Every topic carries raw bytes: the shell decodes (and dead-letters) itself rather than let Faust raise a decode
error inside an agent."""


@dataclass(frozen=True, slots=True)
class ShellTopics:
    """The Faust topics the shell reads or writes besides each decider's own."""

    outcomes: Any
    health: Any
    deadletter: Any
    health_state: Any
    transitions: Any

    @classmethod
    def declare(cls, app: Any, names: Topics, partitions: int) -> ShellTopics:
        def topic(name: str, n: int = partitions) -> Any:
            return app.topic(name, partitions=n, **RAW)

        return cls(topic(names.outcomes), topic(names.health), topic(names.deadletter, 1),
                   topic(names.health_state), topic(names.health_transitions))


@dataclass(frozen=True, slots=True)
class Context:
    """The shell's shared collaborators (Quix's `ProcessingContext`)."""

    app: Any
    """The Faust app (coolant/streams/faust/app.py)."""
    names: Topics
    opts: WorkerOptions
    connections: Connections
    topics: ShellTopics
    deadletters: DeadLetters
    problems: dict[str, str]
    """What keeps this worker from doing its job right now (e.g. "redis": why), shown by /healthz; the sinks
    write it, the web room reads it."""
