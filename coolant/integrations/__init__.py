"""Gateway integrations: hooks that publish coolant's input records from inside a gateway.

- `coolant.integrations.litellm`: `CoolantCallback`, a LiteLLM `CustomLogger` that publishes one
  `coolant.outcome/1` per attempt; `coolant_callback` is the instance a LiteLLM proxy config names.

The submodules are not imported here: each needs its gateway's package installed (the `litellm` extra).

Importing this package first repairs one trap (`unshadow`): LiteLLM's proxy puts `os.path.abspath("../..")` of
its working directory first on `sys.path`, so a directory named `coolant` there (a source checkout's root) is
taken for `coolant` itself when coolant is installed in editable mode (its finder comes after the path search):
`coolant` becomes a namespace package over that directory and `coolant.schemas` its JSON schema folder, and the
proxy dies at start-up with "cannot import name 'Outcome' from 'coolant.schemas'".
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

__all__: list[str] = ["unshadow"]

_FIX = ("start the proxy from another working directory, move that directory, or install coolant without -e "
        "(pip install 'coolant[litellm-proxy]')")


def unshadow() -> None:
    """Make `coolant` this package's parent again if a directory without `__init__.py` shadowed it (a namespace
    package has no `__file__`): the namespace modules are dropped and `coolant` is loaded from where this file
    lives. Raises ImportError naming the cause and the fix if that cannot be done."""
    top = sys.modules.get("coolant")
    if top is None or getattr(top, "__file__", None) is not None:
        return
    shadow = list(getattr(top, "__path__", []))
    real = Path(__file__).resolve().parent.parent
    init = real / "__init__.py"
    spec = importlib.util.spec_from_file_location("coolant", init, submodule_search_locations=[str(real)])
    if not init.is_file() or spec is None or spec.loader is None:
        raise ImportError(f"coolant is shadowed by the directory {shadow} on sys.path (LiteLLM's proxy adds the "
                          f"parent of its working directory's parent): {_FIX}")
    for name, module in list(sys.modules.items()):
        if (name == "coolant" or name.startswith("coolant.")) and getattr(module, "__file__", None) is None:
            del sys.modules[name]  # the namespace modules of the shadowing directory (e.g. its `schemas/`)
    module = importlib.util.module_from_spec(spec)
    sys.modules["coolant"] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules["coolant"]
        raise ImportError(f"coolant is shadowed by the directory {shadow} on sys.path and could not be loaded "
                          f"from {real} ({exc}): {_FIX}") from exc
    module.integrations = sys.modules[__name__]  # type: ignore[attr-defined]


unshadow()
