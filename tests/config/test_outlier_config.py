"""The outlier profile's switch and knobs (docs/outlier.md): one line turns it on, every knob has a default."""

from __future__ import annotations

from typing import Any

import pytest

from coolant.config.errors import ConfigError
from coolant.config.loader import parse_config
from coolant.processors.policy import Backoff, Options, Outlier


def options(coolant: dict[str, Any]) -> Options:
    return parse_config({"coolant": coolant}).policy.options


def test_the_compatible_profile_is_the_default_and_has_no_outlier_knobs() -> None:
    o = options({})
    assert o.profile == "compatible" and o.outlier is None and o.backoff is None and o.litellm_counters is True
    assert o.min_requests == 5


def test_one_line_turns_the_profile_on_with_every_default() -> None:
    o = options({"profile": "outlier"})
    assert o.profile == "outlier"
    assert o.outlier == Outlier(
        consecutive=4, consecutive_single=3, rate_window=10, rate_threshold=0.5, rate_min_requests=10
    )
    assert o.backoff == Backoff(base=5, factor=2, max=300, reset_after=300, probation=True)  # X13
    assert o.litellm_counters is False and o.min_requests == 10  # X9.5
    assert options({"profile": "outlier", "thresholds": {"min_requests": 5}}).min_requests == 5
    assert options({"profile": "outlier", "litellm_counters": True}).litellm_counters is True


@pytest.mark.parametrize(
    ("backoff", "expected"),
    [
        ({}, Backoff(probation=True)),
        ({"max": 60}, Backoff(max=60, probation=True)),
        ({"probation": False}, Backoff(probation=False)),
        (None, None),
    ],
)
def test_the_profiles_backoff_can_be_changed_or_turned_off(backoff: Any, expected: Backoff | None) -> None:
    assert options({"profile": "outlier", "backoff": backoff}).backoff == expected


def test_knobs() -> None:
    o = options({"profile": "outlier", "outlier": {"consecutive": 6, "consecutive_single": 1, "rate_window": 30,
                                                   "rate_threshold": 0.8, "rate_min_requests": 50}})
    assert o.outlier == Outlier(6, 1, 30, 0.8, 50)
    assert options({"profile": "outlier", "outlier": None}).outlier == Outlier()


@pytest.mark.parametrize(
    ("coolant", "key", "problem"),
    [
        ({"outlier": {}}, "coolant.outlier", "only applies with profile: outlier"),
        ({"profile": "compatible", "outlier": {"consecutive": 3}}, "coolant.outlier", "only applies with profile"),
        ({"profile": "outlier", "outlier": {"consecutiv": 3}}, "coolant.outlier.consecutiv",
         "unknown key (did you mean consecutive?)"),
        ({"profile": "outlier", "outlier": {"consecutive": 0}}, "coolant.outlier.consecutive",
         "must be an integer >= 1, got 0"),
        ({"profile": "outlier", "outlier": {"consecutive_single": 2.5}}, "coolant.outlier.consecutive_single",
         "must be an integer >= 1, got 2.5"),
        ({"profile": "outlier", "outlier": {"rate_window": 61}}, "coolant.outlier.rate_window",
         "must be an integer from 1 to 60, got 61"),
        ({"profile": "outlier", "outlier": {"rate_threshold": 1}}, "coolant.outlier.rate_threshold",
         "must be a number between 0 and 1 (exclusive), got 1"),
        ({"profile": "outlier", "outlier": {"rate_min_requests": True}}, "coolant.outlier.rate_min_requests",
         "got true"),
        ({"profile": "outlier", "outlier": [4]}, "coolant.outlier", "must be a map, got a list"),
    ],
)
def test_errors_name_the_key(coolant: dict[str, Any], key: str, problem: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({"coolant": coolant}, source="c.yaml")
    assert err.value.key == key
    assert problem in err.value.problem


def test_the_registry_knows_which_groups_have_fallbacks() -> None:
    """X12 reads LiteLLM's `router_settings.fallbacks` (R4): a single group with fallbacks is not lone."""
    policy = parse_config({
        "model_list": [{"model_name": "primary", "litellm_params": {"model": "openai/a"}, "model_info": {"id": "p"}},
                       {"model_name": "solo", "litellm_params": {"model": "openai/b"}, "model_info": {"id": "s"}}],
        "router_settings": {"fallbacks": [{"primary": ["backup"]}]},
        "coolant": {"profile": "outlier"},
    }).policy
    assert policy.single("primary") and not policy.lone("primary")
    assert policy.lone("solo")
