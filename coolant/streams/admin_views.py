"""The admin API's pure parts (docs/admin-api.md): authentication, request validation, rate limiting and the
shapes of its answers, with no I/O; `admin_api.py` is the shell that serves them."""

from __future__ import annotations

import hmac
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import web as aioweb

from coolant.io.cooldowns import ActiveCooldown
from coolant.processors import windows
from coolant.processors.emit import mask
from coolant.processors.policy import Policy, Registry
from coolant.processors.state import NEG_INF, PathState
from coolant.schemas import Cooldown, Window, to_dict
from coolant.schemas.cooldown import whole_as_int

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)

STARTING = "the worker is starting: partitions are not assigned yet; retry shortly"

HISTORY_KEEP = 5
"""Cooldowns kept per deployment for `GET /deployments/{id}`: enough to see a pattern, small to rewrite."""
MAX_MANUAL_SECONDS = 30 * 86400
"""A manual cooldown ends within the cooldowns topic's default retention; also keeps PXAT in Redis's range."""
MANUAL_FIELDS = frozenset({"deployment_id", "model_group", "cooldown_time", "until", "note", "force"})
MAX_BODY = 16 * 1024
"""Bytes of a request body; more is 413 (a manual cooldown's body is well under 1 kB)."""
MAX_NAME = 256
"""Characters of a deployment id or model group."""
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+=~-]*")
"""What an id the registry does not know may hold: no '/', '..' at the start, spaces, quotes or control characters."""
WRITE_RATE = 2.0
"""Default admin writes per second per worker (`--admin-rate`), with bursts of `WRITE_BURST`."""
WRITE_BURST = 20
MATERIALIZE_WAIT = 10.0
"""Seconds a POST waits for its cooldown to reach Redis before answering anyway (the materializer is behind)."""
FAUST_PAGES = re.compile(r"/(router(/.*)?)?")
"""Faust's built-in pages: the index and the routing metadata (partition assignment, host names)."""


class ApiError(Exception):
    """A 4xx/5xx answer with a JSON `{"error": message}` body."""

    def __init__(self, status: int, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.retry_after = retry_after


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


def check_name(value: str, what: str, known: bool) -> None:
    """400 unless `value` is a usable id or group: 1-256 characters, and, unless the registry knows it, only
    letters, digits and `._:@+=~-` (so nothing like a path, a NUL or a 10 kB string reaches a topic or a log)."""
    if not value or len(value) > MAX_NAME:
        raise ApiError(400, f"{what}: 1 to {MAX_NAME} characters")
    if known:
        return
    if not SAFE_NAME.fullmatch(value):
        raise ApiError(400, f"{what}: only letters, digits and . _ : @ + = ~ - (starting with a letter or digit)")


class TokenBucket:
    """The writes' rate limit: `rate` per second on average, `burst` at once."""

    def __init__(self, rate: float, burst: int, now: float) -> None:
        self.rate = rate
        self.burst = float(burst)
        self.tokens = float(burst)
        self.last = now

    def take(self, now: float) -> float:
        """0 when a write may go now (and counts it); else the seconds until one may."""
        self.tokens = min(self.burst, self.tokens + max(0.0, now - self.last) * self.rate)
        self.last = now
        if self.tokens >= 1:
            self.tokens -= 1
            return 0.0
        return (1 - self.tokens) / self.rate


@dataclass(frozen=True, slots=True)
class ManualRequest:
    """A validated `POST /cooldowns` body: exactly one of `cooldown_time` and `until` is set."""

    deployment_id: str
    model_group: str | None = None
    cooldown_time: float | None = None
    until: float | None = None
    note: str | None = None
    force: bool = False


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
    if len(deployment_id) > MAX_NAME:
        raise ApiError(400, f"deployment_id: 1 to {MAX_NAME} characters")
    force = data.get("force", False)
    if not isinstance(force, bool):
        raise ApiError(400, "force: expected true or false")
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
        force=force,
    )


def manual_cooldown(req: ManualRequest, registry: Registry, now: float, event_id: str) -> Cooldown:
    """The cooldown record for a manual request at wall time `now`.

    The group is the registry's (R3): a different `model_group` is refused; an id the registry does not know is
    404 unless the caller says `force` and names its group (a deployment the config lacks but the routers have).
    """
    entry = registry.get(req.deployment_id)
    check_name(req.deployment_id, "deployment_id", entry is not None)
    if req.model_group is not None:
        check_name(req.model_group, "model_group", entry is not None and req.model_group == entry.model_group)
    if entry is None and (req.model_group is None or not req.force):
        raise ApiError(
            404, f"unknown deployment {req.deployment_id!r} (give model_group and \"force\": true to cool it anyway)"
        )
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
        cooldown_time=whole_as_int(duration),
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


def materialized(cd: Cooldown, detail: Cooldown | None, in_force_until: float | None) -> bool:
    """Whether Redis shows `cd` written: coolant's detail is this very record, or an entry that ends no earlier is
    in force (the materializer then rightly skipped it, as it never shortens one)."""
    if detail is not None and detail.event_id == cd.event_id:
        return True
    return in_force_until is not None and in_force_until >= cd.until


def litellm_end(raw: bytes | str | None) -> float | None:
    """When LiteLLM's cooldown value ends (`timestamp + cooldown_time`); None when absent or unreadable."""
    if raw is None:
        return None
    try:
        value = orjson.loads(raw)
        end = float(value["timestamp"]) + float(value["cooldown_time"])
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None
    return end


def cooldown_view(active: ActiveCooldown, detail: Cooldown | None) -> dict[str, Any]:
    """One entry of `GET /cooldowns`: what routers see, plus coolant's evidence when its detail describes it."""
    out = asdict(active)
    described = detail is not None and active.reason is not None and float(detail.ts) == active.started
    out["event_id"] = detail.event_id if described and detail is not None else None
    out["trigger_event_id"] = detail.trigger_event_id if described and detail is not None else None
    out["window"] = to_dict(detail)["window"] if described and detail is not None else None
    return out


def error_response(status: int, message: str, headers: Mapping[str, str] | None = None) -> aioweb.Response:
    return aioweb.json_response({"error": message}, status=status, headers=headers)


def api_error_response(exc: ApiError) -> aioweb.Response:
    headers: dict[str, str] = {}
    if exc.status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="coolant"'
    if exc.retry_after is not None:
        headers["Retry-After"] = str(max(1, round(exc.retry_after + 0.5)))
    return error_response(exc.status, exc.message, headers or None)


def json_errors(token: str | None) -> Any:
    """Every error of the web server as JSON, whatever raised it (aiohttp's 404/405/413, a bug: 500), and
    Faust's own pages behind the admin token."""

    @aioweb.middleware
    async def middleware(
        request: aioweb.Request, handler: Callable[[aioweb.Request], Awaitable[aioweb.StreamResponse]]
    ) -> aioweb.StreamResponse:
        try:
            if FAUST_PAGES.fullmatch(request.path):
                check_token(request.headers.get("Authorization"), token)
            return await handler(request)
        except ApiError as exc:
            return api_error_response(exc)
        except aioweb.HTTPException as exc:
            if exc.status < 400:
                raise
            headers = {k: exc.headers[k] for k in ("Allow", "Retry-After") if k in exc.headers}
            return error_response(exc.status, exc.reason, headers or None)
        except Exception:
            log.exception("web: %s %s failed", request.method, request.path[:200])
            return error_response(500, "internal error (logged by the worker)")

    return middleware
