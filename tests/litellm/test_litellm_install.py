"""Installing and loading the callback in a LiteLLM proxy: the import trap of its `sys.path`, and the extra.

LiteLLM 1.110.2's `proxy_server` puts `os.path.abspath("../..")` of its working directory first on `sys.path`.
With coolant installed in editable mode (setuptools' finder on `sys.meta_path`, after the path search), a
source checkout's root named `coolant` there became `coolant` itself, a namespace package whose `schemas` is the
JSON schema folder: the proxy died with "cannot import name 'Outcome' from 'coolant.schemas'"
(`coolant.integrations.unshadow`). The test runs the proxy's own loading steps in a fresh interpreter: import
`proxy_server` from such a working directory, then `get_instance_fn` on the config's callback path.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

if importlib.util.find_spec("litellm") is None:  # found, not imported: the subprocesses import it
    pytest.skip("litellm (the [test] extra) is not installed", allow_module_level=True)

pytestmark = pytest.mark.timeout(900)  # a fresh interpreter imports the proxy; pip resolves the extra

ROOT = Path(__file__).resolve().parents[2]

LOAD = textwrap.dedent('''
    import sys
    from importlib.machinery import PathFinder
    from importlib.util import spec_from_file_location

    REAL = sys.argv[1]

    class Editable:
        """What `pip install -e` puts on sys.meta_path (after the path search): coolant from the checkout."""

        @classmethod
        def find_spec(cls, fullname, path=None, target=None):
            if fullname == "coolant":
                return spec_from_file_location("coolant", REAL + "/__init__.py")
            if fullname.rpartition(".")[0] == "coolant":
                return PathFinder.find_spec(fullname, path=[REAL])
            return None

    sys.meta_path = [f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable__")]
    sys.meta_path.append(Editable)
    import litellm.proxy.proxy_server  # noqa: F401  (puts abspath("../..") first on sys.path)
    from litellm.proxy.types_utils.utils import get_instance_fn

    callback = get_instance_fn("coolant.integrations.litellm.coolant_callback", config_file_path="proxy.yaml")
    import coolant
    from coolant.schemas import Outcome

    print(type(callback).__name__, Outcome.__name__, coolant.__file__)
''')


@pytest.mark.slow  # a fresh interpreter imports all of LiteLLM's proxy: the slowest service-free test
def test_a_checkout_named_coolant_above_the_proxy_does_not_shadow_it(tmp_path: Path) -> None:
    checkout = tmp_path / "coolant"  # a source checkout's root, as `git clone` names it
    (checkout / "schemas" / "json").mkdir(parents=True)
    (checkout / "schemas" / "json" / "outcome.v1.schema.json").write_text("{}")
    workdir = tmp_path / "deploy" / "litellm"  # the proxy's working directory: ../.. is tmp_path
    workdir.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    out = subprocess.run([sys.executable, "-c", LOAD, str(ROOT / "coolant")], cwd=workdir, env=env,
                         capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    name, outcome, where = out.stdout.split()[-3:]
    assert (name, outcome) == ("CoolantCallback", "Outcome")
    assert where == str(ROOT / "coolant" / "__init__.py")


def _proxy_extra() -> list[str]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        extras: dict[str, list[str]] = tomllib.load(f)["project"]["optional-dependencies"]
    assert "coolant[litellm-proxy]" in extras["test"]  # the tests' proxies run on exactly this set
    return extras["litellm-proxy"]


@pytest.mark.integration  # pip asks the package index
def test_the_proxy_extra_resolves_without_litellms_own_proxy_extra() -> None:
    """`coolant[litellm-proxy]` is what docs/litellm.md installs a proxy with: LiteLLM pinned, none of LiteLLM's
    `proxy` extra (it needs `litellm-proxy==1.110.2`, which the index does not have), and pip resolves it: from
    what is installed here (the environment every proxy test runs in), else from the index."""
    requirements = [Requirement(r) for r in _proxy_extra()]
    by_name = {r.name: r for r in requirements}
    assert str(by_name["litellm"].specifier) == "==1.110.2" and not by_name["litellm"].extras
    assert "litellm-proxy" not in by_name
    for req in requirements:
        assert req.specifier.contains(metadata.version(req.name), prereleases=True), req
    out = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", *map(str, requirements)],
                         capture_output=True, text=True, timeout=600, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
