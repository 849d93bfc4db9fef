"""Prometheus metrics of the worker. The labels reuse the spec's words (dispositions, reasons)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

REGISTRY = CollectorRegistry(auto_describe=True)

RECORDS = Counter(
    "coolant_records_total",
    "Input records by topic and what the policy did with them (counted, late, duplicate, skip reasons, cooled).",
    ["topic", "disposition"],
    registry=REGISTRY,
)
COOLDOWNS = Counter(
    "coolant_cooldowns_total", "Cooldowns emitted to the cooldowns topic.", ["model_group", "reason"],
    registry=REGISTRY,
)
SHADOW_RECORDS = Counter(
    "coolant_shadow_records_total", "Input records as the shadow (candidate) policy disposed of them.",
    ["topic", "disposition"], registry=REGISTRY,
)
SHADOW_COOLDOWNS = Counter(
    "coolant_shadow_cooldowns_total", "Cooldowns the shadow policy emitted to the shadow topic (never Redis).",
    ["model_group", "reason"], registry=REGISTRY,
)
SUPPRESSED = Counter(
    "coolant_cooldowns_suppressed_total", "Cooldowns held back by max_ejection_percent (X3).",
    ["model_group", "reason"], registry=REGISTRY,
)
DEADLETTERS = Counter(
    "coolant_deadletter_total", "Invalid records sent to the dead-letter topic.", ["topic"], registry=REGISTRY
)
REDIS_WRITES = Counter(
    "coolant_redis_writes_total", "Materializer writes: written, or skipped (expired / a later entry exists).",
    ["kind", "result"], registry=REGISTRY,
)
REDIS_ERRORS = Counter(
    "coolant_redis_errors_total", "Redis errors; the write is retried and the record not acknowledged.",
    registry=REGISTRY,
)
REGISTRY_UPDATES = Counter(
    "coolant_registry_updates_total", "Deployment records applied to the live registry.", ["action"],
    registry=REGISTRY,
)
MATERIALIZE_LAG = Histogram(
    "coolant_materialize_lag_seconds", "Wall time from a cooldown's start (its event time) to its Redis write.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 60),
    registry=REGISTRY,
)
