"""Tuning grids: one setting replaced in a raw config (`coolant tune --grid KEY=V1,V2`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn

import yaml

from coolant.config.errors import ConfigError
from coolant.config.reader import show


def _plain(value: Any) -> Any:
    """A deep copy as plain dicts and lists, so override() can edit it in place."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def override(data: Mapping[str, Any], dotted_key: str, value: Any) -> dict[str, Any]:
    """A deep copy of the raw config with one setting replaced (for `coolant tune` grids).

    `model_list.*.model_info.cooldown_time` sets it on every deployment; a number selects one
    list item. Missing or null maps on the way are created, so `coolant.backoff.base` works on
    a config without a `coolant:` section. The result is raw data: `parse_config` validates it.
    """
    parts = dotted_key.split(".")
    if not dotted_key or "" in parts:
        raise ConfigError("override", dotted_key or "''", "not a dotted key")
    if not isinstance(data, Mapping):
        raise ConfigError("override", dotted_key, f"the config must be a map, got {show(data)}")
    out: dict[str, Any] = _plain(data)
    _assign(out, parts, 0, value, dotted_key)
    return out


def _assign(node: Any, parts: list[str], i: int, value: Any, dotted_key: str) -> None:
    here = ".".join(parts[:i]) or "the top level"
    part, last = parts[i], i == len(parts) - 1

    def fail(problem: str) -> NoReturn:
        raise ConfigError("override", dotted_key, problem)

    def descend(container: Any, slot: Any) -> None:
        if last:
            container[slot] = _plain(value)
            return
        child = container[slot] if not isinstance(container, dict) else container.get(slot)
        if child is None:
            if parts[i + 1] == "*" or parts[i + 1].isdigit():
                fail(f"{'.'.join(parts[: i + 1])} is missing, so {parts[i + 1]} selects nothing")
            child = container[slot] = {}
        _assign(child, parts, i + 1, value, dotted_key)

    if isinstance(node, list):
        if part == "*":
            if not node:
                fail(f"{here} is empty, so * selects nothing")
            for j in range(len(node)):
                descend(node, j)
        elif part.isdigit() and int(part) < len(node):
            descend(node, int(part))
        else:
            fail(f"{here} is a list of {len(node)}: use * or an index below {len(node)}, not {part!r}")
    elif isinstance(node, dict):
        if part == "*":
            fail(f"{here} is a map: * only selects list items")
        descend(node, part)
    else:
        fail(f"{here} is {show(node)}, not a map or a list")


def parse_value(text: str) -> Any:
    """A command-line grid value with YAML meaning: "30" -> 30, "null" -> None, "{}" -> {}."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        problem = getattr(e, "problem", None) or type(e).__name__
        raise ConfigError("command line", None, f"cannot read {text!r} as a YAML value: {problem}") from None
