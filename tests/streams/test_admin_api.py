"""The admin API's pure parts (auth, request validation, response shapes) and its OpenAPI file against the routes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from coolant.config.loader import parse_config
from coolant.processors.policy import Policy
from coolant.processors.state import HealthState, PathState
from coolant.schemas import Cooldown, Window, decode, encode
from coolant.streams.admin_views import (
    FAUST_PAGES,
    HISTORY_KEEP,
    MAX_MANUAL_SECONDS,
    ApiError,
    ManualRequest,
    TokenBucket,
    check_name,
    check_token,
    deployment_view,
    history_add,
    litellm_end,
    manual_cooldown,
    materialized,
    parse_manual,
)

ROOT = Path(__file__).resolve().parents[2]
NOW = 1_800_000_000.0


def policy() -> Policy:
    return parse_config({
        "model_list": [
            {"model_name": "g", "litellm_params": {"model": "openai/a"},
             "model_info": {"id": "d1", "allowed_fails": 2}},
            {"model_name": "g", "litellm_params": {"model": "openai/b"}, "model_info": {"id": "d2"}},
            {"model_name": "solo", "litellm_params": {"model": "openai/c"}, "model_info": {"id": "d3"}},
        ],
        "router_settings": {"cooldown_time": 30},
    }).policy


def status_of(fn: Any, *args: Any) -> tuple[int, str]:
    with pytest.raises(ApiError) as info:
        fn(*args)
    return info.value.status, info.value.message


# ---------------------------------------------------------------------------------------------------------------
# Auth


def test_writes_are_off_without_a_configured_token() -> None:
    assert status_of(check_token, "Bearer anything", None) == (403, "admin token not configured")
    assert status_of(check_token, "Bearer anything", "")[0] == 403


@pytest.mark.parametrize("header", [None, "", "Bearer", "Bearer wrong", "Basic s3cret", "s3cret", "Bearer s3cret2"])
def test_missing_or_wrong_token_is_401(header: str | None) -> None:
    status, message = status_of(check_token, header, "s3cret")
    assert status == 401
    assert "s3cret" not in message


@pytest.mark.parametrize("header", ["Bearer s3cret", "bearer s3cret", "  Bearer  s3cret "])
def test_right_token_passes(header: str) -> None:
    check_token(header, "s3cret")


# ---------------------------------------------------------------------------------------------------------------
# POST /cooldowns validation


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "JSON object"),
        (b'"d1"', "JSON object"),
        (b'{"cooldown_time": 5}', "deployment_id"),
        (b'{"deployment_id": "", "cooldown_time": 5}', "deployment_id"),
        (b'{"deployment_id": 7, "cooldown_time": 5}', "deployment_id"),
        (b'{"deployment_id": "d1"}', "exactly one"),
        (b'{"deployment_id": "d1", "cooldown_time": 5, "until": 1800000100}', "exactly one"),
        (b'{"deployment_id": "d1", "cooldown_time": -5}', "> 0"),
        (b'{"deployment_id": "d1", "cooldown_time": 0}', "> 0"),
        (b'{"deployment_id": "d1", "cooldown_time": "60"}', "cooldown_time: expected a number"),
        (b'{"deployment_id": "d1", "cooldown_time": true}', "cooldown_time: expected a number"),
        (b'{"deployment_id": "d1", "until": "soon"}', "until: expected"),
        (b'{"deployment_id": "d1", "cooldown_time": 5, "note": 3}', "note: expected a string"),
        (b'{"deployment_id": "d1", "cooldown_time": 5, "model_group": ["g"]}', "model_group: expected a string"),
        (b'{"deployment_id": "d1", "cooldown": 5}', "unknown field(s): cooldown"),
    ],
)
def test_bad_bodies_are_400_with_the_reason(body: bytes, says: str) -> None:
    status, message = status_of(parse_manual, body)
    assert status == 400
    assert says in message


def test_good_body() -> None:
    req = parse_manual(b'{"deployment_id": "d1", "cooldown_time": 60, "note": "key rotated"}')
    assert req == ManualRequest("d1", None, 60.0, None, "key rotated")
    assert parse_manual(b'{"deployment_id": "d1", "until": 1800000100, "model_group": null}').until == 1800000100.0


def test_manual_cooldown_record() -> None:
    cd = manual_cooldown(ManualRequest("d1", cooldown_time=60, note="key rotated"), policy().registry, NOW, "manual-1")
    assert cd == Cooldown(
        event_id="manual-1", deployment_id="d1", model_group="g", ts=NOW, until=NOW + 60, cooldown_time=60,
        reason="manual", status_code=None, exception_type=None, exception_received="manual cooldown: key rotated",
        trigger_event_id="manual-1", window=Window(NOW, 0, 0),
    )
    assert decode(encode(cd)) == cd  # a valid contract record
    by_until = manual_cooldown(ManualRequest("d1", until=NOW + 90.5), policy().registry, NOW, "manual-2")
    assert (by_until.until, by_until.cooldown_time) == (NOW + 90.5, 90.5)


def test_manual_note_is_masked_like_exceptions() -> None:
    note = "x" * 200
    cd = manual_cooldown(ManualRequest("d1", cooldown_time=5, note=note), policy().registry, NOW, "m")
    assert cd.exception_received == ("manual cooldown: " + note)[:50] + "*" * (len("manual cooldown: ") + 200 - 50)


def test_manual_cooldown_refusals() -> None:
    reg = policy().registry
    assert status_of(manual_cooldown, ManualRequest("nope", cooldown_time=5), reg, NOW, "m")[0] == 404
    assert status_of(manual_cooldown, ManualRequest("d1", "other", cooldown_time=5), reg, NOW, "m")[0] == 400
    assert status_of(manual_cooldown, ManualRequest("d1", until=NOW - 1), reg, NOW, "m") == (
        400, "until is not in the future")
    assert status_of(manual_cooldown, ManualRequest("d1", until=NOW), reg, NOW, "m")[0] == 400
    too_long = ManualRequest("d1", cooldown_time=MAX_MANUAL_SECONDS + 1)
    assert status_of(manual_cooldown, too_long, reg, NOW, "m")[0] == 400
    # an id the registry lacks can be cooled by naming its group and forcing it; a known one's own group is accepted
    assert status_of(manual_cooldown, ManualRequest("nope", "h", cooldown_time=5), reg, NOW, "m")[0] == 404
    forced = ManualRequest("nope", "h", cooldown_time=5, force=True)
    assert manual_cooldown(forced, reg, NOW, "m").model_group == "h"
    assert manual_cooldown(ManualRequest("d1", "g", cooldown_time=5), reg, NOW, "m").model_group == "g"


# ---------------------------------------------------------------------------------------------------------------
# Deployment view and history


def cooldown(i: int) -> Cooldown:
    return Cooldown(event_id=f"cd-{i}", deployment_id="d1", model_group="g", ts=NOW + i, until=NOW + i + 5,
                    cooldown_time=5, reason="rate_limited", status_code=429, exception_type="RateLimitError",
                    exception_received="RateLimitError", trigger_event_id=f"ev-{i}", window=Window(NOW, 3, 4))


def test_history_is_bounded_and_ignores_redelivery() -> None:
    raw = None
    for i in range(HISTORY_KEEP + 3):
        raw = history_add(raw, cooldown(i))
        assert raw is not None
    assert history_add(raw, cooldown(HISTORY_KEEP + 2)) is None  # the same record again
    assert [d["event_id"] for d in orjson.loads(raw)] == [f"cd-{i}" for i in range(3, HISTORY_KEEP + 3)]


def test_unknown_deployment_is_none() -> None:
    assert deployment_view("nope", policy(), None, None, None) is None
    assert deployment_view("nope", policy(), PathState(), PathState(), None) is None


def test_deployment_view_answers_the_operator() -> None:
    request = PathState(hw=NOW + 125.0, windows={int(NOW // 60): [9, 1], int((NOW + 125) // 60): [3, 2]})
    health = PathState(probe=HealthState(False, NOW + 100, "background_health_check_failed"))
    history = history_add(history_add(None, cooldown(1)), cooldown(2))
    view = deployment_view("d1", policy(), request, health, history)
    assert view is not None
    assert view["window"] == {"start": (NOW + 125) // 60 * 60, "successes": 3, "failures": 2, "latest_ts": NOW + 125}
    assert view["health"] == {"is_healthy": False, "timestamp": NOW + 100, "reason": "background_health_check_failed"}
    assert [c["event_id"] for c in view["cooldowns"]] == ["cd-2", "cd-1"]  # newest first
    assert view["registry"] == {
        "model_group": "g", "group_size": 2, "lone": False, "wildcard": False, "cooldown_time": None,
        "params_cooldown_time": None, "allowed_fails": 2, "allowed_fails_policy": None,
    }
    assert view["router"]["cooldown_time"] == 30
    assert deployment_view("d3", policy(), None, None, None)["registry"]["lone"] is True  # type: ignore[index]
    # known only from its state (R6: records of an id the registry lacks are still counted)
    orphan = deployment_view("gone", policy(), request, None, None)
    assert orphan is not None and orphan["registry"] is None


# ---------------------------------------------------------------------------------------------------------------
# OpenAPI file == routes


@pytest.fixture(scope="module")
def routes(tmp_path_factory: pytest.TempPathFactory) -> set[tuple[str, str]]:
    """(path, method) of every route a worker serves, Faust's built-in pages included (HEAD is implied by GET)."""
    from coolant.streams.app import Pipeline, WorkerOptions

    p = Pipeline(parse_config({"model_list": []}), WorkerOptions(datadir=str(tmp_path_factory.mktemp("worker"))))
    web: Any = p.app.web
    web.init_server()  # applies Faust's blueprints, as the running worker does
    return {(r.resource.canonical, r.method.lower()) for r in web.web_app.router.routes() if r.method != "HEAD"}


