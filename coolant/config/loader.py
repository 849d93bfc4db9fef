"""Load a LiteLLM proxy config YAML into coolant's `Policy` plus runtime settings (contract §3).

The LiteLLM sections (`model_list`, `router_settings`, in `litellm_sections`) are read as LiteLLM reads them, so
one file drives both the gateways and coolant; everything else in that file is ignored. coolant's own `coolant:`
section (`coolant_section`) is strict instead: an unknown key or a bad value is a `ConfigError` (exit 2), so a
typo can never fall back to a default silently (spec §2.2). One `Reader` (`reader`) walks all of it.

Secrets (`api_key`, passwords, `os.environ/NAME` references) are never resolved here and never
appear in an error or a warning: the worker resolves them at the edge with `runtime.resolve_secret`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from coolant.config.coolant_section import read_coolant
from coolant.config.errors import ConfigError
from coolant.config.litellm_sections import derive_deployment_id, entry_from_record, read_model_list, read_router
from coolant.config.reader import Reader, show
from coolant.config.runtime import RuntimeSettings
from coolant.config.yaml_read import load_yaml
from coolant.processors.policy import Policy

__all__ = ["Config", "derive_deployment_id", "entry_from_record", "load_config", "parse_config"]
"""`derive_deployment_id` and `entry_from_record` live in `litellm_sections`; they are named here too because
this is the path users and tools import them from."""


@dataclass(frozen=True, slots=True)
class Config:
    """A loaded config: the policy inputs, the runtime settings, and where they came from.

    `warnings` are non-fatal findings (ignored policy keys, ids that will not match LiteLLM's);
    the CLI prints them once at start-up.
    """

    policy: Policy
    runtime: RuntimeSettings = field(default_factory=RuntimeSettings)
    source: str = "<config>"
    warnings: tuple[str, ...] = ()


def parse_config(data: Mapping[str, Any], source: str = "<config>") -> Config:
    """Build a `Config` from an already-parsed config map (a YAML file's top level)."""
    r = Reader(source)
    if not isinstance(data, Mapping):
        r.fail(None, f"the top level must be a map, got {show(data)}")
    registry = read_model_list(r, data.get("model_list"))
    router = read_router(r, data.get("router_settings"))
    options, runtime = read_coolant(r, data.get("coolant"))
    return Config(Policy(registry, router, options), runtime, source, tuple(r.warnings))


def load_config(path: str | Path) -> Config:
    """Read and parse a LiteLLM proxy config YAML; every failure is a one-line `ConfigError`."""
    source = os.fspath(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(source, None, "file not found") from None
    except UnicodeDecodeError:
        raise ConfigError(source, None, "not UTF-8 text") from None
    except OSError as e:
        raise ConfigError(source, None, f"cannot read: {e.strerror or type(e).__name__}") from None
    try:
        data = load_yaml(text)  # a safe loader, C or Python, with a linear-time path for plain documents
        del text
    except yaml.YAMLError as e:
        # Only the problem and its position: the snippet YAML would quote may hold a secret.
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or type(e).__name__
        raise ConfigError(source, None, f"invalid YAML{where}: {problem}") from None
    if data is None:
        raise ConfigError(source, None, "the top level must be a map, got an empty file")
    if not isinstance(data, Mapping):
        raise ConfigError(source, None, f"the top level must be a map, got {show(data)}")
    return parse_config(data, source)
