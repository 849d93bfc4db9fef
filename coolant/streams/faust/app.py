"""The worker's Faust app: its settings, its Kafka credentials, and the hook that drains the deciders before Faust
stops the consumer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import faust

from coolant.streams.connections import Connections
from coolant.streams.options import MAX_POLL_RECORDS, WorkerOptions


class CoolantApp(faust.App):  # type: ignore[misc,unused-ignore]  # faust is untyped
    """Faust's app, with the input lanes drained before Faust stops its consumer.

    On SIGTERM Faust stops the consumer, commits what was acknowledged and leaves the group (so the partitions
    move at once, not after the session timeout); the lanes' tasks are cancelled only later. Letting the batch
    in hand finish first (decided, states saved, acknowledged) means that commit covers everything this worker
    decided: the next owner neither skips nor repeats a record. `App.on_stop` is Faust's documented hook.
    """

    before_stop: Callable[[], Awaitable[None]] | None = None

    async def on_stop(self) -> None:
        if self.before_stop is not None:
            await self.before_stop()
        await super().on_stop()


def credentials(client_args: Mapping[str, Any]) -> Any:
    """Faust's credentials object for the aiokafka arguments `Connections` resolved (secrets and SSL context as
    they are there: nothing is read twice)."""
    protocol = client_args.get("security_protocol")
    if "sasl_mechanism" in client_args:
        return faust.SASLCredentials(
            username=client_args["sasl_plain_username"],
            password=client_args["sasl_plain_password"],
            mechanism=client_args["sasl_mechanism"],
            ssl_context=client_args.get("ssl_context") if protocol == "SASL_SSL" else None,
        )
    if protocol == "SSL":
        return faust.SSLCredentials(client_args["ssl_context"])
    return None


def build_app(opts: WorkerOptions, connections: Connections) -> CoolantApp:
    """The app with coolant's settings (Faust's defaults suit a stream processor that may lag; these suit one
    whose every record may be a cooldown due now)."""
    servers = ";".join(s.strip() for s in connections.bootstrap_servers.split(","))
    return CoolantApp(
        opts.app_id,
        broker=f"kafka://{servers}",
        broker_credentials=credentials(connections.client_args),
        store="memory://",
        datadir=opts.datadir,
        topic_partitions=opts.partitions,
        topic_replication_factor=1,
        web_port=opts.web_port,
        web_bind=opts.web_bind,
        web_host=opts.web_bind,
        consumer_auto_offset_reset="earliest",
        autodiscover=False,
        stream_wait_empty=False,
        producer_acks=-1,
        producer_linger=0.001,  # let changelog writes batch, without delaying cooldowns much
        producer_max_batch_size=1 << 20,
        broker_commit_every=10_000,
        broker_max_poll_records=MAX_POLL_RECORDS,
        broker_commit_interval=2.8,
        broker_session_timeout=opts.session_timeout,
        broker_heartbeat_interval=opts.heartbeat_interval,
        broker_rebalance_timeout=opts.rebalance_timeout,
        web_tables_enabled=False,  # Faust's /table pages would dump the raw state tables, unauthenticated
    )
