"""Three real prober processes on real Kafka and Redis against a fake upstream, one of them SIGKILLed.

What must hold (docs/probe.md):
- once per round: a deployment's upstream calls equal the number of rounds it has a health record for (no
  round probed twice), exactly; the one tolerance is +1 call for a deployment of the killed prober, the call
  it may have had in flight when it died (its record then never reached Kafka);
- every round: while membership is stable, every deployment is probed in every round; after the kill, the
  survivors' own deployments stay covered in every round, and the victim's deployments are missing only in
  the rounds between the kill and the takeover (session timeout + one heartbeat + the rebalance), then are
  probed in every round again, by the survivors;
- the health records and LiteLLM's `health_check_results` key say what the upstream answered.
"""

from __future__ import annotations

import asyncio
import math
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from pathlib import Path

import orjson
import pytest
import redis.asyncio as redis_asyncio
import yaml
from aiokafka import AIOKafkaConsumer

from coolant.probe.ownership import probe_event_id, round_of, round_start
from coolant.schemas import Health, decode
from tests.support.upstream import FakeOpenAI

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
INTERVAL = 2.0
SESSION = 6.0
DEPS = [f"d{i}" for i in range(10)]
STATUSES = {"d3": 401, "d7": 500}
KEY_ENV = "COOLANT_PROBE_TEST_KEY"


def write_config(path: Path, up: FakeOpenAI) -> None:
    model_list = []
    for dep in DEPS:
        params = {"model": f"openai/model-{dep}", "api_base": up.base(dep), "api_key": f"os.environ/{KEY_ENV}"}
        info: dict[str, object] = {"id": dep}
        if dep == "d9":
            info["mode"] = "embedding"
        model_list.append({"model_name": f"group-{dep}", "litellm_params": params, "model_info": info})
    model_list.append({"model_name": "openai/*", "litellm_params": {"model": "openai/*"}})
    path.write_text(yaml.safe_dump({"model_list": model_list}))


def round_of_record(h: Health) -> int:
    """The round a record belongs to, from its deterministic event id (ts is when the call finished)."""
    base = round_of(h.ts, INTERVAL)
    for k in (base, base - 1):
        if probe_event_id(h.deployment_id, INTERVAL, k) == h.event_id:
            return k
    raise AssertionError(f"event id of {h} matches no round")