def test_every_route_is_in_the_openapi_file_and_back(routes: set[tuple[str, str]]) -> None:
    spec = yaml.safe_load((ROOT / "docs" / "openapi.yaml").read_text())
    assert spec["openapi"].startswith("3.")
    methods = {"get", "post", "put", "patch", "delete"}
    documented = {(path, m) for path, item in spec["paths"].items() for m in item if m in methods}
    assert {("/cooldowns", "get"), ("/cooldowns", "post"), ("/cooldowns/{deployment_id}", "delete"),
            ("/deployments/{deployment_id}", "get"), ("/healthz", "get"), ("/metrics", "get")} <= routes
    assert routes - documented == set(), "served but not in docs/openapi.yaml"
    assert documented - routes == set(), "in docs/openapi.yaml but not served"


def test_faust_table_dump_pages_are_off(routes: set[tuple[str, str]]) -> None:
    """/table/... would serve the raw state tables to anyone; the admin API is the way in."""
    assert not [r for r in routes if r[0].startswith("/table")]


# ---------------------------------------------------------------------------------------------------------------
# Issue 16: ids, force, rate limit, ordering


@pytest.mark.parametrize("bad", ["", "x" * 257, "a/b", "../etc", "..", "a\x00b", "a b", "a\nb", "é", '"q"', "-lead"])
def test_unknown_ids_must_be_plain(bad: str) -> None:
    assert status_of(check_name, bad, "deployment_id", False)[0] == 400
    forced = ManualRequest(bad, "h", cooldown_time=5, force=True)
    assert status_of(manual_cooldown, forced, policy().registry, NOW, "m")[0] == 400


