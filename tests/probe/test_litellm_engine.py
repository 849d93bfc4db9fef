"""The LiteLLM probe engine (`--engine litellm` / `auto`): what `litellm.ahealth_check` answers becomes a record.

Here `ahealth_check` is replaced by a stand-in answering in its two documented shapes: a dict without `error` on
success, `{"error": str, "exception": exc, ...}` on failure (litellm/main.py), so that the mapping, the key
scrubbing and the dispatch are checked without an upstream. The exceptions are LiteLLM's own classes, so status
codes and names are the real ones. The real call against the fake upstream, compared with coolant's HTTP engine,
is tests/probe/test_litellm_verdicts.py.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from typing import Any

import pytest

from coolant.probe.classify import classify
from coolant.probe.http import LiteLLMProber, Unsupported
from coolant.probe.service import _Dispatch
from coolant.probe.targets import Target
from tests.support.lazy import lazy_or_skip

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network fetch of the cost map at import
litellm = lazy_or_skip("litellm")  # imported by the first test that runs (not at collection)

SECRET = "sk-litellm-engine-test-0123456789"


def target(model: str = "gemini/gemini-2.0-flash", mode: str = "chat", **params: Any) -> Target:
    litellm_params = {"model": model, "api_key": "os.environ/COOLANT_ENGINE_TEST_KEY", **params}
    return Target(deployment_id="dep-1", model_group="g", model=model, mode=mode, api_base=params.get("api_base"),
                  api_key=litellm_params["api_key"], litellm_params=litellm_params)


class FakeHealthCheck:
    """Stands in for `litellm.ahealth_check`; remembers what it was called with."""

    def __init__(self, answer: dict[str, Any]) -> None:
        self.answer = answer
        self.calls: list[tuple[dict[str, Any], dict[str, Any]]] = []

    async def __call__(self, params: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        self.calls.append((params, kwargs))
        return self.answer


@pytest.fixture
def proxy_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the engine believe LiteLLM's proxy extra (fastapi) is installed."""
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: object() if name == "fastapi" else real(name, *a))
    monkeypatch.setenv("COOLANT_ENGINE_TEST_KEY", SECRET)


def fake(monkeypatch: pytest.MonkeyPatch, answer: dict[str, Any]) -> FakeHealthCheck:
    check = FakeHealthCheck(answer)
    monkeypatch.setattr(importlib.import_module("litellm"), "ahealth_check", check)  # the module, not the stand-in
    return check


async def test_healthy_answer(proxy_extra: None, monkeypatch: pytest.MonkeyPatch) -> None:
    check = fake(monkeypatch, {"x-ratelimit-remaining-requests": "99"})
    t = target(mode="embedding")
    result, secrets = await LiteLLMProber(5.0).probe(t)
    assert result.ok and result.status_code == 200
    [(params, kwargs)] = check.calls
    assert params["api_key"] == SECRET  # os.environ/ resolved at the call, as LiteLLM's proxy would
    assert kwargs["mode"] == "embedding"
    h = classify(t, result, 7, 60.0, "p1", secrets)
    assert (h.healthy, h.status_code, h.exception_type, h.mode) == (True, None, None, "embedding")


async def test_failure_keeps_litellms_status_and_name_and_scrubs_the_key(
    proxy_extra: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    exc = litellm.AuthenticationError(message=f"Incorrect API key provided: {SECRET}", llm_provider="gemini",
                                      model="gemini-2.0-flash")
    fake(monkeypatch, {"error": str(exc), "exception": exc, "raw_request_typed_dict": None})
    t = target()
    result, secrets = await LiteLLMProber(5.0).probe(t)
    assert not result.ok
    h = classify(t, result, 7, 60.0, "p1", secrets)
    assert (h.healthy, h.status_code, h.exception_type) == (False, 401, "AuthenticationError")
    assert h.exception_message is not None and "Incorrect API key" in h.exception_message
    assert SECRET not in h.exception_message


async def test_an_import_error_inside_litellm_is_no_verdict(proxy_extra: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A local installation problem must not report the deployment unhealthy: the probe is skipped instead."""
    err = ModuleNotFoundError("No module named 'fastapi'")
    fake(monkeypatch, {"error": str(err), "exception": err})
    with pytest.raises(Unsupported):
        await LiteLLMProber(5.0).probe(target())


def test_the_engine_refuses_to_start_without_the_proxy_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "fastapi" else real(name, *a))
    with pytest.raises(ImportError, match="proxy extra"):
        LiteLLMProber(5.0)


async def test_auto_uses_http_where_it_can_and_litellm_for_the_rest(
    proxy_extra: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    check = fake(monkeypatch, {})
    dispatch = _Dispatch("auto", 5.0)
    assert dispatch.litellm is not None
    result, _ = await dispatch.probe(target("gemini/gemini-2.0-flash"))  # no OpenAI wire format: LiteLLM
    assert result.ok and len(check.calls) == 1
    http_only = _Dispatch("http", 5.0)
    with pytest.raises(Unsupported, match="not OpenAI-compatible"):
        await http_only.probe(target("gemini/gemini-2.0-flash"))
    assert len(check.calls) == 1
