"""Prometheus metrics of the worker. The labels reuse the spec's words (dispositions, reasons)."""

from __future__ import annotations

import functools
from time import monotonic
from typing import Any

from faust.sensors.prometheus import FaustMetrics, PrometheusMonitor
from faust.types import TP
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from coolant.schemas import Cooldown

REGISTRY = CollectorRegistry(auto_describe=True)

RECORDS = Counter(
    "coolant_records_total",
    "Input records by topic and what became of them (counted, late, duplicate, invalid, skip reasons, cooled).",
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
MISROUTED = Counter(
    "coolant_misrouted_total",
    "Input records that arrived on another partition than murmur2 of their deployment id gives, by publisher "
    "(`gateway`, or `prober`): their producer's partitioner is not Kafka's default (streams/routing.py).",
    ["topic", "gateway"], registry=REGISTRY,
)
DEADLETTERS = Counter(
    "coolant_deadletter_total", "Invalid records sent to the dead-letter topic.", ["topic"], registry=REGISTRY
)
REDIS_WRITES = Counter(
    "coolant_redis_writes_total", "Materializer writes: written, skipped (expired / a later entry exists), or "
    "\"written early\" (this worker wrote the cooldown when it decided it: see coolant_redis_early_writes_total).",
    ["kind", "result"], registry=REGISTRY,
)
EARLY_WRITES = Counter(
    "coolant_redis_early_writes_total", "Cooldowns the deciding worker wrote to Redis as soon as they were durable, "
    "by result: written, skipped (expired / a later entry exists), failed (Redis; the materializer retries), "
    "dropped (too many in flight; the materializer writes it).",
    ["result"], registry=REGISTRY,
)
REDIS_REASSERTED = Counter(
    "coolant_redis_reasserted_total", "Cooldowns in force written again by the Redis repair (docs/input-bounds.md "
    "K2), by why (start, redis restarted, redis reachable again, periodic) and result (written, skipped).",
    ["why", "result"], registry=REGISTRY,
)
REDIS_ERRORS = Counter(
    "coolant_redis_errors_total", "Redis errors; the write is retried and the record not acknowledged.",
    registry=REGISTRY,
)
ADMIN_THROTTLED = Counter(
    "coolant_admin_throttled_total", "Admin API writes refused (429) by the per-worker rate limit.", registry=REGISTRY,
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
RELEASES = Counter(
    "coolant_releases_total", "Cooldowns released early by healthy probes (RC4), in Redis and the pods.",
    ["model_group"], registry=REGISTRY,
)
HEALTH_TRANSITIONS = Counter(
    "coolant_health_transitions_total",
    "Health flips published to the health transitions topic (a deployment's first probe included).",
    ["model_group", "healthy"], registry=REGISTRY,
)
LITELLM_COOLED_DOWN = Counter(
    "litellm_deployment_cooled_down",
    "LLM Deployment Analytics - Number of times a deployment has been cooled down by LiteLLM load balancing logic. "
    "exception_status is the status of the exception that caused the deployment to be cooled down",
    ["litellm_model_name", "model_id", "api_base", "api_provider", "exception_status"],
    registry=REGISTRY,
)
"""LiteLLM 1.110.2's own counter, same name, help and labels, so dashboards built on it keep working.

LiteLLM fills `litellm_model_name` with the deployment's `model_name` (the model group), as done here; coolant does
not know `api_base` or `api_provider` (the registry holds no litellm_params), so they are empty."""
CONSUMER_LAG = Gauge(
    "coolant_consumer_lag",
    "Records of an input partition this worker is assigned that are not committed yet (end offset - committed offset).",
    ["topic", "partition"], registry=REGISTRY,
)
REDIS_WRITE_SECONDS = Histogram(
    "coolant_redis_write_seconds", "Duration of one materializer write to Redis (one script call; retries apart).",
    ["kind"], buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
    registry=REGISTRY,
)
COOLDOWN_STAGES = ("fetched", "queued", "decided", "durable", "redis")
"""Where a cooldown's time from publish to Redis goes (`COOLDOWN_STAGE_SECONDS`): three stages in order,
fetched: the input record's Kafka timestamp (its publisher's clock) -> handed to the decider's lane;
queued: -> its batch taken (the decider was busy with the batch before, or gathering this one);
decided: -> its cooldown decided (the batch's decode and the records before it);
then two, each from the decision, side by side:
durable: -> the cooldown record acknowledged by the broker (the record's acknowledgement waits for it);
redis: -> the early Redis write returned (cooldowns written early only): publish -> Redis is the first three and
this one."""
COOLDOWN_STAGE_SECONDS = Histogram(
    "coolant_cooldown_stage_seconds",
    "Time each enforced cooldown spent in each stage from its input record's publish to its early Redis write "
    "(fetched, queued, decided, durable, redis: see metrics.COOLDOWN_STAGES); measured per cooldown, not per record.",
    ["stage"],
    buckets=(0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15,
             0.25, 0.5, 1, 2.5),
    registry=REGISTRY,
)
STAGE = {stage: COOLDOWN_STAGE_SECONDS.labels(stage) for stage in COOLDOWN_STAGES}
"""The stage histograms' children, looked up once."""
ACTIVE_COOLDOWNS = Gauge(
    "coolant_active_cooldowns",
    "Cooldowns in force in Redis by model group (\"\" = a cooldown coolant did not write), as routers see them; "
    "every materializing worker reports the whole fleet, so aggregate with max, not sum.",
    ["model_group"], registry=REGISTRY,
)


def cooled_down(cd: Cooldown) -> None:
    """Count an emitted cooldown in LiteLLM's counter; its group is already the registry's (R3)."""
    LITELLM_COOLED_DOWN.labels(
        cd.model_group,
        cd.deployment_id,
        "",
        "",
        "" if cd.status_code is None else str(cd.status_code),
    ).inc()
STALLED = Gauge(
    "coolant_stalled",
    "1 while input records wait and this worker has decided none for the stall threshold (see /healthz), else 0.",
    registry=REGISTRY,
)
HELD_RESUMES = Counter(
    "coolant_held_partition_resumes_total",
    "Stream partitions whose resume waited for their seek to the committed offset (the failover guard).",
    registry=REGISTRY,
)
RECOVERY_REWINDS = Counter(
    "coolant_recovery_rewinds_total",
    "Changelog partitions read again because table recovery stood still with the fetch past it (the recovery watch).",
    registry=REGISTRY,
)


@functools.cache
def faust_metrics() -> FaustMetrics:
    """Faust's own sensor metrics (`coolant_faust_*`), registered once per process however many apps it builds."""
    return FaustMetrics.create(REGISTRY, "coolant_faust")


class Monitor(PrometheusMonitor):  # type: ignore[misc,unused-ignore]  # faust is untyped
    """Faust's Prometheus sensor, minus a per-record cost: Faust's fetch loop calls `track_tp_end_offset` for
    every record it fetches, with the partition's high-water mark, which changes once per fetch at most; each call
    looked the gauge up by its labels (7% of a busy worker in issue 11's profile). Unchanged offsets are skipped."""

    def track_tp_end_offset(self, tp: Any, offset: int) -> None:
        if self.tp_end_offsets.get(tp) != offset:
            super().track_tp_end_offset(tp, offset)

    def lane_took(self, batch: list[Any]) -> None:
        """An input lane began deciding `batch`: what Faust's streams report with `on_stream_event_in`. Faust's
        consumer checks, for every partition it fetched records of, that a stream took one since (else the ERROR
        "Stream has not started processing"): the lanes bypass Faust's streams, so without this the check fired
        on every partition with a lag, under any load, while the lanes decided all of it."""
        now = monotonic()
        inbound = self.stream_inbound_time
        for topic, partition in {(m.topic, m.partition) for m in batch}:
            inbound[TP(topic, partition)] = now