@pytest.mark.parametrize("good", ["d1", "a" * 256, "azure-eu:gpt4o@2024.05", "3f2a" * 16, "x_y+z=1~2"])
def test_plain_ids_pass(good: str) -> None:
    check_name(good, "deployment_id", False)


def test_registry_ids_may_hold_any_characters_but_not_any_length() -> None:
    check_name("azure/gpt 4o", "deployment_id", True)
    assert status_of(check_name, "a" * 257, "deployment_id", True)[0] == 400


def test_unknown_model_group_is_checked_too() -> None:
    req = ManualRequest("new-dep", "grp/../x", cooldown_time=5, force=True)
    assert status_of(manual_cooldown, req, policy().registry, NOW, "m") == (
        400, "model_group: only letters, digits and . _ : @ + = ~ - (starting with a letter or digit)")


def test_force_and_long_ids_in_the_body() -> None:
    assert parse_manual(b'{"deployment_id": "n", "model_group": "h", "cooldown_time": 5, "force": true}').force
    assert status_of(parse_manual, b'{"deployment_id": "n", "cooldown_time": 5, "force": 1}')[0] == 400
    long_id = orjson.dumps({"deployment_id": "x" * 900_000, "cooldown_time": 5})
    assert status_of(parse_manual, long_id) == (400, "deployment_id: 1 to 256 characters")


def test_token_bucket() -> None:
    bucket = TokenBucket(rate=2.0, burst=3, now=0.0)
    assert [bucket.take(0.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.take(0.0) == pytest.approx(0.5)
    assert bucket.take(0.5) == 0.0  # one more after half a second at 2/s
    assert bucket.take(0.5) > 0
    assert bucket.take(100.0) == 0.0 and bucket.tokens == pytest.approx(2.0)  # refills up to the burst only


def test_materialized_means_redis_shows_this_cooldown_or_a_longer_one() -> None:
    cd = manual_cooldown(ManualRequest("d1", cooldown_time=60), policy().registry, NOW, "manual-1")
    other = manual_cooldown(ManualRequest("d1", cooldown_time=30), policy().registry, NOW, "manual-0")
    assert materialized(cd, cd, None)
    assert not materialized(cd, None, None)
    assert not materialized(cd, other, NOW + 30)  # a shorter one in force: ours is not written yet
    assert materialized(cd, other, NOW + 60)  # one ending no earlier: ours was rightly skipped
    assert litellm_end(orjson.dumps({"timestamp": NOW, "cooldown_time": 60})) == NOW + 60
    assert litellm_end(b"{'timestamp': 1, 'cooldown_time': 2}") is None
    assert litellm_end(None) is None


def test_faust_pages_are_recognized() -> None:
    assert all(FAUST_PAGES.fullmatch(p) for p in ("/", "/router", "/router/", "/router/topics", "/router/t/k/"))
    assert not any(FAUST_PAGES.fullmatch(p) for p in ("/cooldowns", "/healthz", "/metrics", "/routerx"))
