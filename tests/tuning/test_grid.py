"""`--grid KEY=V1,V2,...`: splitting, YAML values, the cartesian product, errors (coolant.tuning.grid)."""

from __future__ import annotations

from typing import Any

import pytest

from coolant.config.errors import ConfigError
from coolant.processors.policy import Backoff
from coolant.tuning.grid import GridError, build_grid, identical, parse_axis, short_keys, split_values

RAW: dict[str, Any] = {
    "model_list": [
        {"model_name": "g", "litellm_params": {"model": "openai/a"}, "model_info": {"id": "d0"}},
        {"model_name": "g", "litellm_params": {"model": "openai/b"}, "model_info": {"id": "d1"}},
    ],
    "router_settings": {"cooldown_time": 30},
}


@pytest.mark.parametrize(
    ("text", "pieces"),
    [
        ("30,60", ["30", "60"]),
        (" 30 , 60 ", ["30", "60"]),
        ("null,0,3", ["null", "0", "3"]),
        ("{},{base: 10, max: 600},null", ["{}", "{base: 10, max: 600}", "null"]),
        ("[],[{a: [b, c]}]", ["[]", "[{a: [b, c]}]"]),
        ("'a,b',c", ["'a,b'", "c"]),
        ('"{",x', ['"{"', "x"]),
        ("tumbling", ["tumbling"]),
        ("", [""]),
    ],
)
def test_split_values_on_commas_at_depth_zero(text: str, pieces: list[str]) -> None:
    assert split_values(text) == pieces


@pytest.mark.parametrize("text", ["{a: 1", "a}", "[1,2}", "'open", "{a: [1}"])
def test_split_values_rejects_unbalanced_text(text: str) -> None:
    with pytest.raises(ValueError):
        split_values(text)


def test_parse_axis_reads_yaml_values() -> None:
    axis = parse_axis("router_settings.allowed_fails=null,0,3")
    assert axis.key == "router_settings.allowed_fails"
    assert axis.values == (None, 0, 3)
    assert axis.texts == ("null", "0", "3")
    assert parse_axis("coolant.backoff={},{base: 10}").values == ({}, {"base": 10})
    assert parse_axis("coolant.window=tumbling,sliding").values == ("tumbling", "sliding")
    assert parse_axis("x=1,true").values == (1, True)  # equal in Python, different settings


@pytest.mark.parametrize(
    ("arg", "problem"),
    [
        ("router_settings.allowed_fails", "expected KEY=V1,V2"),
        ("=1,2", "expected KEY=V1,V2"),
        ("a..b=1", "not a dotted key"),
        ("a.b=1,,2", "empty value"),
        ("a.b=", "empty value"),
        ("a.b={x: 1", "cannot split"),
        ("a.b=30,30.0,30", "given twice"),
        ("a.b=[1, 2]]", "cannot split"),
        ("a.b=@x", "cannot read"),
    ],
)
def test_parse_axis_errors_are_one_line(arg: str, problem: str) -> None:
    with pytest.raises(GridError) as info:
        parse_axis(arg)
    message = str(info.value)
    assert message.startswith(f"--grid {arg}: ")
    assert problem in message
    assert "\n" not in message


def test_build_grid_is_the_cartesian_product_in_order() -> None:
    axes = [parse_axis("router_settings.allowed_fails=null,0,3"), parse_axis("coolant.backoff=null,{}")]
    points = build_grid(RAW, axes, "cfg.yaml")
    assert [p.pid for p in points] == [f"P{i}" for i in range(1, 7)]
    assert [p.label for p in points] == [
        "allowed_fails=null backoff=null",
        "allowed_fails=null backoff={}",
        "allowed_fails=0 backoff=null",
        "allowed_fails=0 backoff={}",
        "allowed_fails=3 backoff=null",
        "allowed_fails=3 backoff={}",
    ]
    assert [p.policy.router.allowed_fails for p in points] == [None, None, 0, 0, 3, 3]
    assert [p.policy.options.backoff for p in points] == [None, Backoff(), None, Backoff(), None, Backoff()]
    assert points[3].settings == (("router_settings.allowed_fails", 0), ("coolant.backoff", {}))
    assert points[0].config.source == "cfg.yaml [allowed_fails=null backoff=null]"
    assert RAW["router_settings"] == {"cooldown_time": 30}  # the base config is not modified


def test_model_list_star_sets_every_deployment() -> None:
    points = build_grid(RAW, [parse_axis("model_list.*.model_info.cooldown_time=30,60")])
    assert [[e.cooldown_time for e in p.policy.registry.entries.values()] for p in points] == [[30, 30], [60, 60]]
    assert [p.label for p in points] == ["cooldown_time=30", "cooldown_time=60"]


def test_no_axes_is_the_config_alone() -> None:
    (point,) = build_grid(RAW, [])
    assert point.pid == "P1" and point.label == "baseline" and point.settings == ()


def test_a_value_the_config_rejects_names_the_point() -> None:
    with pytest.raises(ConfigError) as info:
        build_grid(RAW, [parse_axis("router_settings.allowed_fails=0,-1")], "cfg.yaml")
    assert str(info.value) == (
        "cfg.yaml [allowed_fails=-1]: router_settings.allowed_fails: must be an integer >= 0, got -1"
    )


def test_a_key_that_cannot_be_set_is_a_grid_error() -> None:
    with pytest.raises(GridError) as info:
        build_grid(RAW, [parse_axis("model_list.5.model_info.cooldown_time=30")])
    assert str(info.value).startswith("--grid model_list.5.model_info.cooldown_time=30: model_list is a list of 2")
    with pytest.raises(ConfigError, match="unknown key"):
        build_grid(RAW, [parse_axis("coolant.windw=sliding")])  # coolant's section is strict


def test_the_same_key_twice_is_an_error() -> None:
    with pytest.raises(GridError, match="two --grid options"):
        build_grid(RAW, [parse_axis("coolant.window=sliding"), parse_axis("coolant.window=tumbling")])


def test_identical_policies_are_found() -> None:
    # LiteLLM's sections ignore unknown keys: a misspelt router key changes nothing
    points = build_grid(RAW, [parse_axis("router_settings.alowed_fails=1,2,3")])
    assert identical(points) == [("P1", "P2"), ("P1", "P3")]
    assert identical(build_grid(RAW, [parse_axis("router_settings.allowed_fails=1,2")])) == []


def test_short_keys_are_unique_suffixes() -> None:
    assert short_keys(["model_list.*.model_info.cooldown_time"]) == ["cooldown_time"]
    assert short_keys(["model_list.*.model_info.cooldown_time", "router_settings.cooldown_time"]) == [
        "model_info.cooldown_time",
        "router_settings.cooldown_time",
    ]
    assert short_keys(["coolant.window", "coolant.backoff.base"]) == ["window", "base"]
    assert short_keys(["a.b", "b"]) == ["a.b", "b"]
