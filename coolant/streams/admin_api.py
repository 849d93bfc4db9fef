"""The admin API on every worker's web server (docs/admin-api.md, docs/openapi.yaml).

- `GET /cooldowns`: the cooldowns in force fleet-wide, read from Redis as `coolant status` reads them, because
  with several workers no single one holds every deployment's state.
- `GET /deployments/{deployment_id}`: a deployment's state lives in tables partitioned by deployment, so the
  request is routed to the worker that owns the id's partition (Faust's `table_route`); any worker can be asked.
- `POST /cooldowns`: a manual cooldown is a cooldown record (reason `manual`) on the cooldowns topic like any
  other, so the materializer writes Redis and alert consumers see it.
- `DELETE /cooldowns/{deployment_id}`: early release, straight in Redis (the contract has no release record).

Reads are open like /metrics; writes need the bearer token (`--admin-token` / `COOLANT_ADMIN_TOKEN`), and
without one configured they are refused, so an API nobody secured cannot cool or release anything.
Parsing and response shapes are pure functions; `AdminApi` at the end is the shell.
"""

from __future__ import annotations

import hmac
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, cast

import orjson
from aiohttp import web as aioweb
from faust.web import View
from redis.exceptions import RedisError

from coolant.processors import windows
from coolant.processors.emit import mask
from coolant.processors.policy import Policy, Registry
from coolant.processors.state import NEG_INF, PathState
from coolant.schemas import Cooldown, Window, encode, to_dict
from coolant.status import ActiveCooldown, active_cooldowns, decoded_cooldown
from coolant.streams import metrics, repair
from coolant.streams.materializer import detail_key

if TYPE_CHECKING:
    import redis.asyncio as redis_asyncio

    from coolant.streams.app import Decider

log = logging.getLogger(__name__)

HISTORY_KEEP = 5
"""Cooldowns kept per deployment for `GET /deployments/{id}`: enough to see a pattern, small to rewrite."""
MAX_MANUAL_SECONDS = 30 * 86400
"""A manual cooldown ends within the cooldowns topic's default retention; also keeps PXAT in Redis's range."""
MANUAL_FIELDS = frozenset({"deployment_id", "model_group", "cooldown_time", "until", "note"})


class ApiError(Exception):
    """A 4xx/5xx answer with a JSON `{"error": message}` body."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


# ---------------------------------------------------------------------------------------------------------------
# Pure parts


def check_token(authorization: str | None, token: str | None) -> None:
    """403 when no token is configured (the writes are off), 401 when the header is missing or wrong."""
    if not token:
        raise ApiError(403, "admin token not configured")
    if not authorization:
        raise ApiError(401, "missing bearer token (Authorization: Bearer <token>)")
    scheme, _, given = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
        raise ApiError(401, "wrong bearer token")


@dataclass(frozen=True, slots=True)
class ManualRequest:
    """A validated `POST /cooldowns` body: exactly one of `cooldown_time` and `until` is set."""

    deployment_id: str
    model_group: str | None = None
    cooldown_time: float | None = None
    until: float | None = None
    note: str | None = None


def _optional(data: Mapping[str, Any], name: str, kind: type | tuple[type, ...], what: str) -> Any:
    value = data.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, kind):
        raise ApiError(400, f"{name}: expected {what}, got {orjson.dumps(value).decode()[:60]}")
    return value


def parse_manual(body: bytes) -> ManualRequest:
    """The body of `POST /cooldowns`, or a 400 that names the problem (unknown fields too: a typo must not pass)."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ApiError(400, f"body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ApiError(400, "body must be a JSON object")
    unknown = sorted(set(data) - MANUAL_FIELDS)
    if unknown:
        raise ApiError(400, f"unknown field(s): {', '.join(unknown)}; allowed: {', '.join(sorted(MANUAL_FIELDS))}")
    deployment_id = data.get("deployment_id")
    if not isinstance(deployment_id, str) or not deployment_id:
        raise ApiError(400, "deployment_id: a non-empty string is required")
    cooldown_time = _optional(data, "cooldown_time", (int, float), "a number of seconds")
    until = _optional(data, "until", (int, float), "epoch seconds")
    if (cooldown_time is None) == (until is None):
        raise ApiError(400, "give exactly one of cooldown_time (seconds) and until (epoch seconds)")
    if cooldown_time is not None and cooldown_time <= 0:
        raise ApiError(400, "cooldown_time must be > 0")
    return ManualRequest(
        deployment_id=deployment_id,
        model_group=_optional(data, "model_group", str, "a string"),
        cooldown_time=None if cooldown_time is None else float(cooldown_time),
        until=None if until is None else float(until),
        note=_optional(data, "note", str, "a string"),
    )