class Fleet:
    def __init__(self, tmp: Path, config: Path, bootstrap: str, redis_url: str, tag: str) -> None:
        self.tmp, self.config, self.bootstrap, self.redis_url, self.tag = tmp, config, bootstrap, redis_url, tag
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str) -> None:
        cmd = [
            sys.executable, "-m", "coolant.cli", "probe", "--config", str(self.config),
            "--bootstrap", self.bootstrap, "--redis-url", self.redis_url, "--redis-key-prefix", f"{self.tag}:",
            "--topic-prefix", f"{self.tag}.", "--group", f"{self.tag}-probers", "--interval", str(INTERVAL),
            "--session-timeout", str(SESSION), "--timeout", "1", "--prober-id", name,
        ]
        env = {**os.environ, KEY_ENV: "sk-fleet-test-secret-0001"}
        with open(self.tmp / f"{name}.log", "wb") as log:
            self.procs[name] = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)

    def log(self, name: str) -> str:
        return (self.tmp / f"{name}.log").read_text(errors="replace")

    def assignments(self, name: str) -> list[list[str]]:
        return [orjson.loads(m.replace("'", '"')) for m in
                re.findall(r"assigned partitions=\[[^\]]*\] deployments=(\[[^\]]*\])", self.log(name))]

    def stop_all(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


async def wait_for(cond: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


async def sleep_to_mid_round() -> int:
    """Sleep to the middle of the next round; returns that round."""
    k = round_of(time.time(), INTERVAL) + 1
    await asyncio.sleep(max(0.0, round_start(k, INTERVAL) + INTERVAL / 2 - time.time()))
    return k


async def test_three_probers_once_per_round_and_takeover_after_sigkill(
    tmp_path: Path, kafka_bootstrap: str, redis_url: str, upstream: FakeOpenAI
) -> None:
    tag = f"probe-{uuid.uuid4().hex[:10]}"
    config = tmp_path / "config.yaml"
    write_config(config, upstream)
    fleet = Fleet(tmp_path, config, kafka_bootstrap, redis_url, tag)
    records: list[Health] = []
    consumer: AIOKafkaConsumer | None = None

    async def collect() -> None:
        nonlocal consumer
        consumer = AIOKafkaConsumer(f"{tag}.health", bootstrap_servers=kafka_bootstrap,
                                    auto_offset_reset="earliest", metadata_max_age_ms=1000)
        await consumer.start()
        async for msg in consumer:
            rec = decode(msg.value)
            assert isinstance(rec, Health)
            records.append(rec)

    collector = asyncio.create_task(collect())
    try:
        for name in ("p0", "p1", "p2"):
            fleet.start(name)
        # stable membership: every prober has an assignment and no rebalance happened for two rounds
        await wait_for(lambda: all(fleet.assignments(n) for n in fleet.procs), 90, "three assignments")
        snapshot = ""
        while True:
            logs = "".join(fleet.log(n) for n in fleet.procs)
            if logs.count("assigned partitions") == snapshot.count("assigned partitions") and snapshot:
                break
            snapshot = logs
            await asyncio.sleep(2 * INTERVAL + 0.5)
        steady_from = round_of(time.time(), INTERVAL) + 1
        owners = {n: fleet.assignments(n)[-1] for n in fleet.procs}
        assert sorted(d for deps in owners.values() for d in deps) == DEPS  # a partition of the fleet
        victim = max(owners, key=lambda n: len(owners[n]))
        victim_deps = set(owners[victim])
        assert victim_deps

        for _ in range(3):  # three full steady rounds
            await sleep_to_mid_round()
        kill_round = round_of(time.time(), INTERVAL)
        kill_time = time.time()
        fleet.procs[victim].send_signal(signal.SIGKILL)
        survivors = [n for n in fleet.procs if n != victim]
        before = {n: len(fleet.assignments(n)) for n in survivors}

        def taken_over() -> bool:
            return {d for n in survivors for d in (fleet.assignments(n)[-1] if len(fleet.assignments(n)) > before[n]
                                                    else [])} >= set(DEPS) and all(
                len(fleet.assignments(n)) > before[n] for n in survivors)

        await wait_for(taken_over, 60, "the survivors' takeover")
        takeover_time = time.time()
        takeover_round = round_of(takeover_time, INTERVAL)
        for _ in range(4):  # four full rounds after the takeover
            last_round = await sleep_to_mid_round()
        fleet.stop_all()  # the probers flush what they published before they exit
        assert consumer is not None
        parts = list(consumer.assignment())
        published = sum((await consumer.end_offsets(parts)).values())
        await wait_for(lambda: len(records) >= published, 30, f"the collector to read all {published} records")
    finally:
        fleet.stop_all()
        collector.cancel()
        if consumer is not None:
            await consumer.stop()

    by_dep_round: dict[tuple[str, int], list[Health]] = defaultdict(list)
    for h in records:
        by_dep_round[(h.deployment_id, round_of_record(h))].append(h)
    rounds_of = {d: {k for (dep, k) in by_dep_round if dep == d} for d in DEPS}

    # once per round: upstream calls == rounds with a record (+1 allowed only for a call lost with the victim)
    for dep in DEPS:
        extra = upstream.count(dep) - len(rounds_of[dep])
        assert extra in ((0, 1) if dep in victim_deps else (0,)), (dep, upstream.count(dep), rounds_of[dep])
        assert upstream.auth[dep] == "Bearer sk-fleet-test-secret-0001"  # os.environ/ resolved at the edge
    dup_records = {key: hs for key, hs in by_dep_round.items() if len(hs) > 1}
    assert all(len({h.event_id for h in hs}) == 1 for hs in dup_records.values())  # dedupable if any
    assert not dup_records, dup_records

    steady = range(steady_from, kill_round + 1)
    after = range(takeover_round + 1, last_round + 1)
    assert len(steady) >= 3 and len(after) >= 4
    for dep in DEPS:
        for k in [*steady, *after]:
            assert (dep, k) in by_dep_round, f"{dep} not probed in round {k} (steady {steady}, after {after})"
        missing = set(range(steady_from, last_round + 1)) - rounds_of[dep]
        if dep in victim_deps:
            assert missing <= set(range(kill_round + 1, takeover_round + 1)), (dep, missing)
            assert {by_dep_round[(dep, k)][0].prober for k in after} <= set(survivors)
        else:
            assert not missing, (dep, missing)  # survivors' own deployments never miss a round
    gap = takeover_time - kill_time
    print(f"\nvictim {victim} owned {sorted(victim_deps)}; takeover after {gap:.1f}s "
          f"(rounds {kill_round + 1}..{takeover_round} may miss); steady rounds {len(steady)}, after {len(after)}; "
          f"calls {upstream.count()}, records {len(records)}")
    # in the steady and post-takeover rounds: exactly deployments x rounds calls
    calls_in = sum(1 for (dep, k) in by_dep_round if k in steady or k in after)
    assert calls_in == len(DEPS) * (len(steady) + len(after))

    # what the records say
    for (dep, _), hs in by_dep_round.items():
        h = hs[0]
        assert h.prober in fleet.procs and h.model_group == f"group-{dep}"
        assert h.mode == ("embedding" if dep == "d9" else "chat")
        if dep in STATUSES:
            assert (h.healthy, h.status_code) == (False, STATUSES[dep])
            assert h.exception_type == {401: "AuthenticationError", 500: "InternalServerError"}[STATUSES[dep]]
            assert h.exception_message == f"upstream says {STATUSES[dep]} for {dep}"
        else:
            assert h.healthy and h.status_code is None and h.latency_ms is not None

    # LiteLLM's shared key covers the whole fleet
    client = redis_asyncio.from_url(redis_url)
    try:
        raw = await client.get(f"{tag}:health_check_results")
        ttl = await client.ttl(f"{tag}:health_check_results")
    finally:
        await client.aclose()
    assert raw is not None and 0 < ttl <= 300
    doc = orjson.loads(orjson.loads(raw))
    assert isinstance(doc, dict)
    assert sorted(e["model_id"] for e in doc["healthy_endpoints"]) == sorted(set(DEPS) - set(STATUSES))
    assert {e["model_id"]: e["exception_status"] for e in doc["unhealthy_endpoints"]} == STATUSES
    assert (doc["healthy_count"], doc["unhealthy_count"]) == (8, 2)
    assert time.time() - doc["timestamp"] < 30 and doc["checked_by"].startswith("coolant:")
    assert "sk-fleet" not in raw.decode()
    assert not math.isnan(doc["timestamp"])
