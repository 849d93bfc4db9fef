"""A module imported at its first use, for test modules that name LiteLLM at their top: collecting them (every
pytest-xdist process collects every test module) does not import LiteLLM, only running one of their tests does."""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType
from typing import Any

import pytest


class LazyModule:
    """Stands for the module `name`: reading or setting an attribute imports it and reads or sets the module's own
    (`litellm.callbacks = [...]`). Names starting with `_` are not looked up: pytest asks every module global for
    some, and must not import the module by asking. `monkeypatch.setattr` wants the module itself
    (`importlib.import_module(name)`): it restores what the target's own `__dict__` held."""

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "_name", name)

    def _module(self) -> ModuleType:
        return importlib.import_module(object.__getattribute__(self, "_name"))

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):  # collection's look at every module global (`__test__`, `__wrapped__`, mocks' names)
            raise AttributeError(attr)
        return getattr(self._module(), attr)

    def __setattr__(self, attr: str, value: Any) -> None:
        setattr(self._module(), attr, value)



def lazy_or_skip(name: str) -> Any:
    """`pytest.importorskip(name)` without the import: skip the calling module if `name` is not installed, else a
    `LazyModule` for it."""
    if importlib.util.find_spec(name) is None:
        pytest.skip(f"{name} (the [test] extra) is not installed", allow_module_level=True)
    return LazyModule(name)
