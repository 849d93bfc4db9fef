"""Exception names and policy categories (spec N1, §3.7): which allowed-fails entry a failure uses."""

from __future__ import annotations

from coolant.processors.policy import CATEGORIES, AllowedFailsPolicy
from coolant.processors.redact import redact

# §3.7, exception name -> categories, in resolution order. Names of the last row map to ().
_BY_NAME: dict[str, tuple[str, ...]] = {
    "ContentPolicyViolationError": ("ContentPolicyViolation", "BadRequest"),
    "BadRequestError": ("BadRequest",),
    "ContextWindowExceededError": ("BadRequest",),
    "RejectedRequestError": ("BadRequest",),
    "UnsupportedParamsError": ("BadRequest",),
    "ImageFetchError": ("BadRequest",),
    "AuthenticationError": ("Authentication",),
    "Timeout": ("Timeout",),
    "RateLimitError": ("RateLimit",),
    "InternalServerError": ("InternalServer",),
    "ServiceUnavailableError": ("ServiceUnavailable",),
    "MidStreamFallbackError": ("ServiceUnavailable",),
    "BadGatewayError": ("BadGateway",),
    "NotFoundError": ("NotFound",),
    "PermissionDeniedError": (),
    "UnprocessableEntityError": (),
    "PaymentRequiredError": (),
    "APIError": (),
    "APIConnectionError": (),
    "APIResponseValidationError": (),
    "JSONSchemaValidationError": (),
    "BudgetExceededError": (),
    "OpenAIError": (),
}

# Coolant's addition: the status decides when the name is null or not in the table.
_BY_STATUS: dict[int, tuple[str, ...]] = {
    400: ("BadRequest",),
    401: ("Authentication",),
    408: ("Timeout",),
    429: ("RateLimit",),
    500: ("InternalServer",),
    503: ("ServiceUnavailable",),
    502: ("BadGateway",),
    404: ("NotFound",),
}

CANONICAL_NAME: dict[str, str] = {
    "ContentPolicyViolation": "ContentPolicyViolationError",
    "BadRequest": "BadRequestError",
    "Authentication": "AuthenticationError",
    "Timeout": "Timeout",
    "RateLimit": "RateLimitError",
    "InternalServer": "InternalServerError",
    "ServiceUnavailable": "ServiceUnavailableError",
    "BadGateway": "BadGatewayError",
    "NotFound": "NotFoundError",
}
assert set(CANONICAL_NAME) == set(CATEGORIES)


def exception_name(exception_type: str | None) -> str | None:
    """N1: drop any dotted prefix (`litellm.RateLimitError` -> `RateLimitError`).

    Of the redacted text (S1): the name is what the cooldown record shows, and the last dotted part of a secret
    (a JWT's signature) has no shape left to redact. A name without a secret is the same either way."""
    if exception_type is None:
        return None
    return redact(exception_type).rpartition(".")[2]


def is_known_name(name: str | None) -> bool:
    return name is not None and name in _BY_NAME


def categories(name: str | None, status: int | None) -> tuple[str, ...]:
    """The categories a failure belongs to, in resolution order."""
    if name is not None:
        cats = _BY_NAME.get(name)
        if cats is not None:
            return cats
    if status is None:
        return ()
    return _BY_STATUS.get(status, ())


def resolve(policy: AllowedFailsPolicy | None, cats: tuple[str, ...]) -> tuple[str, int] | None:
    """The first category of the failure with an entry in `policy`, and that entry."""
    if not policy:
        return None
    for cat in cats:
        entry = policy.get(cat)
        if entry is not None:
            return cat, entry
    return None
