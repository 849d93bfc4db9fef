"""`coolant publish` and `coolant deployments sync` end to end against a real broker.

The functions are registered on a local typer app here, the way `coolant.cli` registers them.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import socket
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from typer.testing import CliRunner, Result

from coolant.config.loader import entry_from_record, load_config
from coolant.publish.command import (
    PublishSummary,
    deployment_records,
    deployments_sync_command,
    publish_command,
    publish_lines,
    read_deployments,
)
from coolant.schemas import DeploymentRecord, decode, encode
from coolant.topics import Topics
from tests.publish.conftest import consume

ROOT = Path(__file__).resolve().parents[2]

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
app.command("publish")(publish_command)
deployments = typer.Typer(help="The deployments topic.")
deployments.command("sync")(deployments_sync_command)
app.add_typer(deployments, name="deployments")


def run(*args: str | os.PathLike[str], stdin: bytes | None = None, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(app, [str(a) for a in args], input=stdin, env=env, catch_exceptions=False)


def dead_bootstrap() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def outcome_line(i: int, ts: float, dep: str = "dep-a", **extra: Any) -> bytes:
    obj = {"schema": "coolant.outcome/1", "event_id": f"e{i}", "ts": ts, "deployment_id": dep,
           "model_group": "g", "ok": i % 2 == 0, **extra}
    return json.dumps(obj, separators=(",", ":")).encode()


def sample_lines() -> tuple[list[bytes], list[int]]:
    """Valid records of every input type plus broken lines; returns (lines, 1-based numbers of invalid ones)."""
    traffic = (ROOT / "examples" / "traffic.jsonl").read_bytes().splitlines()
    health = [line for line in traffic if b'"coolant.health/1"' in line][:2]
    lines = traffic[:10] + health + [
        b'{"schema":"coolant.deployment/1","deployment_id":"dep-x","model_group":"g","cooldown_time":5}',
        b"{not json",
        b'{"schema":"coolant.outcome/1","event_id":"e","ts":1.0,"deployment_id":"d","model_group":"g"}',  # no ok
        b'{"schema":"coolant.outcome/2","event_id":"e","ts":1.0,"deployment_id":"d","model_group":"g","ok":true}',
        b'{"schema":"coolant.cooldown/1","event_id":"c","deployment_id":"d","model_group":"g","ts":1.0,'
        b'"until":2.0,"cooldown_time":1,"reason":"manual","status_code":null,"exception_type":null,'
        b'"exception_received":"","trigger_event_id":"t","window":{"start":0.0,"successes":0,"failures":0}}',
        b"   ",
        outcome_line(99, 1.0, future_field={"kept": True}),  # unknown fields are kept as written
        b"[" * 10_000 + b"]" * 10_000,  # B1: reported like any invalid line, not a RecursionError
        outcome_line(98, 1767225600000.0),  # B2: milliseconds
    ]
    invalid = [14, 15, 16, 17, 20, 21]
    return lines, invalid


def expected_messages(lines: list[bytes], topics: Topics) -> Counter[tuple[str, bytes, bytes]]:
    out: Counter[tuple[str, bytes, bytes]] = Counter()
    for line in lines:
        try:
            rec = decode(line)
        except ValueError:
            continue
        topic = {"coolant.outcome/1": topics.outcomes, "coolant.health/1": topics.health,
                 "coolant.deployment/1": topics.deployments}.get(rec.schema)
        if topic is not None:
            out[(topic, rec.deployment_id.encode(), line.strip())] += 1
    return out


def read_back(bootstrap: str, topics: Topics, n: int) -> Counter[tuple[str, bytes, bytes]]:
    got = asyncio.run(consume(bootstrap, [topics.outcomes, topics.health, topics.deployments], n))
    return Counter((m.topic, m.key, m.value) for m in got)


# --------------------------------------------------------------------------------------------
# coolant publish


def test_publish_sends_valid_lines_and_reports_invalid_ones(kafka_bootstrap: str, prefix: str, tmp_path: Path) -> None:
    lines, invalid = sample_lines()
    path = tmp_path / "records.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    result = run("publish", path, "--bootstrap", kafka_bootstrap, "--topic-prefix", prefix)
    assert result.exit_code == 0, result.stderr
    for n in invalid:
        assert f"{path}:{n}:" in result.stderr
    assert "output record" in result.stderr  # the cooldown line
    topics = Topics(prefix)
    expected = expected_messages(lines, topics)
    assert sum(expected.values()) == 14
    assert read_back(kafka_bootstrap, topics, 14) == expected
    summary = "".join(result.stderr.split())
    assert "14recordssent" in summary and "invalidlines6" in summary
    assert f"{topics.outcomes}11" in summary and f"{topics.health}2" in summary and f"{topics.deployments}1" in summary


def test_publish_reads_gzip_and_stdin(kafka_bootstrap: str, prefix: str, tmp_path: Path) -> None:
    lines = [outcome_line(i, 1000.0 + i) for i in range(5)]
    gz = tmp_path / "records.jsonl.gz"
    gz.write_bytes(gzip.compress(b"\n".join(lines)))
    assert run("publish", gz, "--bootstrap", kafka_bootstrap, "--topic-prefix", prefix).exit_code == 0
    more = [outcome_line(i, 2000.0 + i) for i in range(5, 8)]
    result = run("publish", "-", "--bootstrap", kafka_bootstrap, "--topic-prefix", prefix, stdin=b"\n".join(more))
    assert result.exit_code == 0, result.stderr
    topics = Topics(prefix)
    assert read_back(kafka_bootstrap, topics, 8) == expected_messages(lines + more, topics)


def test_publish_retime_paces_and_shifts_timestamps(kafka_bootstrap: str, prefix: str, tmp_path: Path) -> None:
    base = 1_700_000_000.0
    offsets = [0.0, 0.5, 1.0, 1.5, 2.0]
    lines = [outcome_line(i, base + off) for i, off in enumerate(offsets)]
    lines.insert(2, b'{"schema":"coolant.deployment/1","deployment_id":"dep-a","model_group":"g"}')
    path = tmp_path / "records.jsonl"
    path.write_bytes(b"\n".join(lines))
    before = time.time()
    result = run("publish", path, "--bootstrap", kafka_bootstrap, "--topic-prefix", prefix, "--retime",
                 "--speed", "4")
    assert result.exit_code == 0, result.stderr  # the pacing itself: test_pacing_* on a simulated clock
    got = asyncio.run(consume(kafka_bootstrap, [Topics(prefix).outcomes], 5))
    ts = [json.loads(m.value)["ts"] for m in sorted(got, key=lambda m: m.offset)]
    assert before - 1 <= ts[0] <= time.time()
    assert [round(t - ts[0], 6) for t in ts] == offsets  # spacing kept, not compressed by --speed
    assert all(json.loads(m.value)["event_id"] == f"e{i}" for i, m in enumerate(sorted(got, key=lambda m: m.offset)))
    [dep] = asyncio.run(consume(kafka_bootstrap, [Topics(prefix).deployments], 1))
    assert dep.value == lines[2]  # no ts: sent as is


def test_publish_retime_no_wait_sends_at_once(kafka_bootstrap: str, prefix: str, tmp_path: Path) -> None:
    lines = [outcome_line(i, 1_700_000_000.0 + 600 * i) for i in range(3)]  # 20 minutes of records
    path = tmp_path / "records.jsonl"
    path.write_bytes(b"\n".join(lines))
    result = run("publish", path, "--bootstrap", kafka_bootstrap, "--topic-prefix", prefix, "--retime", "--no-wait")
    assert result.exit_code == 0, result.stderr
    got = asyncio.run(consume(kafka_bootstrap, [Topics(prefix).outcomes], 3))
    ts = sorted(json.loads(m.value)["ts"] for m in got)
    assert abs(ts[0] - time.time()) < 30 and [round(t - ts[0], 6) for t in ts] == [0, 600, 1200]


def test_publish_rate_caps_records_per_second(kafka_bootstrap: str, prefix: str, tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    path.write_bytes(b"\n".join(outcome_line(i, 1000.0) for i in range(20)))
    result = run("publish", path, "--bootstrap", kafka_bootstrap, "--topic-prefix", prefix, "--rate", "40/s")
    assert result.exit_code == 0, result.stderr
    assert Counter(m.offset for m in asyncio.run(consume(kafka_bootstrap, [Topics(prefix).outcomes], 20))) == Counter(
        range(20)), "every record sent once"


class SimulatedClock:
    """`publish_lines`' clocks and sleep, simulated: a sleep moves time on at once and is recorded."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def wall(self) -> float:
        return 2_000_000_000.0 + self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


