"""LiteLLM 1.110.2's own per-deployment counting, pinned on a real `litellm.Router` (docs/windows.md, D7).

LiteLLM counts `<id>:successes` and `<id>:fails` in its in-memory cache with `ttl=60`. The test drives a real
Router (mock responses, its in-memory cache on a settable clock) and pins what D7 relies on:
- each key's TTL is anchored at its first increment and is not refreshed by later increments (LC2);
- successes and failures are separate keys with separate anchors;
- a key is gone from its anchor + 60 s on (LC3), and the next increment anchors it again at 1;
- the failure is counted before the cooldown decision reads the counts.
Then it checks that coolant's engine, fed the same deployment's records, cools on the same request.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import pytest
from support_litellm import MESSAGES, deployment

from coolant.processors import Engine, Policy
from coolant.processors.policy import DeploymentEntry, Registry
from coolant.schemas import Outcome
from tests.support.lazy import lazy_or_skip

litellm = lazy_or_skip("litellm")  # imported by the first test that runs (not at collection)

pytestmark = pytest.mark.filterwarnings("ignore:.*ReadOnly.*:UserWarning")

T0 = 1_800_000_000.0
"""A minute boundary, as in the spec's vectors."""

WC4 = [(t, True) for t in (0, 1, 2, 3, 4)] + [(t, False) for t in (55, 56, 57, 58, 59, 60)]
"""Vector WC4: 5/10 at T0+59 is not over 50 %; at T0+60 the successes' key has expired."""
WC5 = [(t, True) for t in (50, 60, 61, 62, 63, 64)] + [(t, False) for t in (110, 111, 112, 113, 114)]
"""Vector WC5: successes anchored at T0+50, not refreshed by those at T0+60..64."""


class PinnedRouter:
    """A Router whose preferred deployment `b` (order 1) takes every request; `a` is its fallback."""

    def __init__(self) -> None:
        self.router = litellm.Router(
            model_list=[deployment("a", "g", order=2), deployment("b", "g", order=1)], num_retries=0
        )
        self.ctx = self.router._core_ctx
        self.mem = self.ctx.health().store.in_memory_cache
        self.now = T0
        self.mem._clock = lambda: self.now  # InMemoryCache's own `clock` hook
        self.error = litellm.InternalServerError("boom", llm_provider="openai", model="x")

    async def request(self, at: float, ok: bool) -> None:
        self.now = T0 + at
        try:
            await self.router.acompletion(model="g", messages=MESSAGES, mock_response="hi" if ok else self.error)
        except (litellm.InternalServerError, litellm.types.router.RouterRateLimitError):
            assert not ok  # the latter once b is cooled and its fallback `a` (failures only) is too

    def key(self, name: str) -> tuple[Any, float] | None:
        """(value, TTL offset from T0) of the in-memory key `b:<name>`, None when absent."""
        full = f"b:{name}"
        if full not in self.mem.cache_dict:
            return None
        return self.mem.cache_dict[full], self.mem.ttl_dict[full] - T0

    def cooled(self) -> bool:
        from litellm.router_utils.cooldown_handlers import get_cooldown_deployments

        return "b" in get_cooldown_deployments(self.ctx, None)


def litellm_run(sequence: list[tuple[float, bool]]) -> tuple[list[bool], list[dict[str, Any]]]:
    """Per request: whether b is cooled afterwards, and b's two keys (a copy: the tests may not change the run's)."""
    cooled, keys = _litellm_run(tuple(sequence))
    return list(cooled), [dict(k) for k in keys]


@functools.cache
def _litellm_run(sequence: tuple[tuple[float, bool], ...]) -> tuple[tuple[bool, ...], tuple[dict[str, Any], ...]]:
    """One real Router's run of `sequence`, once per module: two tests read each vector's (a fresh Router per run,
    on its own clock, so a second run would be the same one)."""
    pinned = PinnedRouter()

    async def go() -> tuple[list[bool], list[dict[str, Any]]]:
        cooled, keys = [], []
        for at, ok in sequence:
            await pinned.request(at, ok)
            cooled.append(pinned.cooled())
            keys.append({"successes": pinned.key("successes"), "fails": pinned.key("fails")})
        return cooled, keys

    cooled, keys = asyncio.run(go())
    return tuple(cooled), tuple(keys)


def coolant_run(sequence: list[tuple[float, bool]]) -> list[bool]:
    registry = Registry.of([DeploymentEntry("a", "g"), DeploymentEntry("b", "g")])
    engine = Engine(Policy(registry=registry))
    out = []
    for i, (at, ok) in enumerate(sequence):
        fields: dict[str, Any] = {} if ok else {"status_code": 500, "exception_type": "InternalServerError"}
        rec = Outcome(event_id=f"e{i}", ts=T0 + at, deployment_id="b", model_group="g", ok=ok, **fields)
        out.append(engine.feed(rec).cooldown is not None)
    return out


def test_litellm_anchors_each_counter_at_its_first_increment() -> None:
    cooled, keys = litellm_run(WC4)
    assert [k["successes"] for k in keys[:5]] == [(n, 60.0) for n in range(1, 6)]  # TTL never refreshed
    assert [k["fails"] for k in keys[5:10]] == [(n, 115.0) for n in range(1, 6)]  # its own anchor, T0+55
    assert keys[9]["successes"] == (5, 60.0)
    assert keys[10] == {"successes": None, "fails": (6, 115.0)}  # gone at anchor + 60
    assert cooled == [False] * 10 + [True]  # 6/6 at T0+60, counted before the decision


def test_a_later_increment_does_not_refresh_and_an_expired_key_restarts() -> None:
    cooled, keys = litellm_run(WC5)
    assert keys[0]["successes"] == (1, 110.0)
    assert keys[5]["successes"] == (6, 110.0)  # T0+64: still anchored at T0+50
    assert keys[10] == {"successes": None, "fails": (5, 170.0)}
    assert cooled == [False] * 10 + [True]


@pytest.mark.parametrize("sequence", [WC4, WC5], ids=["WC4", "WC5"])
def test_coolant_cools_on_the_same_request_as_litellm(sequence: list[tuple[float, bool]]) -> None:
    cooled, _ = litellm_run(sequence)
    assert coolant_run(sequence) == cooled
