"""The worker's Kafka connection, resolved once: secrets read, the TLS context built, arguments checked.

`coolant worker` resolves it before anything connects (an unset variable or an unreadable CA file is a
configuration error, exit 2); the topic admin, the Faust app (`faust/app.py`) and the registry's consumer all
take it from here, so a secret is read, and a certificate loaded, exactly once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from coolant.config.runtime import KafkaSettings
from coolant.io.connect import kafka_client_args


@dataclass(frozen=True, slots=True)
class Connections:
    """aiokafka's connection arguments (`bootstrap_servers`, security settings, resolved secrets)."""

    client_args: Mapping[str, Any] = field(repr=False)
    """Kept out of repr: it holds the SASL password."""

    @classmethod
    def resolve(cls, kafka: KafkaSettings) -> Connections:
        return cls(MappingProxyType(kafka_client_args(kafka)))

    @property
    def bootstrap_servers(self) -> str:
        return str(self.client_args["bootstrap_servers"])

    def kafka_args(self) -> dict[str, Any]:
        """A copy for a client's keyword arguments."""
        return dict(self.client_args)
