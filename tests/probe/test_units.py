"""Pure parts of the prober: ownership, rounds, classification, the shared-results document."""

from __future__ import annotations

from collections import Counter

import orjson
import pytest
from aiokafka.partitioner import DefaultPartitioner

from coolant.config.loader import parse_config
from coolant.probe.classify import MAX_MESSAGE, ProbeResult, classify, exception_name, scrub
from coolant.probe.http import Unsupported, openai_request
from coolant.probe.ownership import (
    due_partitions,
    owned_deployments,
    probe_event_id,
    round_of,
    round_start,
)
from coolant.probe.results import build_document, encode_document, endpoint, entry_value
from coolant.probe.targets import Target, targets_from
from coolant.schemas import Health, decode, encode
from coolant.topics import partition_of

IDS = [f"dep-{i}" for i in range(200)]


def target(dep: str = "dep-1", **kw: object) -> Target:
    args: dict[str, object] = {"deployment_id": dep, "model_group": "g", "model": "openai/m", "api_base": "http://x/v1"}
    args.update(kw)
    return Target(**args)  # type: ignore[arg-type]


def test_partition_matches_kafka_default_partitioner() -> None:
    parts = list(range(12))
    for dep in IDS:
        assert partition_of(dep, 12) == DefaultPartitioner()(dep.encode(), parts, parts)


def test_partition_is_not_pythons_hash_and_spreads() -> None:
    # known value: fixed across processes (PYTHONHASHSEED does not matter)
    assert partition_of("dep-0", 12) == partition_of("dep-0", 12)
    counts = Counter(partition_of(d, 12) for d in IDS)
    assert set(counts) == set(range(12))
    assert max(counts.values()) < 40  # 200 ids over 12 partitions: no partition takes a fifth


def test_assignments_partition_the_fleet() -> None:
    """Any split of the partitions over probers gives every deployment to exactly one of them."""
    splits = [[0, 3, 6, 9], [1, 4, 7, 10], [2, 5, 8, 11]]
    seen: Counter[str] = Counter()
    for owned in splits:
        for deps in owned_deployments(IDS, owned, 12).values():
            seen.update(deps)
    assert seen == Counter(IDS)
    only = owned_deployments(IDS, [5], 12)
    assert list(only) == [5] and all(partition_of(d, 12) == 5 for d in only[5])
    assert owned_deployments(IDS, [], 12) == {}


def test_rounds_are_wall_clock_aligned() -> None:
    assert round_of(119.999, 60) == 1
    assert round_of(120.0, 60) == 2
    assert round_start(2, 60) == 120.0
    assert round_of(-0.5, 60) == -1
    with pytest.raises(ValueError):
        round_of(1.0, 0)


def test_due_partitions() -> None:
    # 0: never probed; 1: round 5 done; 2: round 4 done; 3: a stale prober's future commit
    assert due_partitions({0: 0, 1: 6, 2: 5, 3: 9}, 5) == [0, 2]
    assert due_partitions({}, 5) == []


def test_event_id_is_per_deployment_and_round() -> None:
    a = probe_event_id("d", 60.0, 7)
    assert a == probe_event_id("d", 60.0, 7)
    assert len({a, probe_event_id("d", 60.0, 8), probe_event_id("e", 60.0, 7), probe_event_id("d", 30.0, 7)}) == 4
    assert a.startswith("hp-") and len(a) <= 128


@pytest.mark.parametrize(
    ("status", "error", "name"),
    [
        (401, None, "AuthenticationError"),
        (404, None, "NotFoundError"),
        (429, None, "RateLimitError"),
        (500, None, "InternalServerError"),
        (503, None, "ServiceUnavailableError"),
        (504, None, "Timeout"),
        (422, None, "BadRequestError"),
        (599, None, "APIError"),
        (403, None, "APIError"),
        (418, None, "APIError"),
        (None, "timeout", "Timeout"),
        (None, "connection", "APIConnectionError"),
        (401, "AuthenticationError", "AuthenticationError"),
        (200, None, None),
    ],
)
def test_exception_names(status: int | None, error: str | None, name: str | None) -> None:
    assert exception_name(status, error) == name


def test_classify_healthy_and_unhealthy() -> None:
    t = target(mode="embedding")
    ok = classify(t, ProbeResult(100.5, 12.3456, 200), 3, 30.0, "p1")
    assert ok.healthy and ok.status_code is None and ok.exception_type is None and ok.exception_message is None
    assert (ok.ts, ok.latency_ms, ok.prober, ok.mode) == (100.5, 12.346, "p1", "embedding")
    assert ok.event_id == probe_event_id("dep-1", 30.0, 3)
    bad = classify(t, ProbeResult(101.0, 5.0, 401, None, "Incorrect API key provided: sk-abcdefgh1234"), 3, 30.0, "p2")
    assert not bad.healthy and bad.status_code == 401 and bad.exception_type == "AuthenticationError"
    assert bad.event_id == ok.event_id  # same deployment and round: the worker keeps one
    assert bad.exception_message is not None and "sk-abcdefgh1234" not in bad.exception_message
    assert decode(encode(bad)) == bad  # a valid contract record
    slow = classify(t, ProbeResult(101.0, 5000.0, None, "timeout", "no answer"), 3, 30.0, "p2")
    assert (slow.healthy, slow.status_code, slow.exception_type) == (False, None, "Timeout")


