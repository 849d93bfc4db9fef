"""LiteLLM's own health verdicts against coolant's, on the fake upstream (no stand-in: the real `ahealth_check`).

For each deployment of the fake upstream (chat, embedding and completion modes; every status it answers; one
closed port), three verdicts are taken:

- LiteLLM's: `litellm.ahealth_check` as the proxy's health check calls it, read the way the proxy reads it
  (healthy when the answer has no `error`; else `exception.status_code`, 500 when absent, which the proxy
  stores as `exception_status`, and the exception's class name);
- coolant's HTTP engine (`HttpProber`, the default for OpenAI-format deployments), through `classify`;
- coolant's LiteLLM engine (`LiteLLMProber`), through `classify`.

Healthy/unhealthy and the status LiteLLM's shared key carries (`exception_status`) must agree for every
deployment. Exception names agree except for the statuses in `NAME_DIFFERENCES` (measured with LiteLLM
1.110.2): the HTTP engine names a status by LiteLLM's class for it, while LiteLLM's OpenAI path maps only
some statuses to those classes. The test pins that table exactly, so a change on either side shows up here.
"""

from __future__ import annotations

import asyncio
import os
import socket
from typing import Any

from coolant.probe.classify import classify
from coolant.probe.http import PROMPT, HttpProber, LiteLLMProber
from coolant.probe.results import exception_status
from coolant.probe.targets import Target
from tests.probe import litellm_proxy
from tests.support.lazy import LazyModule
from tests.support.upstream import FakeOpenAI

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network fetch of the cost map at import
litellm_proxy.require("litellm", "fastapi")  # ahealth_check imports litellm.proxy.litellm_pre_call_utils (fastapi)

litellm = LazyModule("litellm")  # imported by the test when it runs (not at collection)

KEY = "sk-verdicts-test-0123456789"
ERROR_STATUSES = [400, 401, 403, 404, 408, 409, 413, 418, 422, 429, 500, 501, 502, 503, 504]
DEAD = "closed-port"
NAME_DIFFERENCES: dict[str, tuple[str, str]] = {
    # deployment: (LiteLLM's exception class, coolant HTTP engine's exception_type). A refused connection has no
    # HTTP status: coolant names it as the router names such a request failure, LiteLLM's health check wraps it.
    DEAD: ("InternalServerError", "APIConnectionError"),
}

STATUSES = {f"s{code}": code for code in ERROR_STATUSES} | {"emb401": 401}
"""What the upstream answers (the `upstream` fixture, tests/probe/conftest.py); every other deployment is healthy."""

Verdict = tuple[bool, int | None, str | None]
"""(healthy, exception_status as LiteLLM's shared key stores it, exception class name)."""


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def targets(up: FakeOpenAI) -> list[Target]:
    deployments = [("ok", "chat"), ("emb", "embedding"), ("emb401", "embedding"), ("cmpl", "completion")]
    deployments += [(f"s{code}", "chat") for code in ERROR_STATUSES]
    bases = {dep: up.base(dep) for dep, _ in deployments} | {DEAD: f"http://127.0.0.1:{closed_port()}/v1"}
    deployments.append((DEAD, "chat"))
    out = []
    for dep, mode in deployments:
        params: dict[str, Any] = {"model": f"openai/model-{dep}", "api_base": bases[dep], "api_key": KEY}
        out.append(Target(deployment_id=dep, model_group=f"group-{dep}", model=params["model"], mode=mode,
                          api_base=bases[dep], api_key=KEY, litellm_params=params))
    return out


async def litellm_verdict(t: Target) -> Verdict:
    """What LiteLLM's proxy health check concludes (`perform_health_check` -> `_perform_health_check`)."""
    answer = await litellm.ahealth_check(dict(t.litellm_params), mode=t.mode, prompt=PROMPT, input=[PROMPT])
    if "error" not in answer:
        return True, None, None
    exc = answer["exception"]
    return False, getattr(exc, "status_code", 500), type(exc).__name__


async def coolant_verdict(prober: HttpProber | LiteLLMProber, t: Target) -> Verdict:
    result, secrets = await prober.probe(t)
    h = classify(t, result, 0, 60.0, "verdicts-test", secrets)
    return h.healthy, None if h.healthy else exception_status(h), h.exception_type


async def test_litellm_health_check_and_coolant_agree_on_every_deployment(upstream: FakeOpenAI) -> None:
    ts = targets(upstream)
    http = HttpProber(timeout=10.0)
    await http.start()
    try:
        ours = await asyncio.gather(*(coolant_verdict(http, t) for t in ts))
    finally:
        await http.close()
    # coolant's HTTP engine: one upstream call per deployment, whatever the answer
    assert dict(upstream.names()) == {t.deployment_id: 1 for t in ts if t.deployment_id != DEAD}

    # LiteLLM's verdicts and its engine's, side by side: each waits out LiteLLM's retries of 408, 429 and 5xx
    both = await asyncio.gather(*(litellm_verdict(t) for t in ts),
                                *(coolant_verdict(LiteLLMProber(timeout=60.0), t) for t in ts))
    theirs, engine = both[:len(ts)], both[len(ts):]
    # and each deployment was reached by both LiteLLM calls too (they retry 408, 429 and 5xx: maybe more than once)
    assert all(upstream.count(t.deployment_id) >= 3 for t in ts if t.deployment_id != DEAD)

    names: dict[str, tuple[str | None, str | None]] = {}
    for t, (h_ll, st_ll, name_ll), (h_http, st_http, name_http), e in zip(ts, theirs, ours, engine, strict=True):
        dep = t.deployment_id
        expected_healthy = dep in {"ok", "emb", "cmpl"}
        assert (h_ll, h_http, e[0]) == (expected_healthy,) * 3, dep
        assert st_ll == st_http == e[1], dep  # the status LiteLLM's shared key carries
        if dep.startswith("s"):
            assert st_ll == int(dep[1:]), dep
        assert e[2] == name_ll, dep  # the LiteLLM engine keeps LiteLLM's own class name
        if name_ll != name_http:
            names[dep] = (name_ll, name_http)
    assert theirs[[t.deployment_id for t in ts].index("emb401")] == (False, 401, "AuthenticationError")
    assert names == NAME_DIFFERENCES
