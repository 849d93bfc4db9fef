"""Issue 6 live: health transitions, the admin API and the new metrics, on worker subprocesses with real Kafka/Redis.

Each test waits for the worker's consumer group to commit its input (`wait_caught_up`), after which every
output of that input is durable; HTTP answers and Redis are polled with deadlines, never slept on.
"""

from __future__ import annotations

import asyncio
import json
import re
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families
from redis.asyncio import Redis

from coolant.processors.health import transition_id
from coolant.topics import Topics
from tests.support.kafka import produce, read_json, wait_caught_up
from tests.support.records import DEPLOYMENTS, T0, outcome
from tests.support.waiting import wait_for
from tests.support.worker import Case, Worker, wait_assigned

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "it-admin-token-0123456789"


def _call(url: str, method: str, body: bytes | None, token: str | None) -> tuple[int, Any, dict[str, str]]:
    req = urllib.request.Request(url, data=body, method=method)
    if token is not None:
        req.add_header("Authorization", f"Bearer {token}")
    if body is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            raw, status, headers = resp.read(), resp.status, dict(resp.headers)
    except urllib.error.HTTPError as exc:
        raw, status, headers = exc.read(), exc.code, dict(exc.headers)
    try:
        data = json.loads(raw) if raw else None
    except ValueError:
        data = raw.decode(errors="replace")
    return status, data, headers


async def call(w: Worker, method: str, path: str, body: Any = None, token: str | None = None,
               raw: bytes | None = None) -> tuple[int, Any, dict[str, str]]:
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    return await asyncio.to_thread(_call, f"http://127.0.0.1:{w.web_port}{path}", method, data, token)


def health(eid: str, dt: float, dep: str, ok: bool, **fields: Any) -> bytes:
    rec = {"schema": "coolant.health/1", "event_id": eid, "ts": T0 + dt, "deployment_id": dep,
           "model_group": "from-the-prober", "healthy": ok, "prober": "it-prober", **fields}
    return orjson.dumps(rec)


async def test_health_transitions_only_on_flips(case: Case, kafka_bootstrap: str) -> None:
    """Probes flipping healthy -> unhealthy -> healthy: one transition per flip (and the first), not per probe."""
    fail = {"status_code": 503, "exception_type": "litellm.ServiceUnavailableError",
            "exception_message": "litellm.ServiceUnavailableError: overloaded, the upstream said so in many words " * 2}
    a, b, c = "dep-00", "dep-05", "dep-09"
    probes = [
        health("a1", 0, a, True), health("a2", 10, a, True), health("a3", 20, a, True),
        health("a4", 30, a, False, **fail), health("a5", 40, a, False, **fail), health("a6", 50, a, False, **fail),
        health("a-late", 35, a, True),  # older than a4: H1 ignores it, so no flip either
        health("a5", 40, a, False, **fail),  # a redelivered copy
        health("a7", 60, a, True), health("a8", 70, a, True),
        health("b1", 0, b, False, **fail), health("b2", 10, b, False, **fail), health("b3", 20, b, False, **fail),
        health("c1", 0, c, True), health("c2", 10, c, True),
    ]
    w = await case.worker("a", kafka_bootstrap)  # no --admin-token: the writes must say so
    await w.wait_ready()
    topics = Topics(case.prefix)
    await produce(kafka_bootstrap, topics.health, [(orjson.loads(p)["deployment_id"].encode(), p) for p in probes])
    await wait_caught_up(kafka_bootstrap, case.app_id, topics.health, on_timeout=case.logs)

    got = await read_json(kafka_bootstrap, topics.health_transitions)
    flips = sorted((t["deployment_id"], t["probe_event_id"], t["previous"], t["healthy"]) for t in got)
    assert flips == [
        (a, "a1", None, True), (a, "a4", True, False), (a, "a7", False, True),
        (b, "b1", None, False),
        (c, "c1", None, True),
    ], got
    by_probe = {t["probe_event_id"]: t for t in got}
    a4 = by_probe["a4"]
    assert a4["event_id"] == transition_id(a, "a4")
    assert a4["model_group"] == "grp-0"  # the registry's group (R3), not the probe's
    assert (a4["status_code"], a4["exception_type"], a4["prober"]) == (503, "ServiceUnavailableError", "it-prober")
    message = fail["exception_message"]
    assert a4["exception_received"] == message[:50] + "*" * (len(message) - 50)
    assert await w.metric("coolant_health_transitions_total") == len(got)
    assert await w.metric("coolant_health_transitions_total", model_group="grp-0", healthy="false") == 1

    # the deployment's health as the admin API reads it from the health path state
    status, view, _ = await call(w, "GET", f"/deployments/{a}")
    assert status == 200, view
    assert view["health"] == {"is_healthy": True, "timestamp": T0 + 70, "reason": ""}

    # without a configured token the writes are off, whatever the caller sends
    for method, path, body in (("POST", "/cooldowns", {"deployment_id": a, "cooldown_time": 5}),
                               ("DELETE", f"/cooldowns/{a}", None)):
        status, data, _ = await call(w, method, path, body, token="anything")
        assert (status, data) == (403, {"error": "admin token not configured"}), (method, data)
    # and with no Redis (--no-materialize) the Redis reads say why
    status, data, _ = await call(w, "GET", "/cooldowns")
    assert status == 503 and "no-materialize" in data["error"]