class ClockedProducer:
    """Records when (on the simulated clock) each record was handed to Kafka; every send is acknowledged."""

    def __init__(self, clock: SimulatedClock) -> None:
        self.clock = clock
        self.sent: list[tuple[float, str, bytes]] = []

    async def send(self, topic: str, value: bytes, key: bytes) -> asyncio.Future[None]:
        self.sent.append((self.clock.now, topic, value))
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        fut.set_result(None)
        return fut


def paced(lines: list[bytes], **options: Any) -> tuple[SimulatedClock, ClockedProducer, PublishSummary]:
    clock = SimulatedClock()
    producer = ClockedProducer(clock)
    numbered = [("records.jsonl", i + 1, line) for i, line in enumerate(lines)]

    async def go() -> PublishSummary:
        return await publish_lines(numbered, producer, Topics("p."), monotonic=clock.monotonic, wall=clock.wall,
                                   sleep=clock.sleep, **options)

    return clock, producer, asyncio.run(go())


def test_pacing_retime_keeps_the_spacing_speed_times_faster() -> None:
    offsets = [0.0, 0.5, 1.0, 1.5, 2.0]
    lines = [outcome_line(i, 1_700_000_000.0 + off) for i, off in enumerate(offsets)]
    lines.insert(2, b'{"schema":"coolant.deployment/1","deployment_id":"dep-a","model_group":"g"}')
    clock, producer, summary = paced(lines, retime=True, speed=4)
    outcomes = [(t, json.loads(v)["ts"]) for t, topic, v in producer.sent if topic == "p.outcomes"]
    assert [t for t, _ in outcomes] == pytest.approx([off / 4 for off in offsets])  # 2 s of records at 4x
    assert [ts for _, ts in outcomes] == pytest.approx([2_000_000_000.0 + off for off in offsets])
    assert [t for t, topic, _ in producer.sent if topic == "p.deployments"] == [0.125]  # not paced: right after e1
    assert sum(clock.slept) == pytest.approx(0.5) and summary.total == 6


