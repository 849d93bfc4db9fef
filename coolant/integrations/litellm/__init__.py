"""coolant inside LiteLLM: the callback that publishes every attempt, and the pod's own cooldown decisions.

A LiteLLM proxy names the instance in its `config.yaml` (docs/litellm.md):

    litellm_settings:
      callbacks: ["coolant.integrations.litellm.coolant_callback"]

In code: `litellm.callbacks = [CoolantCallback("kafka:9092")]`.
- `callback.py`: `CoolantCallback`, LiteLLM's hooks, the publishers' lifecycle, its stats.
- `records.py`: one attempt as a `coolant.outcome/1` record (which fields come from where in LiteLLM's arguments).
- `attempts.py`: which hooks report an attempt, and publishing an attempt two of them report once.
- `fast_path.py`: the cooldowns a pod decides itself, written to Redis, and the push of the fleet's cooldowns.
- `cooldowns.py`: the router's cooldown store in the pod (`LocalCooldowns`) and the push feed (`CooldownFeed`).
- `streams.py`: a stream that dies after it opened, which only LiteLLM's stream wrapper reports.
- `ratelimit_headers.py`: providers' rate-limit headers as the record's `ratelimit` fields.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from coolant.integrations.litellm.callback import (
        ENV_BOOTSTRAP,
        ENV_GATEWAY,
        ENV_TOPIC_PREFIX,
        CallbackStats,
        CoolantCallback,
        coolant_callback,
    )
    from coolant.integrations.litellm.fast_path import ENV_CONFIG, ENV_REDIS_KEY_PREFIX, ENV_REDIS_URL
    from coolant.integrations.litellm.records import build_outcome

_HOME = {
    "ENV_BOOTSTRAP": "callback", "ENV_GATEWAY": "callback", "ENV_TOPIC_PREFIX": "callback",
    "CallbackStats": "callback", "CoolantCallback": "callback", "coolant_callback": "callback",
    "ENV_CONFIG": "fast_path", "ENV_REDIS_KEY_PREFIX": "fast_path", "ENV_REDIS_URL": "fast_path",
    "build_outcome": "records",
}
"""Each name's module, imported on first use (PEP 562): a submodule that needs no LiteLLM (`ratelimit_headers`,
`cooldowns`, `fast_path`) imports without it, and `coolant_callback` is still this package's attribute for a proxy
config."""


def __getattr__(name: str) -> object:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
    globals()[name] = value
    return value


__all__ = [
    "ENV_BOOTSTRAP",
    "ENV_CONFIG",
    "ENV_GATEWAY",
    "ENV_REDIS_KEY_PREFIX",
    "ENV_REDIS_URL",
    "ENV_TOPIC_PREFIX",
    "CallbackStats",
    "CoolantCallback",
    "build_outcome",
    "coolant_callback",
]
