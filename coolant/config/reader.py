"""The walker every config section is read with: one `Reader` per file collects the warnings and turns each bad
value into a `ConfigError` naming the file and the key.

Two kinds of checks live on it. LiteLLM's own settings are read as LiteLLM reads them (a number may be written as a
string, a boolean is never a number, spec §2.2); coolant's own are strict (no coercion, unknown keys rejected), so a
typo never falls back to a default silently. No check ever echoes a secret (`show`).
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NoReturn

from coolant.config.errors import ConfigError
from coolant.config.runtime import SECRET_REF_PREFIX
from coolant.processors.policy import CATEGORIES, POLICY_KEY_SUFFIX

__all__ = ["Reader", "did_you_mean", "fmt", "show"]

_POLICY_KEYS: dict[str, str] = {c + POLICY_KEY_SUFFIX: c for c in CATEGORIES}


def show(value: Any) -> str:
    """A value for an error message, YAML-spelled; never echoes an `os.environ/` reference."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        if value.startswith(SECRET_REF_PREFIX):
            return "an os.environ/ reference"
        return repr(value if len(value) <= 40 else value[:37] + "...")
    if isinstance(value, Mapping):
        return "a map"
    if isinstance(value, list):
        return "a list"
    return f"a {type(value).__name__}"


def _type_of(value: Any) -> str:
    """Only the kind of a value, for fields whose content may be secret."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return show(value) if isinstance(value, (Mapping, list)) else f"a {type(value).__name__}"


def did_you_mean(word: Any, choices: Iterable[str]) -> str:
    """A hint for a misspelt key or value, or nothing when no choice is close."""
    close = difflib.get_close_matches(str(word), list(choices), n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def fmt(num: float) -> str:
    """A number as a rule states it (1.0 -> "1")."""
    return f"{num:g}"


class Reader:
    """Walks one raw config, collecting warnings; every failure names `source` and the key."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.warnings: list[str] = []

    def fail(self, key: str | None, problem: str) -> NoReturn:
        raise ConfigError(self.source, key, problem)

    def warn(self, key: str, problem: str) -> None:
        self.warnings.append(f"{self.source}: {key}: {problem}")

    def section(self, value: Any, key: str) -> Mapping[Any, Any]:
        """A map-valued setting; null or absent reads as empty (all defaults)."""
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.fail(key, f"must be a map, got {show(value)}")
        return value

    # -- LiteLLM settings: read as LiteLLM reads them, a boolean is never a number (§2.2) -----

    def _litellm_number(self, value: Any, key: str, rule: str) -> float:
        if isinstance(value, (int, float)):
            num = value
        elif isinstance(value, str) and not value.startswith(SECRET_REF_PREFIX):
            try:
                num = float(value.strip())
            except ValueError:
                self.fail(key, f"{rule}, got {show(value)}")
        elif isinstance(value, str):
            self.fail(key, f"{rule}; coolant never resolves os.environ/ references, write the number")
        else:
            self.fail(key, f"{rule}, got {show(value)}")
        try:
            if math.isfinite(num):
                return float(num)
        except OverflowError:
            pass
        self.fail(key, f"{rule}, got {show(value)}")

    def cooldown_time(self, value: Any, key: str) -> float | None:
        """A duration >= 0; null, absent or a boolean -> None (unset)."""
        if value is None or isinstance(value, bool):
            return None
        rule = "must be a number >= 0"
        num = self._litellm_number(value, key, rule)
        if num < 0:
            self.fail(key, f"{rule}, got {show(value)}")
        return num

    def allowed_fails(self, value: Any, key: str) -> int | None:
        """An integer >= 0 (2.0 and "2" read as 2); null, absent or a boolean -> None."""
        if value is None or isinstance(value, bool):
            return None
        rule = "must be an integer >= 0"
        if isinstance(value, int):
            count = value
        else:
            num = self._litellm_number(value, key, rule)
            if not num.is_integer():
                self.fail(key, f"{rule}, got {show(value)}")
            count = int(num)
        if count < 0:
            self.fail(key, f"{rule}, got {show(value)}")
        return count

    def policy(self, value: Any, key: str) -> dict[str, int] | None:
        """LiteLLM's `<Category>ErrorAllowedFails` map -> {Category: n}; `{}` stays a policy."""
        if value is None:
            return None
        if not isinstance(value, Mapping):
            self.fail(key, f"must be a map of <Category>{POLICY_KEY_SUFFIX} keys or null, got {show(value)}")
        entries: dict[str, int] = {}
        for name, raw in value.items():
            category = _POLICY_KEYS.get(name) if isinstance(name, str) else None
            if category is None:
                hint = did_you_mean(name, _POLICY_KEYS)
                self.warn(f"{key}.{name}", f"unknown allowed_fails_policy key, ignored{hint}")
                continue
            count = self.allowed_fails(raw, f"{key}.{name}")
            if count is not None:
                entries[category] = count
        return entries

    def fallback_groups(self, value: Any, key: str) -> frozenset[str]:
        """R4: groups that are a key of some fallbacks map with a non-empty target list."""
        if value is None:
            return frozenset()
        if not isinstance(value, list):
            self.fail(key, f"must be a list of {{group: [fallback groups]}} maps, got {show(value)}")
        groups: set[str] = set()
        for i, item in enumerate(value):
            if not isinstance(item, Mapping):
                self.fail(f"{key}[{i}]", f"must be a {{group: [fallback groups]}} map, got {show(item)}")
            for group, targets in item.items():
                if targets is None:
                    continue
                if not isinstance(targets, list):
                    self.fail(f"{key}[{i}].{group}", f"must be a list of model groups, got {show(targets)}")
                # Exact keys only: "*" is kept literally and so only matches a group named "*".
                if targets and isinstance(group, str):
                    groups.add(group)
        return frozenset(groups)

    # -- coolant's own settings: strict types, no coercion, unknown keys rejected ---------------

    def known_keys(self, section: Mapping[Any, Any], key: str, allowed: Iterable[str]) -> None:
        allowed = tuple(allowed)
        for name in section:
            if name not in allowed:
                self.fail(f"{key}.{name}", f"unknown key{did_you_mean(name, allowed)}")

    def number(self, value: Any, key: str, rule: str, ok: Callable[[float], bool]) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(key, f"{rule}, got {show(value)}")
        try:
            num = float(value)
        except OverflowError:
            self.fail(key, f"{rule}, got {show(value)}")
        if not math.isfinite(num) or not ok(num):
            self.fail(key, f"{rule}, got {show(value)}")
        return num

    def integer(self, value: Any, key: str, lo: int, hi: int | None = None) -> int:
        rule = f"must be an integer >= {lo}" if hi is None else f"must be an integer from {lo} to {hi}"
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(key, f"{rule}, got {show(value)}")
        if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
            self.fail(key, f"{rule}, got {show(value)}")
        count = int(value)
        if count < lo or (hi is not None and count > hi):
            self.fail(key, f"{rule}, got {show(value)}")
        return count

    def choice(self, value: Any, key: str, choices: tuple[str, ...], *, echo: bool = True) -> str:
        """One of `choices`; `echo=False` for connection settings, where a misplaced secret must not be shown."""
        if not isinstance(value, str) or value not in choices:
            got = f", got {show(value)}" if echo else ""
            self.fail(key, f"must be one of {', '.join(choices)}{got}")
        return value

    def boolean(self, value: Any, key: str) -> bool:
        if not isinstance(value, bool):
            self.fail(key, f"must be true or false, got {show(value)}")
        return value

    def string(self, value: Any, key: str, *, optional: bool = True, secret: bool = False) -> str | None:
        if value is None and optional:
            return None
        if not isinstance(value, str):
            got = _type_of(value) if secret else show(value)
            self.fail(key, f"must be a string{' or null' if optional else ''}, got {got}")
        return value
