"""Tuning grids: `--grid KEY=V1,V2,...` axes, their cartesian product, one `Policy` per point.

Splitting rule for a value list: the text after the first `=` is split on commas that are at
bracket depth 0 (outside every `{...}` and `[...]`) and outside quotes ('...' or "..."). Each piece
is stripped and read as a YAML value (`coolant.config.overrides.parse_value`), so

    router_settings.allowed_fails=null,0,3          -> None, 0, 3
    coolant.backoff={},{base: 10, max: 600},null    -> {}, {"base": 10, "max": 600}, None
    coolant.window=tumbling,sliding                 -> "tumbling", "sliding"
    router_settings.fallbacks=[],[{a: [b, c]}]      -> [], [{"a": ["b", "c"]}]
    coolant.profile='a,b'                           -> "a,b" (quoted: one value)

An empty piece (`30,,60`), an unbalanced bracket or quote, a value given twice in one axis, or a
key given in two axes is an error. Points are numbered P1, P2, ... in product order: the first
axis varies slowest, as in `itertools.product`.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from coolant.config.errors import ConfigError
from coolant.config.loader import Config, parse_config
from coolant.config.overrides import override, parse_value
from coolant.processors.policy import Policy

__all__ = ["Axis", "GridError", "GridPoint", "build_grid", "identical", "parse_axis", "short_keys", "split_values"]

_OPEN = {"{": "}", "[": "]"}
_CLOSE = {"}": "{", "]": "["}


class GridError(ConfigError):
    """A `--grid` argument that cannot be used (CLI exit 2)."""

    def __init__(self, arg: str, problem: str) -> None:
        super().__init__(f"--grid {arg}", None, problem)


def split_values(text: str) -> list[str]:
    """Split a value list on commas at bracket depth 0 and outside quotes (see the module doc)."""
    pieces: list[str] = []
    stack: list[str] = []
    quote: str | None = None
    current: list[str] = []
    for ch in text:
        if quote is not None:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch in _OPEN:
            stack.append(ch)
        elif ch in _CLOSE:
            if not stack or stack[-1] != _CLOSE[ch]:
                raise ValueError(f"unbalanced {ch!r}")
            stack.pop()
        elif ch == "," and not stack:
            pieces.append("".join(current).strip())
            current = []
            continue
        current.append(ch)
    if quote is not None:
        raise ValueError(f"unclosed quote {quote}")
    if stack:
        raise ValueError(f"unclosed {stack[-1]!r}")
    pieces.append("".join(current).strip())
    return pieces


@dataclass(frozen=True, slots=True)
class Axis:
    """One `--grid` axis: a dotted config key and its values (with their command-line spelling)."""

    key: str
    values: tuple[Any, ...]
    texts: tuple[str, ...]


def parse_axis(arg: str) -> Axis:
    """`KEY=V1,V2,...` -> Axis; raises `GridError` (one line) on anything unusable."""
    key, sep, rest = arg.partition("=")
    key = key.strip()
    if not sep or not key:
        raise GridError(arg, "expected KEY=V1,V2,... (e.g. router_settings.allowed_fails=null,0,3)")
    parts = key.split(".")
    if "" in parts or any(p != p.strip() or not p for p in parts):
        raise GridError(arg, f"{key!r} is not a dotted key")
    try:
        texts = split_values(rest)
    except ValueError as exc:
        raise GridError(arg, f"cannot split the values: {exc}") from None
    if any(not t for t in texts):
        raise GridError(arg, "empty value (write null for a YAML null)")
    values: list[Any] = []
    for text in texts:
        try:
            values.append(parse_value(text))
        except ConfigError as exc:
            raise GridError(arg, exc.problem) from None
    for i, v in enumerate(values):
        for j in range(i):
            if _same(values[j], v):
                raise GridError(arg, f"value {texts[i]!r} is given twice (as {texts[j]!r})")
    return Axis(key, tuple(values), tuple(texts))


def _same(a: Any, b: Any) -> bool:
    # YAML `1` and `true` compare equal in Python; they are different settings here
    return type(a) is type(b) and bool(a == b)


def short_keys(keys: Sequence[str]) -> list[str]:
    """The shortest dotted suffix of each key that no other key shares (labels for tables and charts).

    `model_list.*.model_info.cooldown_time` alone -> `cooldown_time`; beside
    `router_settings.cooldown_time` -> `model_info.cooldown_time` and `router_settings.cooldown_time`.
    """
    out = []
    for key in keys:
        parts = key.split(".")
        for n in range(1, len(parts) + 1):
            suffix = ".".join(parts[-n:])
            if not any(o != key and (o == suffix or o.endswith("." + suffix)) for o in keys):
                break
        out.append(suffix)
    return out


@dataclass(frozen=True, slots=True)
class GridPoint:
    """One policy of the grid: its id (P1...), its settings, a short label, and the parsed config."""

    pid: str
    settings: tuple[tuple[str, Any], ...]
    """(dotted key, value) per axis, in axis order."""
    texts: tuple[str, ...]
    """The command-line spelling of each value, in axis order."""
    label: str
    config: Config

    @property
    def policy(self) -> Policy:
        return self.config.policy


def build_grid(raw: Mapping[str, Any], axes: Sequence[Axis], source: str = "<config>") -> list[GridPoint]:
    """Every point of the cartesian product, validated: each is `parse_config(override(...))`.

    With no axes the grid is the config alone (one point, "baseline"). A key that cannot be set
    or a value the config rejects raises `ConfigError` naming the point.
    """
    seen: dict[str, str] = {}
    for axis in axes:
        if axis.key in seen:
            raise GridError(f"{axis.key}=...", "this key is given in two --grid options; list all values in one")
        seen[axis.key] = axis.key
    names = short_keys([a.key for a in axes])
    points: list[GridPoint] = []
    combos = itertools.product(*(range(len(a.values)) for a in axes))
    for n, combo in enumerate(combos, 1):
        data: Mapping[str, Any] = raw
        settings = []
        texts = []
        for axis, i in zip(axes, combo, strict=True):
            value = axis.values[i]
            try:
                data = override(data, axis.key, value)
            except ConfigError as exc:
                raise GridError(f"{axis.key}={axis.texts[i]}", exc.problem) from None
            settings.append((axis.key, value))
            texts.append(axis.texts[i])
        label = " ".join(f"{k}={t}" for k, t in zip(names, texts, strict=True)) or "baseline"
        config = parse_config(data, f"{source} [{label}]")
        points.append(GridPoint(f"P{n}", tuple(settings), tuple(texts), label, config))
    return points


def identical(points: Sequence[GridPoint]) -> list[tuple[str, str]]:
    """Pairs of points whose parsed policies are equal, as (first id, later id).

    LiteLLM's sections ignore unknown keys, so an axis with a misspelt key changes nothing; this
    is how the command notices. Policies are plain frozen data, so equal policies have equal reprs.
    """
    first: dict[str, str] = {}
    out = []
    for p in points:
        key = repr(p.policy)
        if key in first:
            out.append((first[key], p.pid))
        else:
            first[key] = p.pid
    return out