async def wait_redis(client: Redis, key: str, present: bool) -> bytes | None:
    async def check() -> Any:
        value = await client.get(key)
        return (value or True) if (value is not None) == present else None

    got = await wait_for(check, f"{key} {'present' if present else 'gone'}", 30, 0.2)
    return got if isinstance(got, bytes) else None


def metric_names(text: str) -> set[str]:
    """Every name a PromQL query may use for the families in `text` (counters' _total, histograms' _bucket...)."""
    names = set()
    for fam in text_string_to_metric_families(text):
        names.add(fam.name)
        names.update(s.name for s in fam.samples)
        names.update(fam.name + suffix for suffix in ("_total", "_created", "_bucket", "_sum", "_count"))
    return names


def dashboard_metrics() -> set[str]:
    dash = json.loads((ROOT / "deploy" / "grafana" / "coolant.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    found = {m for e in exprs for m in re.findall(r"\b((?:coolant|litellm)_[a-z0-9_]+)\b", e)}
    assert len(found) >= 8, found
    return found


async def test_admin_api_and_metrics(case: Case, kafka_bootstrap: str, redis_url: str) -> None:
    w = await case.worker("a", kafka_bootstrap, redis_url=redis_url, env={"COOLANT_ADMIN_TOKEN": TOKEN})
    await w.wait_ready()
    status, data, _ = await call(w, "GET", "/deployments/no-such-deployment")
    assert (status, data) == (404, {"error": "unknown deployment 'no-such-deployment'"})
    status, data, _ = await call(w, "GET", "/cooldowns")
    assert (status, data) == (200, {"count": 0, "cooldowns": []})

    # traffic: dep-04 fails with a 401 (cools at once, non_retryable); dep-05 has a quiet minute of 7 + 2
    lines = [outcome(f"adm-s{i}", T0 + 1 + i, "dep-05", True) for i in range(7)]
    lines += [outcome(f"adm-f{i}", T0 + 8 + i, "dep-05", False, status_code=500, exception_type="InternalServerError")
              for i in range(2)]
    lines.append(outcome("adm-401", T0 + 3, "dep-04", False, status_code=401,
                         exception_type="litellm.AuthenticationError",
                         exception_message="litellm.AuthenticationError: Incorrect API key provided: sk-...abcd"))
    await produce(kafka_bootstrap, case.outcomes, [(orjson.loads(x)["deployment_id"].encode(), x) for x in lines])
    await wait_caught_up(kafka_bootstrap, case.app_id, case.outcomes, on_timeout=case.logs)
    emitted = await read_json(kafka_bootstrap, case.cooldowns)
    assert [(cd["deployment_id"], cd["reason"]) for cd in emitted] == [("dep-04", "non_retryable")], emitted
    await wait_caught_up(kafka_bootstrap, case.app_id, case.cooldowns, on_timeout=case.logs)

    status, data, _ = await call(w, "GET", "/cooldowns")
    assert status == 200 and data["count"] == 1, data
    [c] = data["cooldowns"]
    cd = emitted[0]
    assert {k: c[k] for k in ("deployment_id", "model_group", "reason", "status_code", "started", "until")} == {
        "deployment_id": "dep-04", "model_group": "grp-1", "reason": "non_retryable", "status_code": "401",
        "started": cd["ts"], "until": cd["until"]}
    assert (c["window"], c["trigger_event_id"], c["event_id"]) == (cd["window"], "adm-401", cd["event_id"])
    assert c["exception"] == "AuthenticationError" and c["remaining"] > 0

    status, view, _ = await call(w, "GET", "/deployments/dep-05")
    assert status == 200, view
    assert view["window"] == {"start": T0, "successes": 7, "failures": 2, "latest_ts": T0 + 9}
    assert view["cooldowns"] == [] and view["health"] is None
    assert (view["registry"]["model_group"], view["registry"]["group_size"]) == ("grp-1", 4)
    status, view, _ = await call(w, "GET", "/deployments/dep-04")
    assert status == 200 and [x["event_id"] for x in view["cooldowns"]] == [cd["event_id"]], view

    # the writes: auth first, then validation
    good = {"deployment_id": "dep-06", "cooldown_time": 120, "note": "rotating its key"}
    for token in (None, "wrong-token"):
        status, data, headers = await call(w, "POST", "/cooldowns", good, token=token)
        assert status == 401 and "token" in data["error"], data
        assert headers.get("WWW-Authenticate", "").startswith("Bearer")
    for raw, says in ((b"{nope", "not valid JSON"), (b'{"deployment_id": "dep-06", "cooldown_time": -5}', "> 0"),
                      (b'{"deployment_id": "dep-06"}', "exactly one"), (b'{"cooldown_time": 5}', "deployment_id")):
        status, data, _ = await call(w, "POST", "/cooldowns", raw=raw, token=TOKEN)
        assert status == 400 and says in data["error"], (raw, data)
    status, data, _ = await call(w, "POST", "/cooldowns", {"deployment_id": "nope", "cooldown_time": 5}, token=TOKEN)
    assert status == 404, data
    status, data, headers = await call(w, "PUT", "/cooldowns", good, token=TOKEN)
    assert status == 405 and "error" in data and "POST" in headers.get("Allow", ""), data

    # a manual cooldown: on the topic, then in Redis in LiteLLM's format
    status, manual, _ = await call(w, "POST", "/cooldowns", good, token=TOKEN)
    assert status == 202, manual
    assert (manual["reason"], manual["model_group"], manual["cooldown_time"]) == ("manual", "grp-1", 120)
    assert manual["until"] == manual["ts"] + 120
    client = Redis.from_url(redis_url)
    try:
        key = f"{case.key_prefix}deployment:dep-06:cooldown"
        value = await wait_redis(client, key, present=True)
        assert value is not None and orjson.loads(value) == {
            "exception_received": "manual cooldown: rotating its key", "status_code": "500",
            "timestamp": manual["ts"], "cooldown_time": 120}
        detail = orjson.loads(await client.get(f"{case.key_prefix}coolant:cooldown:dep-06") or b"{}")
        assert detail["reason"] == "manual" and detail["event_id"] == manual["event_id"]
        on_topic = [x for x in await read_json(kafka_bootstrap, case.cooldowns) if x["deployment_id"] == "dep-06"]
        assert on_topic == [manual]
        status, data, _ = await call(w, "GET", "/cooldowns")
        assert {(x["deployment_id"], x["reason"]) for x in data["cooldowns"]} == {
            ("dep-04", "non_retryable"), ("dep-06", "manual")}

        # early release
        status, data, _ = await call(w, "DELETE", "/cooldowns/dep-06")
        assert status == 401
        status, data, _ = await call(w, "DELETE", "/cooldowns/dep-06", token=TOKEN)
        assert (status, data) == (200, {"deployment_id": "dep-06", "released": True, "deleted_keys": 2})
        assert await client.get(key) is None
        assert await client.get(f"{case.key_prefix}coolant:cooldown:dep-06") is None
        status, data, _ = await call(w, "DELETE", "/cooldowns/dep-06", token=TOKEN)
        assert status == 404, data
        status, data, _ = await call(w, "GET", "/cooldowns")
        assert [x["deployment_id"] for x in data["cooldowns"]] == ["dep-04"]
    finally:
        await client.aclose()

    # metrics: LiteLLM's counter, lag, Redis latency, active cooldowns per group (a timer, so polled)
    assert await w.metric("litellm_deployment_cooled_down_total", model_id="dep-04", exception_status="401",
                          litellm_model_name="grp-1", api_base="", api_provider="") == 1
    assert await w.metric("litellm_deployment_cooled_down_total", model_id="dep-06", exception_status="") == 1
    assert await w.metric("coolant_cooldowns_total", reason="manual") == 1
    assert await w.metric("coolant_redis_write_seconds_count", kind="cooldown") >= 2

    async def gauges() -> bool:
        samples = await w.metrics()
        lag = [s for s in samples if s[0] == "coolant_consumer_lag" and s[1]["topic"] == case.outcomes]
        active = [s for s in samples if s[0] == "coolant_active_cooldowns" and s[1]["model_group"] == "grp-1"]
        return bool(lag) and all(v == 0 for *_, v in lag) and [v for *_, v in active] == [1.0]

    await wait_for(gauges, "coolant_consumer_lag and coolant_active_cooldowns{model_group=grp-1} == 1", 45, 1.0,
                   case.logs)

    status, text = await w.get("/metrics")
    assert status == 200
    missing = dashboard_metrics() - metric_names(text)
    assert not missing, f"deploy/grafana/coolant.json uses metrics the worker does not export: {sorted(missing)}"


async def test_deployment_route_reaches_the_owner(case: Case, kafka_bootstrap: str) -> None:
    """Two workers split the partitions; either answers for any deployment, by forwarding to the owner."""
    a = await case.worker("a", kafka_bootstrap, partitions=4)
    await a.wait_healthy()
    b = await case.worker("b", kafka_bootstrap, partitions=4)
    await b.wait_healthy()
    await wait_assigned([a, b])
    lines = [outcome(f"rt-{dep}-{i}", T0 + 1 + i, dep, True) for n, dep in enumerate(DEPLOYMENTS) for i in range(n + 1)]
    await produce(kafka_bootstrap, case.outcomes, [(orjson.loads(x)["deployment_id"].encode(), x) for x in lines])
    await wait_caught_up(kafka_bootstrap, case.app_id, case.outcomes, on_timeout=case.logs)

    owners: dict[str, set[str]] = {}

    async def all_answered() -> list[str]:
        """Both workers give each deployment's counts, answered by one owner (standby copies are never read)."""
        wrong = []
        owners.clear()
        for n, dep in enumerate(DEPLOYMENTS):
            for w in (a, b):
                status, view, _ = await call(w, "GET", f"/deployments/{dep}")
                window = view.get("window") if isinstance(view, dict) else None
                if status != 200 or window is None or window["successes"] != n + 1:
                    wrong.append(f"{w.name} {dep}: {status} {window}")
                else:
                    owners.setdefault(dep, set()).add(view["served_by"])
        wrong += [f"{dep} answered by {sorted(o)}" for dep, o in owners.items() if len(o) != 1]
        return wrong

    # a rebalance may still be settling right after the commit: poll until both agree, with a deadline
    problems: list[str] = []

    async def ok() -> bool:
        nonlocal problems
        problems = await all_answered()
        return not problems

    await wait_for(ok, "both workers answering every deployment's window", 60, 1.0,
                   lambda: "\n".join(problems[:10]) + "\n" + case.logs())
    urls = {f"http://127.0.0.1:{w.web_port}" for w in (a, b)}
    assert set().union(*owners.values()) == urls, owners  # each worker owns some deployments


async def test_admin_api_refuses_abuse_and_a_delete_after_a_post_always_releases_it(
    case: Case, kafka_bootstrap: str, redis_url: str
) -> None:
    """Issue 16 §4: ids checked, unknown ones need force, JSON errors (413 too), Faust's pages behind the token,
    and POST then DELETE 100 times: every DELETE releases, and the cooldown never appears afterwards."""
    w = await case.worker("a", kafka_bootstrap, redis_url=redis_url, env={"COOLANT_ADMIN_TOKEN": TOKEN},
                          extra_args=("--admin-rate", "1000"))
    await w.wait_ready()
    status, data, _ = await call(w, "POST", "/cooldowns", raw=b'{"deployment_id": "' + b"x" * 900_000 + b'"}',
                                 token=TOKEN)
    assert status == 413 and "error" in data, data
    for bad in ("a/b", "../x", "a\x00b", "y" * 10_000):
        body = {"deployment_id": bad, "model_group": "grp-0", "cooldown_time": 5, "force": True}
        status, data, _ = await call(w, "POST", "/cooldowns", body, token=TOKEN)
        assert status == 400 and "deployment_id" in data["error"], (bad[:20], data)
    unknown = {"deployment_id": "not-in-the-registry", "model_group": "grp-x", "cooldown_time": 30}
    status, data, _ = await call(w, "POST", "/cooldowns", unknown, token=TOKEN)
    assert status == 404 and "force" in data["error"], data
    status, data, _ = await call(w, "POST", "/cooldowns", {**unknown, "force": True}, token=TOKEN)
    assert status == 202, data
    status, data, _ = await call(w, "DELETE", "/cooldowns/not-in-the-registry", token=TOKEN)
    assert status == 404 and "force" in data["error"], data
    status, data, _ = await call(w, "DELETE", "/cooldowns/not-in-the-registry?force=true", token=TOKEN)
    assert status == 200, data
    status, data, _ = await call(w, "GET", "/deployments/" + "z" * 300)
    assert status == 400 and "deployment_id" in data["error"], data
    for path in ("/router/", "/router/topics", "/"):
        status, data, _ = await call(w, "GET", path)
        assert status == 401 and "token" in data["error"], (path, data)
        status, _, _ = await call(w, "GET", path, token=TOKEN)
        assert status == 200, path

    client = Redis.from_url(redis_url)
    key = f"{case.key_prefix}deployment:dep-07:cooldown"
    try:
        for i in range(100):
            status, data, _ = await call(w, "POST", "/cooldowns", {"deployment_id": "dep-07", "cooldown_time": 300},
                                         token=TOKEN)
            assert status == 202, (i, data)
            status, data, _ = await call(w, "DELETE", "/cooldowns/dep-07", token=TOKEN)
            assert status == 200 and data["released"], (i, data)
            assert await client.get(key) is None, i
        await wait_caught_up(kafka_bootstrap, case.app_id, case.cooldowns, on_timeout=case.logs)
        assert await client.get(key) is None, "a released cooldown was written after its DELETE"
    finally:
        await client.aclose()


async def test_admin_api_during_start_up_and_its_write_rate_limit(case: Case, kafka_bootstrap: str) -> None:
    """Issue 17 §5: GET /deployments/<id> answers 503 with a JSON body until partitions are assigned (never a 500);
    issue 16 §4: writes beyond the rate limit are 429 with Retry-After."""
    w = await case.worker("a", kafka_bootstrap, env={"COOLANT_ADMIN_TOKEN": TOKEN}, extra_args=("--admin-rate", "0.01"))
    seen: list[tuple[int, Any]] = []

    async def answered() -> bool:
        w._assert_alive()
        try:
            status, data, headers = await call(w, "GET", "/deployments/dep-00")
        except OSError:  # the web server is not listening yet
            return False
        seen.append((status, data))
        if status == 503:
            assert "error" in data and headers.get("Retry-After"), (data, headers)
        return status != 503

    await wait_for(answered, "GET /deployments/dep-00 after start-up", 120, 0.05, case.logs)
    assert seen[0][0] == 503 and "starting" in seen[0][1]["error"], seen[:3]
    assert {s for s, _ in seen} <= {503, 200}, seen  # dep-00 is in the registry: 200 once assigned, never a 500

    for i in range(20):  # the burst (no Redis: each is a 503 after the limiter counted it)
        status, data, _ = await call(w, "DELETE", "/cooldowns/dep-00", token=TOKEN)
        assert status == 503, (i, data)
    status, data, headers = await call(w, "DELETE", "/cooldowns/dep-00", token=TOKEN)
    assert status == 429 and "error" in data and int(headers["Retry-After"]) >= 1, (data, headers)
    assert await w.metric("coolant_admin_throttled_total") == 1