def manual_cooldown(req: ManualRequest, registry: Registry, now: float, event_id: str) -> Cooldown:
    """The cooldown record for a manual request at wall time `now`.

    The group is the registry's (R3): a different `model_group` is refused; an id the registry does not know is
    404 unless the caller names its group (a deployment the config lacks but the routers have).
    """
    entry = registry.get(req.deployment_id)
    if entry is None and req.model_group is None:
        raise ApiError(404, f"unknown deployment {req.deployment_id!r} (give model_group to cool it anyway)")
    if entry is not None and req.model_group is not None and req.model_group != entry.model_group:
        raise ApiError(400, f"model_group {req.model_group!r} is not the registry's {entry.model_group!r}")
    group = entry.model_group if entry is not None else req.model_group
    assert group is not None
    if req.cooldown_time is not None:
        duration, until = req.cooldown_time, now + req.cooldown_time
    else:
        assert req.until is not None
        duration, until = req.until - now, req.until
    if duration <= 0:
        raise ApiError(400, "until is not in the future")
    if duration > MAX_MANUAL_SECONDS:
        raise ApiError(400, f"a manual cooldown lasts at most {MAX_MANUAL_SECONDS} s")
    text = "manual cooldown" + (f": {req.note}" if req.note else "")
    return Cooldown(
        event_id=event_id,
        deployment_id=req.deployment_id,
        model_group=group,
        ts=now,
        until=until,
        cooldown_time=int(duration) if float(duration).is_integer() else duration,
        reason="manual",
        status_code=None,
        exception_type=None,
        exception_received=mask(text) or "",
        trigger_event_id=event_id,
        window=Window(now, 0, 0),
    )


def history_add(raw: bytes | None, cd: Cooldown, keep: int = HISTORY_KEEP) -> bytes | None:
    """The history value with `cd` appended (oldest dropped beyond `keep`); None when it is there already."""
    items: list[dict[str, Any]] = [] if raw is None else orjson.loads(raw)
    if any(item.get("event_id") == cd.event_id for item in items):
        return None
    items.append(to_dict(cd))
    return orjson.dumps(items[-keep:])


def deployment_view(
    deployment_id: str, policy: Policy, request: PathState | None, health: PathState | None, history: bytes | None
) -> dict[str, Any] | None:
    """`GET /deployments/{id}`, answering the operator's questions (scenario S3); None when nothing knows the id."""
    entry = policy.registry.get(deployment_id)
    probe = None if health is None else health.probe
    cooldowns = [] if history is None else list(reversed(orjson.loads(history)))
    window = None
    if request is not None and request.hw != NEG_INF:
        start, successes, failures = windows.counts(request, request.hw, policy.options.slot_width)
        window = {"start": start, "successes": successes, "failures": failures, "latest_ts": request.hw}
    if entry is None and window is None and probe is None and not cooldowns:
        return None
    registry = None
    if entry is not None:
        registry = {
            "model_group": entry.model_group,
            "group_size": policy.registry.size(entry.model_group),
            "lone": policy.lone(entry.model_group),
            "wildcard": entry.wildcard,
            "cooldown_time": entry.cooldown_time,
            "params_cooldown_time": entry.params_cooldown_time,
            "allowed_fails": entry.allowed_fails,
            "allowed_fails_policy": None if entry.allowed_fails_policy is None else dict(entry.allowed_fails_policy),
        }
    router = policy.router
    return {
        "deployment_id": deployment_id,
        "registry": registry,
        "router": {
            "cooldown_time": router.cooldown_time,
            "allowed_fails": router.allowed_fails,
            "disable_cooldowns": router.disable_cooldowns,
        },
        "window": window,
        "health": None if probe is None else probe.to_dict(),
        "cooldowns": cooldowns,
    }


def cooldown_view(active: ActiveCooldown, detail: Cooldown | None) -> dict[str, Any]:
    """One entry of `GET /cooldowns`: what routers see, plus coolant's evidence when its detail describes it."""
    out = asdict(active)
    described = detail is not None and active.reason is not None and float(detail.ts) == active.started
    out["event_id"] = detail.event_id if described and detail is not None else None
    out["trigger_event_id"] = detail.trigger_event_id if described and detail is not None else None
    out["window"] = to_dict(detail)["window"] if described and detail is not None else None
    return out


@aioweb.middleware
async def json_errors(
    request: aioweb.Request, handler: Callable[[aioweb.Request], Awaitable[aioweb.StreamResponse]]
) -> aioweb.StreamResponse:
    """aiohttp's own 404 (no route) and 405 (method) answers as JSON too, like every other error here."""
    try:
        return await handler(request)
    except aioweb.HTTPException as exc:
        if exc.status not in (404, 405):
            raise
        headers = {"Allow": exc.headers["Allow"]} if "Allow" in exc.headers else None
        return aioweb.json_response({"error": exc.reason}, status=exc.status, headers=headers)