def test_pacing_no_wait_never_sleeps() -> None:
    lines = [outcome_line(i, 1_700_000_000.0 + 600 * i) for i in range(3)]  # 20 minutes of records
    clock, producer, _ = paced(lines, retime=True, wait=False)
    assert clock.slept == [] and [t for t, _, _ in producer.sent] == [0.0, 0.0, 0.0]
    assert [json.loads(v)["ts"] for _, _, v in producer.sent] == [2e9, 2e9 + 600, 2e9 + 1200]


def test_pacing_rate_caps_records_per_second() -> None:
    clock, producer, _ = paced([outcome_line(i, 1000.0) for i in range(20)], rate=40.0)
    assert [t for t, _, _ in producer.sent] == pytest.approx([i / 40 for i in range(20)])
    assert sum(clock.slept) == pytest.approx(19 / 40)


@pytest.mark.parametrize(
    "args",
    [
        ["--speed", "2"],
        ["--no-wait"],
        ["--rate", "0"],
        ["--rate", "fast"],
        ["--topic-prefix", "bad prefix/"],
    ],
)
def test_publish_bad_options_exit_2(args: list[str], tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(outcome_line(1, 1.0))
    assert run("publish", path, "--bootstrap", dead_bootstrap(), *args).exit_code == 2


def test_publish_unreadable_file_exit_2_and_dead_kafka_exit_1(tmp_path: Path) -> None:
    result = run("publish", tmp_path / "missing.jsonl", "--bootstrap", dead_bootstrap())
    assert result.exit_code == 2
    assert "missing.jsonl: cannot open" in result.stderr
    path = tmp_path / "r.jsonl"
    path.write_bytes(outcome_line(1, 1.0))
    result = run("publish", path, "--bootstrap", dead_bootstrap())
    assert result.exit_code == 1
    assert "cannot connect" in result.stderr


def test_publish_bootstrap_from_env(kafka_bootstrap: str, prefix: str, tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(outcome_line(1, 1.0))
    result = run("publish", path, "--topic-prefix", prefix, env={"KAFKA_BOOTSTRAP": kafka_bootstrap})
    assert result.exit_code == 0, result.stderr


def test_help_texts() -> None:
    out = "".join(run("publish", "--help").stdout.split())
    assert "--retime" in out and "--rate" in out and "--speed" in out and "KAFKA_BOOTSTRAP" in out
    out = "".join(run("deployments", "sync", "--help").stdout.split())
    assert "--delete-missing" in out and "deleted:true" in out


# --------------------------------------------------------------------------------------------
# coolant deployments sync

CONFIG: dict[str, Any] = {
    "model_list": [
        {
            "model_name": "gpt-4o",
            "litellm_params": {"model": "azure/gpt-4o", "api_key": "os.environ/AZURE_KEY"},
            "model_info": {
                "id": "gpt-4o-eu",
                "cooldown_time": 30,
                "allowed_fails_policy": {"RateLimitErrorAllowedFails": 10, "TimeoutErrorAllowedFails": 2},
            },
        },
        {
            "model_name": "claude",
            "litellm_params": {"model": "anthropic/claude", "cooldown_time": 45},
            "model_info": {"id": "claude-1", "allowed_fails": 2},
        },
        {"model_name": "anthropic/*", "litellm_params": {"model": "anthropic/*"}},
    ],
    "router_settings": {"allowed_fails": 3, "cooldown_time": 60},
}


def write_config(tmp_path: Path, config: dict[str, Any], name: str = "litellm.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(config))
    return path


def read_topic(bootstrap: str, topic: str, n: int) -> list[Any]:
    return sorted(asyncio.run(consume(bootstrap, [topic], n, settle=1.0)), key=lambda m: m.offset)


async def topic_config(bootstrap: str, topic: str, key: str) -> str:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        [response] = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
        configs = response.resources[0][4]
        return next(str(c[1]) for c in configs if c[0] == key)
    finally:
        await admin.close()


def test_deployments_sync_publishes_one_record_per_deployment(
    kafka_bootstrap: str, prefix: str, tmp_path: Path
) -> None:
    config = write_config(tmp_path, CONFIG)
    result = run("deployments", "sync", config, "--bootstrap", kafka_bootstrap, "--topic-prefix", prefix)
    assert result.exit_code == 0, result.stderr
    assert "3 deployment records published" in result.stderr
    assert "claude-1: litellm_params.cooldown_time (45)" in result.stderr  # it has no place in the record

    topic = Topics(prefix).deployments
    assert asyncio.run(topic_config(kafka_bootstrap, topic, "cleanup.policy")) == "compact"
    msgs = read_topic(kafka_bootstrap, topic, 3)
    cfg = load_config(config)
    assert [m.value for m in msgs] == [encode(r) for r in deployment_records(cfg)]
    records = {m.key.decode(): decode(m.value) for m in msgs}
    wildcard_id = next(i for i in records if i not in ("gpt-4o-eu", "claude-1"))
    assert records["gpt-4o-eu"] == DeploymentRecord(
        deployment_id="gpt-4o-eu", model_group="gpt-4o", wildcard=False, cooldown_time=30.0,
        allowed_fails_policy={"RateLimitErrorAllowedFails": 10, "TimeoutErrorAllowedFails": 2},
    )
    assert records["claude-1"] == DeploymentRecord(
        deployment_id="claude-1", model_group="claude", wildcard=False, allowed_fails=2
    )
    assert records[wildcard_id] == DeploymentRecord(deployment_id=wildcard_id, model_group="anthropic/*", wildcard=True)
    # what a worker makes of them is the config's own entry (minus the params level, which records lack)
    for dep_id, rec in records.items():
        assert isinstance(rec, DeploymentRecord)
        entry, warnings = entry_from_record(rec)
        assert not warnings
        config_entry = cfg.policy.registry.entries[dep_id]
        assert entry == type(config_entry)(**{**_fields(config_entry), "params_cooldown_time": None})


def _fields(entry: Any) -> dict[str, Any]:
    return {name: getattr(entry, name) for name in entry.__slots__}


def test_deployments_sync_delete_missing(kafka_bootstrap: str, prefix: str, tmp_path: Path) -> None:
    topic = Topics(prefix).deployments
    full = write_config(tmp_path, CONFIG, "full.yaml")
    assert run("deployments", "sync", full, "--bootstrap", kafka_bootstrap, "--topic-prefix", prefix,
               "--delete-missing").exit_code == 0
    smaller = write_config(tmp_path, {**CONFIG, "model_list": CONFIG["model_list"][:1]}, "smaller.yaml")
    result = run("deployments", "sync", smaller, "--bootstrap", kafka_bootstrap, "--topic-prefix", prefix,
                 "--delete-missing")
    assert result.exit_code == 0, result.stderr
    assert "deleted claude-1 (claude)" in result.stderr
    msgs = read_topic(kafka_bootstrap, topic, 6)
    assert len(msgs) == 6  # 3 + 1 upsert + 2 deletions
    deleted = {decode(m.value).deployment_id: decode(m.value) for m in msgs[4:]}
    assert set(deleted) == {m.key.decode() for m in msgs[4:]}
    assert deleted["claude-1"] == DeploymentRecord(deployment_id="claude-1", model_group="claude", deleted=True)
    assert all(isinstance(r, DeploymentRecord) and r.deleted for r in deleted.values())
    live = asyncio.run(read_deployments(topic, {"bootstrap_servers": kafka_bootstrap}))
    assert set(live) == {"gpt-4o-eu"}

    again = run("deployments", "sync", smaller, "--bootstrap", kafka_bootstrap, "--topic-prefix", prefix,
                "--delete-missing")
    assert again.exit_code == 0 and "nothing to delete" in again.stderr
    assert len(read_topic(kafka_bootstrap, topic, 7)) == 7  # only the upsert: no second deletion


def test_read_deployments_of_a_missing_topic_is_empty(kafka_bootstrap: str, prefix: str) -> None:
    assert asyncio.run(read_deployments(prefix + "deployments", {"bootstrap_servers": kafka_bootstrap})) == {}


def test_deployments_sync_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("model_list: 3\n")
    result = run("deployments", "sync", bad, "--bootstrap", dead_bootstrap())
    assert result.exit_code == 2 and "model_list" in result.stderr
    secret = write_config(tmp_path, {**CONFIG, "coolant": {"kafka": {
        "sasl_mechanism": "PLAIN", "security_protocol": "SASL_PLAINTEXT",
        "sasl_plain_username": "u", "sasl_plain_password": "os.environ/COOLANT_TEST_UNSET_PASSWORD"}}})
    result = run("deployments", "sync", secret, "--bootstrap", dead_bootstrap())
    assert result.exit_code == 2 and "COOLANT_TEST_UNSET_PASSWORD is not set" in result.stderr
    result = run("deployments", "sync", write_config(tmp_path, CONFIG), "--bootstrap", dead_bootstrap())
    assert result.exit_code == 1 and "cannot connect" in result.stderr
