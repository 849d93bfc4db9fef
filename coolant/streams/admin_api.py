"""The admin API on every worker's web server (docs/admin-api.md, docs/openapi.yaml).

- `GET /cooldowns`: the cooldowns in force fleet-wide, read from Redis as `coolant status` reads them, because
  with several workers no single one holds every deployment's state.
- `GET /deployments/{deployment_id}`: a deployment's state lives in tables partitioned by deployment, so the
  request is routed to the worker that owns the id's partition (Faust's `table_route`); any worker can be asked.
- `POST /cooldowns`: a manual cooldown is a cooldown record (reason `manual`) on the cooldowns topic like any
  other, so the materializer writes Redis and alert consumers see it. The answer waits until Redis holds it, so
  a DELETE that follows always finds (and releases) it: the materializer cannot write it after the DELETE.
- `DELETE /cooldowns/{deployment_id}`: early release, straight in Redis (the contract has no release record),
  with a release marker so the Redis repair does not write it back.

Reads are open like /metrics; writes need the bearer token (`--admin-token` / `COOLANT_ADMIN_TOKEN`), and
without one configured they are refused, so an API nobody secured cannot cool or release anything. Faust's own
pages (`/`, `/router/...`: partition assignment and hosts) need the token too. Writes are rate-limited per worker;
ids are checked (length, characters) and one the registry does not know needs `force`. Every error is JSON.
Parsing and response shapes are pure functions; `AdminApi` at the end is the shell.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, cast

import orjson
from aiohttp import web as aioweb
from aiohttp.http_exceptions import HttpProcessingError, LineTooLong
from faust.web import View
from faust.web.exceptions import ServiceUnavailable
from redis.exceptions import RedisError

from coolant.io.cooldowns import active_cooldowns, decoded_cooldown
from coolant.io.materializer import cooldown_key, detail_key
from coolant.schemas import Cooldown, encode, to_dict
from coolant.streams import metrics, repair
from coolant.streams.admin_views import (
    MATERIALIZE_WAIT,
    MAX_BODY,
    STARTING,
    WRITE_BURST,
    WRITE_RATE,
    ApiError,
    TokenBucket,
    api_error_response,
    check_name,
    check_token,
    cooldown_view,
    deployment_view,
    error_response,
    json_errors,
    litellm_end,
    manual_cooldown,
    materialized,
    parse_manual,
)
from coolant.streams.faust import RawTable
from coolant.streams.faust.web import answer_bad_requests
from coolant.streams.pathstore import PathStore
from coolant.streams.registry import LiveRegistry

if TYPE_CHECKING:
    import redis.asyncio as redis_asyncio

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------------------------
# The shell


def bad_request(request: Any, status: int, exc: BaseException | None) -> aioweb.StreamResponse:
    """A request aiohttp cannot even parse (a 10 KB path, a bad header, a method that is no method): a short JSON
    error, not its plain-text reply that quotes the request, and one log line without a traceback (such a
    request is the client's problem, not the worker's)."""
    if isinstance(exc, LineTooLong):
        problem = "request line or header too long"
    elif isinstance(exc, HttpProcessingError):
        problem = "malformed HTTP request"
    elif status == 504:
        problem = "request timed out"
    else:
        problem = "internal error (logged by the worker)"
    level = logging.DEBUG if status < 500 else logging.WARNING
    log.log(level, "web: %d %s from %s (%s)", status, problem, request.remote, type(exc).__name__)
    return error_response(status, problem)


class Decider(Protocol):
    """What the API uses of the enforced decider (`streams.decider.Decider`)."""

    @property
    def registry(self) -> LiveRegistry: ...
    @property
    def request_store(self) -> PathStore: ...
    @property
    def health_store(self) -> PathStore: ...
    @property
    def history(self) -> RawTable | None: ...  # each deployment's last cooldowns
    @property
    def cooldowns(self) -> Any: ...  # the cooldowns topic manual cooldowns are sent to


class AdminApi:
    """Registers the routes on the enforced decider's app and answers them."""

    def __init__(
        self,
        decider: Decider,
        app: Any,
        *,
        redis: redis_asyncio.Redis | None,
        key_prefix: str,
        token: str | None,
        write_rate: float = WRITE_RATE,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.decider = decider
        self.app = app
        """The Faust app the routes go on."""
        self.redis = redis
        self.key_prefix = key_prefix
        self._token = token
        self.clock = clock
        self.bucket = TokenBucket(write_rate, max(WRITE_BURST, int(write_rate)), time.monotonic())

    def __repr__(self) -> str:  # never the token
        return f"AdminApi(token={'set' if self._token else 'unset'})"

    def register(self) -> None:
        api, app = self, self.app
        route = app.table_route(table=self.decider.request_store.state_table.table, match_info="deployment_id")
        cast(Any, app.web).web_app.middlewares.append(json_errors(self._token))  # the aiohttp driver's application
        answer_bad_requests(app.web, bad_request)

        async def local(view: Any, request: Any, deployment_id: str) -> Any:
            return await api.answer(view, api.deployment(deployment_id))

        routed: Any = route(local)  # Faust's type knows no match_info arguments

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
            async def get(self, request: Any, deployment_id: str) -> Any:
                try:
                    known = api.decider.registry.policy.registry.get(deployment_id) is not None
                    check_name(deployment_id, "deployment_id", known)
                    api.check_assigned()
                    return await routed(self, request, deployment_id=deployment_id)
                except ApiError as exc:
                    return api_error_response(exc)
                except (TypeError, KeyError, ServiceUnavailable):  # Faust has no partition map yet
                    return api_error_response(ApiError(503, STARTING))

    def check_assigned(self) -> None:
        """503 until this worker has partitions: before that Faust cannot tell which worker owns an id."""
        try:
            assigned = bool(self.app.consumer.assignment()) and not self.app.rebalancing
        except Exception:  # the consumer is not even started
            assigned = False
        if not assigned:
            raise ApiError(503, STARTING, retry_after=1.0)

    async def answer(self, view: Any, work: Awaitable[tuple[int, Any]]) -> Any:
        try:
            status, body = await work
        except ApiError as exc:
            return api_error_response(exc)
        return view.bytes(orjson.dumps(body), content_type="application/json", status=status)

    def _write_allowed(self) -> None:
        wait = self.bucket.take(time.monotonic())
        if wait:
            metrics.ADMIN_THROTTLED.inc()
            raise ApiError(429, "too many admin writes; retry later", retry_after=wait)

    async def _body(self, request: Any) -> bytes:
        if request.content_length is not None and request.content_length > MAX_BODY:
            raise ApiError(413, f"body larger than {MAX_BODY} bytes")
        body = bytearray()
        async for chunk in request.content.iter_chunked(4096):
            body += chunk
            if len(body) > MAX_BODY:
                raise ApiError(413, f"body larger than {MAX_BODY} bytes")
        return bytes(body)

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
        history = d.history.data.get(deployment_id.encode()) if d.history is not None else None
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
        self._write_allowed()
        req = parse_manual(await self._body(request))
        cd = manual_cooldown(req, self.decider.registry.policy.registry, self.clock(), f"manual-{uuid.uuid4().hex}")
        fut = await self.decider.cooldowns.send(key=cd.deployment_id.encode(), value=encode(cd))
        await fut  # durable before we say so
        metrics.COOLDOWNS.labels(cd.model_group, cd.reason).inc()
        metrics.cooled_down(cd)
        log.info("manual cooldown %s: %s until %.3f", cd.event_id, cd.deployment_id, cd.until)
        if self.redis is not None and not await self._until_materialized(self.redis, cd):
            log.warning("manual cooldown %s not in Redis after %g s (materializer behind?)", cd.event_id,
                        MATERIALIZE_WAIT)
        return 202, to_dict(cd)

    async def _until_materialized(self, client: redis_asyncio.Redis, cd: Cooldown) -> bool:
        """Waits until Redis holds `cd` (see `materialized`), so a DELETE after this answer always releases it."""
        keys = [detail_key(self.key_prefix, cd.deployment_id), cooldown_key(self.key_prefix, cd.deployment_id)]
        deadline = time.monotonic() + MATERIALIZE_WAIT
        delay = 0.005
        while True:
            try:
                detail, value = await client.mget(keys)
                if materialized(cd, decoded_cooldown(detail), litellm_end(value)):
                    return True
            except (RedisError, OSError):
                pass  # the materializer retries too; answer at the deadline
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.05)

    async def release(self, request: Any, deployment_id: str) -> tuple[int, Any]:
        check_token(request.headers.get("Authorization"), self._token)
        known = self.decider.registry.policy.registry.get(deployment_id) is not None
        check_name(deployment_id, "deployment_id", known)
        if not known and request.query.get("force") not in ("1", "true"):
            raise ApiError(404, f"unknown deployment {deployment_id!r} (add ?force=true to release it anyway)")
        self._write_allowed()
        client = self._redis()
        try:  # K3: with a release marker, so the Redis repair does not write it back
            deleted = await repair.release(client, self.key_prefix, deployment_id, time.time())
        except (RedisError, OSError) as exc:
            raise ApiError(503, f"redis unavailable: {exc}") from None
        if not deleted:
            raise ApiError(404, f"no cooldown in Redis for {deployment_id!r}")
        log.info("cooldown of %s released by the admin API", deployment_id)
        return 200, {"deployment_id": deployment_id, "released": True, "deleted_keys": deleted}
