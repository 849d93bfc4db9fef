"""What to probe: the deployments of a LiteLLM config, with what a probe call needs (pure, no secrets resolved).

`coolant.config.loader.load_config` validates the file and derives the ids exactly as the routers do; its registry
keeps only policy fields, so the `litellm_params` a probe needs are read here from the same model_list, in the
same order (the registry preserves it). `api_key` stays an unresolved `os.environ/NAME` reference until the
probe call (`coolant.config.runtime.resolve_secret`), and never appears in a repr.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from coolant.config.loader import Config, load_config

__all__ = ["Target", "load_targets", "targets_from"]

DEFAULT_MODE = "chat"


@dataclass(frozen=True, slots=True)
class Target:
    """One deployment to probe."""

    deployment_id: str
    model_group: str
    model: str
    """`litellm_params.model`, e.g. `openai/gpt-4o-mini`."""
    mode: str = DEFAULT_MODE
    api_base: str | None = None
    api_key: str | None = field(default=None, repr=False)
    """Literal or `os.environ/NAME`; resolved only at the call."""
    litellm_params: Mapping[str, Any] = field(default_factory=dict, repr=False)
    """All params, for the LiteLLM probe engine (may hold secrets: never logged)."""
    model_info: Mapping[str, Any] = field(default_factory=dict, repr=False)


def _string(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def targets_from(cfg: Config, model_list: Sequence[Any]) -> tuple[list[Target], list[str]]:
    """Targets and notes (skipped deployments): wildcards are never probed (scenario S2: one wildcard fans out to up
    to 12 real calls per LiteLLM round), nor are entries without a `litellm_params.model`."""
    targets: list[Target] = []
    notes: list[str] = []
    entries = list(cfg.policy.registry.entries.values())
    if len(entries) != len(model_list):  # cannot happen for a config load_config accepted
        raise ValueError("model_list and the loaded registry disagree")
    for entry, item in zip(entries, model_list, strict=True):
        params: Mapping[str, Any] = item.get("litellm_params") or {}
        info: Mapping[str, Any] = item.get("model_info") or {}
        if entry.wildcard:
            notes.append(f"{entry.deployment_id} ({entry.model_group}): wildcard deployment, not probed")
            continue
        model = _string(params.get("model"))
        if model is None:
            notes.append(f"{entry.deployment_id} ({entry.model_group}): no litellm_params.model, not probed")
            continue
        targets.append(
            Target(
                deployment_id=entry.deployment_id,
                model_group=entry.model_group,
                model=model,
                mode=_string(info.get("mode")) or DEFAULT_MODE,
                api_base=_string(params.get("api_base")),
                api_key=_string(params.get("api_key")),
                litellm_params=dict(params),
                model_info=dict(info),
            )
        )
    return targets, notes


def load_targets(path: str | Path) -> tuple[Config, list[Target], list[str]]:
    """Load and validate a config (ConfigError on a bad one) and list its probe targets."""
    cfg = load_config(path)
    raw = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    targets, notes = targets_from(cfg, raw.get("model_list") or [])
    return cfg, targets, notes
