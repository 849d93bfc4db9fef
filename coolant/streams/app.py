"""The live worker, composed: the Faust app, its rooms and the boundary, wired once before the app starts.

Records flow intake -> deciders -> sinks, as in Envoy's outlier detection (monitor, detector, event logger):
- `intake.py`: input messages in batches (the lanes or Faust's agents), the rebalance fence (`fence.py`), decode
  and dead letters (`deadletter.py`), the partition check (`routing.py`), acknowledgements;
- `decider.py`: the enforced policy and an optional shadow one, each over its own changelogged state tables;
- `sinks.py`: the cooldowns and health states written to Redis, and kept there;
- `web.py` and `admin_api.py`: /livez, /healthz, /metrics and the admin API;
- `faust/`: every reach into Faust's internals (the lanes' fetch loop, the failover guards, the recovery watch).
Each room gets the same frozen `Context` (`context.py`), not this composer. No policy decision is made in the
shell: the same functions run in `coolant replay`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from coolant.config.loader import Config
from coolant.io.materializer import RedisSink
from coolant.processors import Policy
from coolant.streams import admin_api, web
from coolant.streams.connections import Connections
from coolant.streams.context import Context, ShellTopics
from coolant.streams.deadletter import DeadLetters
from coolant.streams.decider import Decider
from coolant.streams.faust import FetchTuning, build_app, install, producer_state, recovery_state
from coolant.streams.fence import Fence
from coolant.streams.intake import Intake
from coolant.streams.monitor import LAG_INTERVAL, LagReporter, StallWatch
from coolant.streams.options import WorkerOptions
from coolant.streams.sinks import Sinks, early_writes
from coolant.topics import Topics

log = logging.getLogger(__name__)

__all__ = ["Decider", "Pipeline", "WorkerOptions"]


class Pipeline:
    """One worker: the app, the intake, the enforced decider, an optional shadow decider, the sinks, the web.

    `connections`: the Kafka connection `coolant worker` resolved (`Connections.resolve`); resolved here from the
    config when not given (an in-process app, e.g. a test's).
    """

    def __init__(
        self, cfg: Config, opts: WorkerOptions, sink: RedisSink | None = None, shadow_policy: Policy | None = None,
        *, connections: Connections | None = None,
    ) -> None:
        self.cfg = cfg
        self.opts = opts
        self.names = names = Topics(cfg.runtime.topic_prefix)
        self.sink = sink
        connections = connections or Connections.resolve(cfg.runtime.kafka)
        self.app = app = build_app(opts, connections)
        app.before_stop = self.drain
        topics = ShellTopics.declare(app, names, opts.partitions)
        self.ctx = ctx = Context(
            app=app, names=names, opts=opts, connections=connections, topics=topics,
            deadletters=DeadLetters(topics.deadletter, keep_raw=opts.keep_raw_deadletters), problems={},
        )
        self.early = None if sink is None else early_writes(sink)
        self.enforced = Decider(ctx, cfg.policy, shadow=False, early=self.early)
        self.shadow = None if shadow_policy is None else Decider(ctx, shadow_policy, shadow=True)
        self.deciders = [self.enforced] if self.shadow is None else [self.enforced, self.shadow]
        self.fence = Fence(app, shutdown_timeout=opts.shutdown_timeout, rebalance_timeout=opts.rebalance_timeout)
        self.stall = StallWatch(diagnose=self.diagnosis)
        self.intake = Intake(ctx, self.fence, self.deciders, self.stall)
        # the input lanes and the failover guards faust 0.15.3 needs (coolant/streams/faust/)
        self.agents_because = install(
            app, self.intake.lanes, FetchTuning(opts.fetch_max_wait_ms, opts.fetch_min_bytes),
            use_lanes=opts.intake == "lanes", allow_untested=opts.allow_untested_faust,
        )
        """Why Faust's agents decide instead of the lanes (logged once the worker has started), or None."""
        self.lanes_on = self.agents_because is None
        self.intake.start(self.lanes_on)
        inputs = (names.outcomes, names.health)
        app.timer(LAG_INTERVAL, name="consumer-lag")(LagReporter(app, self.stall.waiting, inputs).run)
        if sink is not None:  # LiteLLM's health map holds at most UNKNOWN_MAX ids the registry does not know
            registry = self.enforced.registry
            sink.health_map.known = lambda dep: registry.policy.registry.get(dep) is not None
            history = self.enforced.history
            assert history is not None
            sinks = Sinks(ctx, sink, self.early)
            sinks.start(self.enforced.cooldowns, history.values)
            self.enforced.release = sinks.released
        self.admin = admin_api.AdminApi(
            self.enforced, app, redis=None if sink is None else sink.client, key_prefix=cfg.runtime.redis.key_prefix,
            token=opts.admin_token, write_rate=opts.admin_rate,
        )
        self.admin.register()
        web.register(ctx, self.enforced.registry, self.stall)

    def diagnosis(self) -> str:
        """What a stall (or an overdue stop) log line adds: the table recovery, the producer's unacknowledged
        batches, each lane's pending messages and where its task waits."""
        return f"{recovery_state(self.app)}; {producer_state(self.app)}; {self.intake.lanes_state()}"

    @property
    def problems(self) -> dict[str, str]:
        """What keeps this worker from doing its job right now, as /healthz shows it."""
        return self.ctx.problems

    async def drain(self) -> None:
        """Before Faust stops the consumer (SIGTERM): stop taking batches and wait (up to the shutdown timeout, in
        all) for the ones in hand to be acknowledged and the early Redis writes to be done: the commit and the
        group's leave come after, within the worker's bound on a stop (`faust.STOP_WITHIN`)."""
        self.fence.stopping = True
        until = time.monotonic() + self.opts.shutdown_timeout
        self.intake.wake()
        if await self.fence.wait_idle("shutdown", self.opts.shutdown_timeout):
            log.info("shutdown: batches in hand decided")
        if self.early is not None:  # a cooldown decided last reaches Redis now, not at the next owner's materializer
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.early.drain(), max(0.0, until - time.monotonic()))