def test_scrub_redacts_and_truncates() -> None:
    text = "key=TOPSECRETVALUE rejected; Authorization: Bearer abcdefghijklmnop " + "x" * 5000
    out = scrub(text, ["TOPSECRETVALUE"])
    assert out is not None and len(out) == MAX_MESSAGE
    assert "TOPSECRETVALUE" not in out and "abcdefghijklmnop" not in out
    assert scrub(None) is None


def test_openai_request_per_mode() -> None:
    url, body = openai_request(target(api_base="http://h/v1/"))
    assert url == "http://h/v1/chat/completions" and body["max_tokens"] == 1 and body["model"] == "m"
    url, body = openai_request(target(mode="embedding"))
    assert url == "http://x/v1/embeddings" and body == {"model": "m", "input": ["ping"]}
    url, _ = openai_request(target(model="gpt-4o-mini", api_base=None))
    assert url == "https://api.openai.com/v1/chat/completions"
    with pytest.raises(Unsupported):
        openai_request(target(model="anthropic/claude"))
    with pytest.raises(Unsupported):
        openai_request(target(mode="rerank"))


def test_targets_skip_wildcards_and_keep_ids() -> None:
    raw = {
        "model_list": [
            {"model_name": "a", "litellm_params": {"model": "openai/a", "api_key": "os.environ/K"},
             "model_info": {"id": "id-a", "mode": "embedding"}},
            {"model_name": "openai/*", "litellm_params": {"model": "openai/*"}},
            {"model_name": "b", "litellm_params": {"model": "openai/b", "api_base": "http://b/v1"}},
        ]
    }
    cfg = parse_config(raw)
    targets, notes = targets_from(cfg, raw["model_list"])
    assert [t.deployment_id for t in targets] == ["id-a", list(cfg.policy.registry.entries)[2]]
    assert targets[0].mode == "embedding" and targets[0].api_key == "os.environ/K" and targets[1].mode == "chat"
    assert "os.environ" not in repr(targets[0])
    assert len(notes) == 1 and "wildcard" in notes[0]


def _health(dep: str, healthy: bool, ts: float, status: int | None = None, etype: str | None = None) -> Health:
    return Health(event_id="e-" + dep, ts=ts, deployment_id=dep, model_group="g", healthy=healthy,
                  status_code=status, exception_type=etype, exception_message=None if healthy else "boom",
                  prober="p")


def test_document_merges_all_deployments_sorted_and_drops_stale() -> None:
    entries = {
        "d2": entry_value(target("d2"), _health("d2", True, 1000.0)),
        "d1": entry_value(target("d1"), _health("d1", False, 990.0, 429, "RateLimitError")),
        "d3": entry_value(target("d3"), _health("d3", False, 995.0, None, "Timeout")),
        "old": entry_value(target("old"), _health("old", True, 600.0)),
        "junk": b"not json",
    }
    doc, drop = build_document(entries, 1000.0, "coolant:p")
    assert drop == ["junk", "old"]
    assert [e["model_id"] for e in doc["healthy_endpoints"]] == ["d2"]
    assert [(e["model_id"], e["exception_status"]) for e in doc["unhealthy_endpoints"]] == [("d1", 429), ("d3", 408)]
    assert (doc["healthy_count"], doc["unhealthy_count"], doc["timestamp"], doc["checked_by"]) == (1, 2, 1000.0,
                                                                                                   "coolant:p")
    assert orjson.loads(orjson.loads(encode_document(doc))) == doc  # JSON inside a JSON string


def test_endpoint_never_carries_secrets() -> None:
    t = target(api_key="sk-live-secret", api_base="os.environ/BASE")
    ep = endpoint(t, _health("dep-1", True, 1.0))
    assert ep == {"model": "openai/m", "model_id": "dep-1"}


def test_a_stream_is_healthy_only_when_it_completes() -> None:
    """The cooled cadence's chat probe streams: a stream that dies mid-answer fails it as it fails a user."""
    from coolant.probe.http import stream_failure

    chunk = b'data: {"choices": [{"index": 0, "delta": {"content": "p"}, "finish_reason": null}]}\n\n'
    final = b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}\n\n'
    done = b"data: [DONE]\n\n"
    assert stream_failure(chunk + final + done) is None
    assert stream_failure(chunk * 3) == "stream ended without a final chunk"  # cut
    assert stream_failure(chunk * 3 + done) == "stream ended without a final chunk"  # truncated
    assert stream_failure(chunk + final) == "stream ended without [DONE]"
    error = b'data: {"error": {"message": "stream interrupted", "type": "server_error"}}\n\n'
    assert stream_failure(chunk + error + done) == "stream error event: stream interrupted"
    assert stream_failure(b"data: nope\n\n") == "stream event that is not JSON"