# ---------------------------------------------------------------------------------------------------------------
# The shell


class AdminApi:
    """Registers the routes on the enforced decider's app and answers them."""

    def __init__(
        self,
        decider: Decider,
        *,
        redis: redis_asyncio.Redis | None,
        key_prefix: str,
        token: str | None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.decider = decider
        self.app = decider.pipeline.app
        self.redis = redis
        self.key_prefix = key_prefix
        self._token = token
        self.clock = clock

    def __repr__(self) -> str:  # never the token
        return f"AdminApi(token={'set' if self._token else 'unset'})"

    def register(self) -> None:
        api, app = self, self.app
        route = app.table_route(table=self.decider.request_store.state_table, match_info="deployment_id")
        cast(Any, app.web).web_app.middlewares.append(json_errors)  # the aiohttp driver's application

        @app.page("/cooldowns", name="cooldowns")
        class Cooldowns(View):
            async def get(self, request: Any) -> Any:
                return await api.answer(self, api.list_cooldowns())

            async def post(self, request: Any) -> Any:
                return await api.answer(self, api.cool(request))

        @app.page("/cooldowns/{deployment_id}", name="cooldown")
        class CooldownOf(View):
            async def delete(self, request: Any, deployment_id: str) -> Any:
                return await api.answer(self, api.release(request, deployment_id))

        @app.page("/deployments/{deployment_id}", name="deployment")
        class Deployment(View):
            @route  # type: ignore[arg-type]  # Faust's type knows no match_info arguments
            async def get(self, request: Any, deployment_id: str) -> Any:
                return await api.answer(self, api.deployment(deployment_id))

    async def answer(self, view: Any, work: Awaitable[tuple[int, Any]]) -> Any:
        try:
            status, body = await work
        except ApiError as exc:
            headers = {"WWW-Authenticate": 'Bearer realm="coolant"'} if exc.status == 401 else None
            return view.error(exc.status, exc.message, headers=headers)
        return view.bytes(orjson.dumps(body), content_type="application/json", status=status)

    def _redis(self) -> redis_asyncio.Redis:
        if self.redis is None:
            raise ApiError(503, "this worker has no Redis (started with --no-materialize)")
        return self.redis

    async def list_cooldowns(self) -> tuple[int, Any]:
        client = self._redis()
        try:
            active = await active_cooldowns(client, self.key_prefix)
            keys = [detail_key(self.key_prefix, c.deployment_id) for c in active]
            details = await client.mget(keys) if keys else []
        except (RedisError, OSError) as exc:
            raise ApiError(503, f"redis unavailable: {exc}") from None
        items = [cooldown_view(c, decoded_cooldown(d)) for c, d in zip(active, details, strict=True)]
        return 200, {"count": len(items), "cooldowns": items}

    async def deployment(self, deployment_id: str) -> tuple[int, Any]:
        d = self.decider
        history = d.history_table.data.get(deployment_id.encode()) if d.history_table is not None else None
        view = deployment_view(
            deployment_id, d.registry.policy, d.request_store.peek(deployment_id), d.health_store.peek(deployment_id),
            history,
        )
        if view is None:
            raise ApiError(404, f"unknown deployment {deployment_id!r}")
        view["served_by"] = str(self.app.conf.canonical_url)  # the owner of its partition, which answered
        return 200, view

    async def cool(self, request: Any) -> tuple[int, Any]:
        check_token(request.headers.get("Authorization"), self._token)
        req = parse_manual(await request.read())
        cd = manual_cooldown(req, self.decider.registry.policy.registry, self.clock(), f"manual-{uuid.uuid4().hex}")
        fut = await self.decider.cooldowns.send(key=cd.deployment_id.encode(), value=encode(cd))
        await fut  # durable before we say so
        metrics.COOLDOWNS.labels(cd.model_group, cd.reason).inc()
        metrics.cooled_down(cd)
        log.info("manual cooldown %s: %s until %.3f", cd.event_id, cd.deployment_id, cd.until)
        return 202, to_dict(cd)

    async def release(self, request: Any, deployment_id: str) -> tuple[int, Any]:
        check_token(request.headers.get("Authorization"), self._token)
        client = self._redis()
        try:  # K3: with a release marker, so the Redis repair does not write it back
            deleted = await repair.release(client, self.key_prefix, deployment_id, time.time())
        except (RedisError, OSError) as exc:
            raise ApiError(503, f"redis unavailable: {exc}") from None
        if not deleted:
            raise ApiError(404, f"no cooldown in Redis for {deployment_id!r}")
        log.info("cooldown of %s released by the admin API", deployment_id)
        return 200, {"deployment_id": deployment_id, "released": True, "deleted_keys": deleted}
