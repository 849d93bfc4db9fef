"""coolant.config: LiteLLM config reading (contract §3, spec §2.2-§2.3), the coolant section, override()."""

from __future__ import annotations

import hashlib
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from coolant.config.errors import ConfigError
from coolant.config.loader import Config, derive_deployment_id, load_config, parse_config
from coolant.config.overrides import override, parse_value
from coolant.config.runtime import (
    DEFAULT_KAFKA_BOOTSTRAP,
    DEFAULT_REDIS_URL,
    KafkaSettings,
    RedisSettings,
    RuntimeSettings,
    resolve_secret,
)
from coolant.processors.policy import Backoff, Options


def write(tmp_path: Path, text: str, name: str = "litellm.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def load(tmp_path: Path, text: str) -> Config:
    return load_config(write(tmp_path, text))


def load_error(tmp_path: Path, text: str) -> ConfigError:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    err = info.value
    assert err.source == str(path)
    assert str(err).startswith(f"{path}: ")
    assert "\n" not in str(err)
    return err


def one(cfg: Config) -> Any:
    (entry,) = cfg.policy.registry.entries.values()
    return entry


# ------------------------------------------------------------------------------------------------
# model_list and router_settings


def test_reads_deployments_and_router_settings(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        """
        model_list:
          - model_name: gpt-4o
            litellm_params: {model: openai/gpt-4o, cooldown_time: 12}
            model_info:
              id: dep-a
              cooldown_time: 30
              allowed_fails: 2
              allowed_fails_policy: {RateLimitErrorAllowedFails: 4, TimeoutErrorAllowedFails: null}
          - model_name: gpt-4o
            litellm_params: {model: azure/gpt-4o}
            model_info: {id: dep-b}
          - model_name: "openai/*"
            litellm_params: {model: "openai/*"}
            model_info: {id: 42}
        router_settings:
          allowed_fails: 3
          allowed_fails_policy: {}
          cooldown_time: 0
          disable_cooldowns: true
          fallbacks: [{gpt-4o: [claude]}]
        general_settings: {master_key: sk-ignored}
        """,
    )
    reg = cfg.policy.registry
    a = reg.get("dep-a")
    assert a is not None
    assert (a.model_group, a.wildcard, a.cooldown_time, a.params_cooldown_time) == ("gpt-4o", False, 30.0, 12.0)
    assert a.allowed_fails == 2
    assert a.allowed_fails_policy == {"RateLimit": 4}
    b = reg.get("dep-b")
    assert b is not None
    assert (b.cooldown_time, b.params_cooldown_time, b.allowed_fails, b.allowed_fails_policy) == (
        None,
        None,
        None,
        None,
    )
    star = reg.get("42")  # LiteLLM stores an integer id as its string
    assert star is not None and star.wildcard and star.model_group == "openai/*"
    assert reg.size("gpt-4o") == 2
    router = cfg.policy.router
    assert router.allowed_fails == 3
    assert router.allowed_fails_policy == {}  # present-but-empty still means "has a policy" (§2.2)
    assert router.cooldown_time == 0  # stored as given; the engine treats <= 0 as unset (T3)
    assert router.disable_cooldowns is True
    assert router.fallback_groups == frozenset({"gpt-4o"})
    assert cfg.policy.options == Options()
    assert cfg.warnings == ()
    assert cfg.source == str(tmp_path / "litellm.yaml")


def test_empty_sections_give_defaults(tmp_path: Path) -> None:
    cfg = load(tmp_path, "model_list:\nrouter_settings:\ncoolant:\n")
    assert len(cfg.policy.registry.entries) == 0
    assert cfg.policy.router.allowed_fails is None and cfg.policy.router.cooldown_time is None
    assert cfg.policy.router.disable_cooldowns is False
    assert cfg.policy.options == Options()
    assert parse_config({}).source == "<config>"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2", 2),
        ("2.0", 2),  # an integral float is an integer
        ("'2'", 2),  # a numeric string is read as its number
        ("0", 0),
        ("null", None),
        ("true", None),  # a YAML boolean is never a number: absent (§2.2)
        ("false", None),
    ],
)
def test_allowed_fails_values(tmp_path: Path, value: str, expected: int | None) -> None:
    cfg = load(tmp_path, f"router_settings: {{allowed_fails: {value}}}\n")
    assert cfg.policy.router.allowed_fails == expected
    assert cfg.policy.router.allowed_fails is None or type(cfg.policy.router.allowed_fails) is int


@pytest.mark.parametrize(
    ("value", "expected"),
    [("30", 30.0), ("2.5", 2.5), ("'30'", 30.0), ("' 7.5 '", 7.5), ("0", 0.0), ("null", None), ("true", None)],
)
def test_cooldown_time_values(tmp_path: Path, value: str, expected: float | None) -> None:
    cfg = load(
        tmp_path,
        f"""
        model_list:
          - model_name: g
            litellm_params: {{model: openai/x, cooldown_time: {value}}}
            model_info: {{id: d, cooldown_time: {value}}}
        router_settings: {{cooldown_time: {value}}}
        """,
    )
    entry = one(cfg)
    assert entry.cooldown_time == expected and entry.params_cooldown_time == expected
    assert cfg.policy.router.cooldown_time == expected


def test_policy_objects(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        """
        model_list:
          - model_name: g
            litellm_params: {model: openai/x, allowed_fails_policy: {RateLimitErrorAllowedFails: 9}}
            model_info:
              id: d
              allowed_fails_policy:
                ContentPolicyViolationErrorAllowedFails: 0
                BadRequestErrorAllowedFails: 1
                AuthenticationErrorAllowedFails: 2.0
                TimeoutErrorAllowedFails: "3"
                RateLimitErrorAllowedFails: null
                InternalServerErrorAllowedFails: true
                ServiceUnavailableErrorAllowedFails: 6
                BadGatewayErrorAllowedFails: 7
                NotFoundErrorAllowedFails: 8
                RateLimitErrorAllowedFail: 5
                Whatever: 1
        router_settings:
          allowed_fails_policy: null
        """,
    )
    entry = one(cfg)
    assert entry.allowed_fails_policy == {
        "ContentPolicyViolation": 0,
        "BadRequest": 1,
        "Authentication": 2,
        "Timeout": 3,
        "ServiceUnavailable": 6,
        "BadGateway": 7,
        "NotFound": 8,
    }
    assert cfg.policy.router.allowed_fails_policy is None
    path = tmp_path / "litellm.yaml"
    assert cfg.warnings == (
        # A policy under litellm_params is ignored, as in LiteLLM (§2.2).
        f"{path}: model_list[0].litellm_params.allowed_fails_policy: ignored, as LiteLLM ignores it; "
        "put it under model_info",
        f"{path}: model_list[0].model_info.allowed_fails_policy.RateLimitErrorAllowedFail: "
        "unknown allowed_fails_policy key, ignored (did you mean RateLimitErrorAllowedFails?)",
        f"{path}: model_list[0].model_info.allowed_fails_policy.Whatever: unknown allowed_fails_policy key, ignored",
    )


def test_empty_policy_is_a_policy(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        """
        model_list:
          - {model_name: g, litellm_params: {model: x}, model_info: {id: d, allowed_fails_policy: {}}}
        """,
    )
    assert one(cfg).allowed_fails_policy == {}


def test_fallback_groups(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        """
        router_settings:
          fallbacks:
            - {gpt-4o: [gpt-4o-mini]}
            - {claude: []}
            - {"*": [gpt-4o]}
            - {mistral: null, llama: [a, b]}
          context_window_fallbacks: [{small: [big]}]
        """,
    )
    # Exact keys with a non-empty list; "*" is kept literally; other fallback kinds never count (R4).
    assert cfg.policy.router.fallback_groups == frozenset({"gpt-4o", "*", "llama"})
    assert cfg.policy.lone("claude") is False  # no registry entry: size 0, not single


def test_disable_cooldowns_follows_truthiness(tmp_path: Path) -> None:
    cfg = load(tmp_path, 'router_settings: {disable_cooldowns: "false"}\n')
    assert cfg.policy.router.disable_cooldowns is True
    assert cfg.warnings == (
        f"{tmp_path / 'litellm.yaml'}: router_settings.disable_cooldowns: "
        "a non-empty string is truthy: cooldowns are disabled",
    )
    assert load(tmp_path, "router_settings: {disable_cooldowns: 0}\n").policy.router.disable_cooldowns is False


# ------------------------------------------------------------------------------------------------
# Derived ids: the reference values below were produced by LiteLLM 1.110.2's own Router, in a
# scratch venv (`pip install litellm==1.110.2`), by loading each deployment of REFERENCE_YAML with
# yaml.safe_load and reading back `litellm.Router(model_list=[dep]).get_model_list()[0]["model_info"]["id"]`,
# with COOLANT_TEST_KEY=sk-test-resolved-123 set and COOLANT_TEST_UNSET unset.
# The recipe (litellm/router_api.py `deployment_id`, lines 195-209): sha256 over model_name + each
# litellm_params key and value in order; str as is, dict as json.dumps, anything else str().

REFERENCE_YAML = """
model_list:
  - model_name: gpt-4o
    litellm_params: {model: openai/gpt-4o, api_base: "https://api.example.com/v1"}
  - model_name: gpt-4o
    litellm_params: {model: openai/gpt-4o, rpm: 100, cooldown_time: 30, timeout: 2.5, stream: true}
  - model_name: claude
    litellm_params:
      model: anthropic/claude-3
      extra_headers: {X-Team: "é", X-N: 1, tags: [a, b]}
      stop: ["x", "y"]
  - model_name: gpt-4o
    litellm_params: {model: openai/gpt-4o, api_key: os.environ/COOLANT_TEST_KEY}
  - model_name: gpt-4o
    litellm_params: {model: openai/gpt-4o, api_key: os.environ/COOLANT_TEST_UNSET}
  - model_name: "openai/*"
    litellm_params:
      model: "openai/*"
      seed: -3
      max_tokens: null
      api_version: "2024-01-01"
      created: 2024-01-02
      meta: {d: 2024-01-02}
"""

LITELLM_IDS = [
    "4dc84f64c75dc125a80a0f175b5309ea15ed63e23cbef945993d622aec6e76a4",  # plain strings
    "bcd824e0c645d5ea1bb09fe8ecc71837132f398146a4a5c2a87dd4a3dbfda458",  # int, float, bool params
    "ea30fb960d4c074429effd2b443921fb4d0d61ffba1546084347f39817f0ad79",  # nested dict (non-ASCII), list
    "c217eca7f2efd860012811956251a11d11f471b0dd013d747213a2605770d33a",  # api_key: os.environ/ (set)
    "1ba51fe304c0f54b0b91c6556de38840add35bd54d72663fa3bc2c770f6cf673",  # api_key: os.environ/ (unset)
    "722760231ec1a027ae20b53a8e478c58433453c419eb59b976be58ebb16798d2",  # null, dates, wildcard name
]

# LiteLLM resolves top-level os.environ/ values *before* hashing (its secrets build step writes
# get_secret() results into litellm_params, then the id is derived; an unset variable hashes as
# "None"). coolant never resolves secrets, so it hashes the literal text and its ids differ:
COOLANT_IDS_FOR_ENV_REFS = [
    "3ccec1dfd6e16cf475375aaf8d3455ee248d557ca3a1c7aaa76d652c4d700f7b",
    "c55dc522a1c898386f02550e692a42d1f694cf0494ae90df64b345a4f1643e1f",
]


def test_derived_ids_match_litellm(tmp_path: Path) -> None:
    cfg = load(tmp_path, REFERENCE_YAML)
    ids = list(cfg.policy.registry.entries)
    assert ids[:3] + ids[5:] == LITELLM_IDS[:3] + LITELLM_IDS[5:]
    assert cfg.policy.registry.entries[LITELLM_IDS[5]].wildcard


def test_derived_id_with_env_ref_differs_from_litellm_and_warns(tmp_path: Path) -> None:
    cfg = load(tmp_path, REFERENCE_YAML)
    ids = list(cfg.policy.registry.entries)
    assert ids[3:5] == COOLANT_IDS_FOR_ENV_REFS
    assert ids[3] != LITELLM_IDS[3] and ids[4] != LITELLM_IDS[4]
    assert len(cfg.warnings) == 2
    for i, warning in zip((3, 4), cfg.warnings, strict=True):
        assert warning.startswith(f"{tmp_path / 'litellm.yaml'}: model_list[{i}].model_info.id: missing, and ")
        assert "api_key" in warning and "set model_info.id" in warning
        assert "COOLANT_TEST" not in warning  # names the key, never the reference or its value
    # With an explicit id there is nothing to derive and nothing to warn about.
    explicit = yaml.safe_load(REFERENCE_YAML)
    for i, deployment in enumerate(explicit["model_list"]):
        deployment["model_info"] = {"id": f"d{i}"}
    assert parse_config(explicit).warnings == ()


def test_derive_deployment_id_formats() -> None:
    # The recipe spelled out on one case: "g" + "model" + "x" + "rpm" + "10" + "d" + '{"a": [1, 2]}'.
    expected = hashlib.sha256(b'gmodelxrpm10d{"a": [1, 2]}').hexdigest()
    assert derive_deployment_id("g", {"model": "x", "rpm": 10, "d": {"a": [1, 2]}}) == expected


# ------------------------------------------------------------------------------------------------
# Errors in the LiteLLM parts: each names the file and the dotted key.


def test_error_message_format(tmp_path: Path) -> None:
    err = load_error(
        tmp_path,
        """
        model_list:
          - {model_name: a, litellm_params: {model: x}, model_info: {id: a}}
          - {model_name: b, litellm_params: {model: x}, model_info: {id: b}}
          - {model_name: c, litellm_params: {model: x}, model_info: {id: c, allowed_fails: -1}}
        """,
    )
    path = tmp_path / "litellm.yaml"
    assert str(err) == f"{path}: model_list[2].model_info.allowed_fails: must be an integer >= 0, got -1"
    assert (err.key, err.problem) == ("model_list[2].model_info.allowed_fails", "must be an integer >= 0, got -1")


DEP = "model_list:\n  - {{model_name: g, litellm_params: {{model: x{params}}}, model_info: {{id: d{info}}}}}\n"


def dep(params: str = "", info: str = "") -> str:
    return DEP.format(params=params, info=info)


LITELLM_ERRORS = [
    # (yaml, key, problem)
    (dep(info=", allowed_fails: -1"), "model_list[0].model_info.allowed_fails", "must be an integer >= 0, got -1"),
    (dep(info=", allowed_fails: 2.5"), "model_list[0].model_info.allowed_fails", "must be an integer >= 0, got 2.5"),
    (dep(info=", allowed_fails: lots"), "model_list[0].model_info.allowed_fails", "got 'lots'"),
    (dep(info=", allowed_fails: [1]"), "model_list[0].model_info.allowed_fails", "got a list"),
    (dep(info=", cooldown_time: -5"), "model_list[0].model_info.cooldown_time", "must be a number >= 0, got -5"),
    (dep(info=", cooldown_time: 30s"), "model_list[0].model_info.cooldown_time", "must be a number >= 0, got '30s'"),
    (dep(info=", cooldown_time: .inf"), "model_list[0].model_info.cooldown_time", "got inf"),
    (dep(info=", cooldown_time: {a: 1}"), "model_list[0].model_info.cooldown_time", "got a map"),
    (dep(params=", cooldown_time: -1"), "model_list[0].litellm_params.cooldown_time", "must be a number >= 0"),
    (
        dep(params=", cooldown_time: os.environ/COOLDOWN"),
        "model_list[0].litellm_params.cooldown_time",
        "coolant never resolves os.environ/ references",
    ),
    (
        dep(info=", allowed_fails_policy: {RateLimitErrorAllowedFails: -1}"),
        "model_list[0].model_info.allowed_fails_policy.RateLimitErrorAllowedFails",
        "must be an integer >= 0, got -1",
    ),
    (
        dep(info=", allowed_fails_policy: [RateLimitErrorAllowedFails]"),
        "model_list[0].model_info.allowed_fails_policy",
        "must be a map of <Category>ErrorAllowedFails keys or null, got a list",
    ),
    (dep(info=", id: null"), "model_list[0].model_info.id", "is null, so LiteLLM assigns a random id per process"),
    (dep(info=", id: [1]"), "model_list[0].model_info.id", "must be a string, got a list"),
    (dep(info=", id: ''"), "model_list[0].model_info.id", "must not be empty"),
    (
        "model_list:\n  - {model_name: g, litellm_params: {model: x}, model_info: {id: d}}\n"
        "  - {model_name: h, litellm_params: {model: y}, model_info: {id: d}}\n",
        "model_list[1].model_info.id",
        "duplicate deployment id 'd' (also model_list[0])",
    ),
    (
        "model_list:\n  - {model_name: g, litellm_params: {model: x}}\n"
        "  - {model_name: g, litellm_params: {model: x}}\n",
        "model_list[1]",
        "duplicate deployment id '",
    ),
    ("model_list:\n  - {litellm_params: {model: x}}\n", "model_list[0].model_name", "must be a non-empty string"),
    ("model_list:\n  - {model_name: 7, model_info: {id: d}}\n", "model_list[0].model_name", "got 7"),
    ("model_list:\n  - {model_name: g}\n", "model_list[0].litellm_params", "needed to derive the deployment id"),
    ("model_list:\n  - {model_name: g, litellm_params: [x]}\n", "model_list[0].litellm_params", "must be a map"),
    ("model_list:\n  - {model_name: g, model_info: oops}\n", "model_list[0].model_info", "must be a map, got 'oops'"),
    ("model_list: {a: 1}\n", "model_list", "must be a list of deployments, got a map"),
    ("model_list: [gpt-4o]\n", "model_list[0]", "must be a map, got 'gpt-4o'"),
    ("router_settings: [1]\n", "router_settings", "must be a map, got a list"),
    ("router_settings: {allowed_fails: -1}\n", "router_settings.allowed_fails", "must be an integer >= 0, got -1"),
    ("router_settings: {allowed_fails: '1.5'}\n", "router_settings.allowed_fails", "got '1.5'"),
    ("router_settings: {cooldown_time: -0.5}\n", "router_settings.cooldown_time", "must be a number >= 0, got -0.5"),
    (
        "router_settings: {allowed_fails_policy: {TimeoutErrorAllowedFails: 0.5}}\n",
        "router_settings.allowed_fails_policy.TimeoutErrorAllowedFails",
        "must be an integer >= 0, got 0.5",
    ),
    ("router_settings: {allowed_fails_policy: 3}\n", "router_settings.allowed_fails_policy", "got 3"),
    ("router_settings: {fallbacks: {a: [b]}}\n", "router_settings.fallbacks", "must be a list of {group:"),
    ("router_settings: {fallbacks: [a]}\n", "router_settings.fallbacks[0]", "must be a {group: [fallback groups]} map"),
    ("router_settings: {fallbacks: [{a: b}]}\n", "router_settings.fallbacks[0].a", "must be a list of model groups"),
]


@pytest.mark.parametrize(("text", "key", "problem"), LITELLM_ERRORS, ids=[c[1] for c in LITELLM_ERRORS])
def test_litellm_part_errors(tmp_path: Path, text: str, key: str, problem: str) -> None:
    err = load_error(tmp_path, text)
    assert err.key == key
    assert str(err).startswith(f"{tmp_path / 'litellm.yaml'}: {key}: ")
    assert problem in err.problem


def test_env_reference_is_never_echoed(tmp_path: Path) -> None:
    err = load_error(tmp_path, dep(params=", cooldown_time: os.environ/MY_SECRET_COOLDOWN"))
    assert "MY_SECRET" not in str(err) and "os.environ/MY" not in str(err)


# ------------------------------------------------------------------------------------------------
# File-level errors.


def test_file_not_found(tmp_path: Path) -> None:
    path = tmp_path / "missing.yaml"
    with pytest.raises(ConfigError, match="file not found") as info:
        load_config(path)
    assert str(info.value) == f"{path}: file not found"


def test_unreadable_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read") as info:
        load_config(tmp_path)
    assert str(info.value).startswith(f"{tmp_path}: cannot read: ")


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_bytes(b"model_list: \xff\xfe\n")
    with pytest.raises(ConfigError, match=r"not UTF-8 text$"):
        load_config(str(path))


def test_bad_yaml_shows_position_not_content(tmp_path: Path) -> None:
    path = write(tmp_path, "model_list:\n  - model_name: g\n    litellm_params: {api_key: sk-live-abc: def\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert message.startswith(f"{path}: invalid YAML at line 3, column ")
    assert "sk-live" not in message and "\n" not in message


@pytest.mark.parametrize(
    ("text", "got"), [("", "an empty file"), ("- a\n- b\n", "a list"), ("just text\n", "'just text'")]
)
def test_top_level_must_be_a_map(tmp_path: Path, text: str, got: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == f"{path}: the top level must be a map, got {got}"


def test_parse_config_rejects_non_map() -> None:
    with pytest.raises(ConfigError, match=r"^<config>: the top level must be a map, got a list$"):
        parse_config([1, 2])  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------------
# The coolant section.


def test_coolant_section_full(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAFKA_BOOTSTRAP", raising=False)
    monkeypatch.delenv("REDIS_URL", raising=False)
    cfg = load(
        tmp_path,
        """
        coolant:
          profile: compatible
          window: sliding
          count_attempts: final_only
          recool: overwrite
          allowed_fails_window: 20
          late_after: 60
          health: {cooldown: true}
          backoff: {base: 10, factor: 1, max: 10, reset_after: 0}
          max_ejection_percent: 50
          max_cooldown_time: 120.5
          thresholds: {failure_rate: 0.25, min_requests: 1, outage_min_requests: 200}
          topic_prefix: prod.coolant.
          web_port: 7000
          kafka:
            bootstrap_servers: [k1:9092, k2:9092]
            security_protocol: SASL_SSL
            sasl_mechanism: SCRAM-SHA-512
            sasl_plain_username: coolant
            sasl_plain_password: os.environ/KAFKA_PASSWORD
            ssl_cafile: /etc/ca.pem
            ssl_certfile: null
            ssl_keyfile: /etc/key.pem
          redis: {url: "rediss://r:6380/1", key_prefix: "team-a:", password: os.environ/REDIS_PW, ssl: true}
        """,
    )
    assert cfg.policy.options == Options(
        profile="compatible",
        window="sliding",
        count_attempts="final_only",
        recool="overwrite",
        allowed_fails_window=20.0,
        late_after=60.0,
        health_cooldown=True,
        backoff=Backoff(base=10.0, factor=1.0, max=10.0, reset_after=0.0),
        max_ejection_percent=50,
        max_cooldown_time=120.5,
        failure_rate=0.25,
        min_requests=1,
        outage_min_requests=200,
    )
    assert cfg.runtime == RuntimeSettings(
        topic_prefix="prod.coolant.",
        kafka=KafkaSettings(
            bootstrap_servers="k1:9092,k2:9092",
            security_protocol="SASL_SSL",
            sasl_mechanism="SCRAM-SHA-512",
            sasl_plain_username="coolant",
            sasl_plain_password="os.environ/KAFKA_PASSWORD",  # kept unresolved
            ssl_cafile="/etc/ca.pem",
            ssl_certfile=None,
            ssl_keyfile="/etc/key.pem",
        ),
        redis=RedisSettings(url="rediss://r:6380/1", key_prefix="team-a:", password="os.environ/REDIS_PW", ssl=True),
        web_port=7000,
    )


def test_coolant_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAFKA_BOOTSTRAP", raising=False)
    monkeypatch.delenv("REDIS_URL", raising=False)
    cfg = parse_config({"coolant": {"health": None, "thresholds": {}, "kafka": None, "redis": {}}})
    assert cfg.policy.options == Options()
    assert cfg.policy.options.backoff is None
    assert cfg.runtime == RuntimeSettings()
    assert cfg.runtime.topic_prefix == "coolant." and cfg.runtime.web_port == 6066
    assert cfg.runtime.kafka.bootstrap_servers == DEFAULT_KAFKA_BOOTSTRAP == "127.0.0.1:19092"
    assert cfg.runtime.redis.url == DEFAULT_REDIS_URL == "redis://127.0.0.1:16379/0"
    assert (cfg.runtime.redis.key_prefix, cfg.runtime.redis.password, cfg.runtime.redis.ssl) == ("", None, False)


def test_runtime_env_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_BOOTSTRAP", "broker:9092")
    monkeypatch.setenv("REDIS_URL", "redis://cache:6379/2")
    runtime = parse_config({}).runtime
    assert runtime.kafka.bootstrap_servers == "broker:9092"
    assert runtime.redis.url == "redis://cache:6379/2"
    explicit = parse_config({"coolant": {"kafka": {"bootstrap_servers": "k:1"}, "redis": {"url": "redis://x/0"}}})
    assert explicit.runtime.kafka.bootstrap_servers == "k:1" and explicit.runtime.redis.url == "redis://x/0"


@pytest.mark.parametrize(("value", "expected"), [("{}", Backoff()), ("null", None), ("{max: 600}", Backoff(max=600))])
def test_backoff_values(tmp_path: Path, value: str, expected: Backoff | None) -> None:
    assert load(tmp_path, f"coolant: {{backoff: {value}}}\n").policy.options.backoff == expected


COOLANT_ERRORS = [
    # (coolant section body, key, problem)
    ("[1]", "coolant", "must be a map, got a list"),
    ("{windw: sliding}", "coolant.windw", "unknown key (did you mean window?)"),
    ("{profile: strict}", "coolant.profile", "must be one of compatible, outlier, got 'strict'"),
    ("{window: hopping}", "coolant.window", "must be one of tumbling, sliding, got 'hopping'"),
    ("{count_attempts: final}", "coolant.count_attempts", "must be one of all, final_only, got 'final'"),
    ("{recool: replace}", "coolant.recool", "must be one of extend, overwrite"),
    ("{allowed_fails_window: 0}", "coolant.allowed_fails_window", "must be a number > 0 or null, got 0"),
    ("{allowed_fails_window: '30'}", "coolant.allowed_fails_window", "got '30'"),  # strict: no string numbers
    ("{late_after: 59.9}", "coolant.late_after", "must be a number >= 60, got 59.9"),
    ("{late_after: null}", "coolant.late_after", "got null"),
    ("{late_after: true}", "coolant.late_after", "got true"),
    ("{health: {cooldown: yes please}}", "coolant.health.cooldown", "must be true or false"),
    ("{health: {cooldwn: true}}", "coolant.health.cooldwn", "unknown key (did you mean cooldown?)"),
    ("{health: true}", "coolant.health", "must be a map, got true"),
    ("{backoff: true}", "coolant.backoff", "must be a map ({} for the defaults) or null, got true"),
    ("{backoff: {base: 0}}", "coolant.backoff.base", "must be a number > 0, got 0"),
    ("{backoff: {factor: 0.5}}", "coolant.backoff.factor", "must be a number >= 1, got 0.5"),
    ("{backoff: {base: 10, max: 5}}", "coolant.backoff.max", "must be a number >= base (10), got 5"),
    ("{backoff: {base: 500}}", "coolant.backoff.max", "must be a number >= base (500), got 300.0"),
    ("{backoff: {reset_after: -1}}", "coolant.backoff.reset_after", "must be a number >= 0, got -1"),
    ("{backoff: {jitter: 1}}", "coolant.backoff.jitter", "unknown key"),
    ("{max_ejection_percent: 0}", "coolant.max_ejection_percent", "must be an integer from 1 to 100, got 0"),
    ("{max_ejection_percent: 101}", "coolant.max_ejection_percent", "got 101"),
    ("{max_ejection_percent: 50.5}", "coolant.max_ejection_percent", "got 50.5"),
    ("{max_cooldown_time: -1}", "coolant.max_cooldown_time", "must be a number > 0 or null, got -1"),
    ("{thresholds: {failure_rate: 1}}", "coolant.thresholds.failure_rate", "between 0 and 1 (exclusive), got 1"),
    ("{thresholds: {failure_rate: 0}}", "coolant.thresholds.failure_rate", "got 0"),
    ("{thresholds: {min_requests: 0}}", "coolant.thresholds.min_requests", "must be an integer >= 1, got 0"),
    ("{thresholds: {outage_min_requests: 1.5}}", "coolant.thresholds.outage_min_requests", "got 1.5"),
    ("{thresholds: {min_request: 3}}", "coolant.thresholds.min_request", "unknown key (did you mean min_requests?)"),
    ("{topic_prefix: 5}", "coolant.topic_prefix", "must be a string, got 5"),
    ("{topic_prefix: 'a b'}", "coolant.topic_prefix", "may only hold letters, digits"),
    ("{web_port: 0}", "coolant.web_port", "must be an integer from 1 to 65535, got 0"),
    ("{web_port: '80'}", "coolant.web_port", "got '80'"),
    ("{kafka: {bootstrap: x}}", "coolant.kafka.bootstrap", "unknown key (did you mean bootstrap_servers?)"),
    ("{kafka: {bootstrap_servers: ''}}", "coolant.kafka.bootstrap_servers", "must be a non-empty string or list"),
    ("{kafka: {bootstrap_servers: [1]}}", "coolant.kafka.bootstrap_servers", "got a list"),
    ("{kafka: {security_protocol: TLS}}", "coolant.kafka.security_protocol", "must be one of PLAINTEXT, SSL"),
    ("{kafka: {sasl_mechanism: plain}}", "coolant.kafka.sasl_mechanism", "must be one of PLAIN,"),
    ("{kafka: {ssl_cafile: [a]}}", "coolant.kafka.ssl_cafile", "must be a string or null, got a list"),
    ("{kafka: 3}", "coolant.kafka", "must be a map, got 3"),
    ("{redis: {host: x}}", "coolant.redis.host", "unknown key"),
    ("{redis: {ssl: 'yes'}}", "coolant.redis.ssl", "must be true or false, got 'yes'"),
    ("{redis: {url: null}}", "coolant.redis.url", "must be a string, got null"),
    ("{redis: {key_prefix: 1}}", "coolant.redis.key_prefix", "must be a string, got 1"),
]


@pytest.mark.parametrize(("body", "key", "problem"), COOLANT_ERRORS, ids=[c[0] for c in COOLANT_ERRORS])
def test_coolant_section_errors(tmp_path: Path, body: str, key: str, problem: str) -> None:
    err = load_error(tmp_path, f"coolant: {body}\n")
    assert err.key == key
    assert str(err).startswith(f"{tmp_path / 'litellm.yaml'}: {key}: ")
    assert problem in err.problem


@pytest.mark.parametrize(
    "body",
    [
        "{kafka: {sasl_plain_password: 123456789}}",
        "{kafka: {sasl_plain_username: 123456789}}",
        "{redis: {password: 123456789}}",
        "{redis: {url: 123456789}}",
    ],
)
def test_secret_fields_errors_hide_the_value(tmp_path: Path, body: str) -> None:
    err = load_error(tmp_path, f"coolant: {body}\n")
    assert "got a number" in str(err) and "123456789" not in str(err)


# ------------------------------------------------------------------------------------------------
# Secrets: unresolved in the dataclasses, out of repr, resolved only at the edge.


def test_repr_never_shows_passwords(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        """
        model_list:
          - model_name: g
            litellm_params: {model: openai/x, api_key: sk-live-DEPLOYMENTKEY}
            model_info: {id: d}
        coolant:
          kafka: {sasl_plain_username: svc, sasl_plain_password: hunter2-KAFKA}
          redis: {url: "redis://:hunter2-URL@cache:6379/0", password: hunter2-REDIS}
        """,
    )
    assert cfg.runtime.kafka.sasl_plain_password == "hunter2-KAFKA"  # kept as written...
    text = repr(cfg) + str(cfg) + repr(cfg.runtime) + repr(cfg.runtime.kafka) + repr(cfg.runtime.redis)
    for secret in ("hunter2", "sk-live", "DEPLOYMENTKEY"):
        assert secret not in text  # ...but never shown
    assert "svc" in repr(cfg.runtime.kafka)  # the rest of the settings still are


def test_resolve_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COOLANT_TEST_PW", "s3cret")
    monkeypatch.delenv("COOLANT_TEST_MISSING", raising=False)
    assert resolve_secret(None) is None
    assert resolve_secret("plain-value") == "plain-value"
    assert resolve_secret("os.environ/COOLANT_TEST_PW") == "s3cret"
    with pytest.raises(ConfigError, match=r"^environment: environment variable COOLANT_TEST_MISSING is not set$"):
        resolve_secret("os.environ/COOLANT_TEST_MISSING")


# ------------------------------------------------------------------------------------------------
# override() and parse_value() for tuning grids.

BASE = yaml.safe_load(
    """
model_list:
  - {model_name: g, litellm_params: {model: x}, model_info: {id: a, cooldown_time: 5}}
  - {model_name: g, litellm_params: {model: y}}
router_settings: {allowed_fails: 3}
"""
)


def test_override_router_setting() -> None:
    raw = override(BASE, "router_settings.allowed_fails", 7)
    assert parse_config(raw).policy.router.allowed_fails == 7
    assert BASE["router_settings"]["allowed_fails"] == 3  # the input is never changed


def test_override_every_deployment() -> None:
    raw = override(BASE, "model_list.*.model_info.cooldown_time", 60)
    assert [d["model_info"]["cooldown_time"] for d in raw["model_list"]] == [60, 60]
    assert "model_info" not in BASE["model_list"][1]
    entries = parse_config(raw).policy.registry.entries.values()
    assert [e.cooldown_time for e in entries] == [60.0, 60.0]


def test_override_one_deployment_by_index() -> None:
    raw = override(BASE, "model_list.1.model_info.allowed_fails", 0)
    assert raw["model_list"][1]["model_info"] == {"allowed_fails": 0}
    assert "allowed_fails" not in raw["model_list"][0]["model_info"]


def test_override_creates_missing_sections() -> None:
    raw = override(BASE, "coolant.thresholds.min_requests", 10)
    assert raw["coolant"] == {"thresholds": {"min_requests": 10}}
    assert parse_config(raw).policy.options.min_requests == 10
    raw = override(BASE, "coolant.backoff", {})
    assert parse_config(raw).policy.options.backoff == Backoff()
    raw = override({"coolant": None}, "coolant.backoff.base", 2)
    assert parse_config(raw).policy.options.backoff == Backoff(base=2)


def test_override_copies_the_value() -> None:
    value: dict[str, Any] = {"base": 1}
    raw = override(BASE, "model_list.*.model_info.allowed_fails_policy", value)
    value["base"] = 2
    first, second = (d["model_info"]["allowed_fails_policy"] for d in raw["model_list"])
    assert first == second == {"base": 1} and first is not second


@pytest.mark.parametrize(
    ("data", "key", "problem"),
    [
        ({}, "model_list.*.model_info.cooldown_time", "model_list is missing, so * selects nothing"),
        ({"model_list": []}, "model_list.*.model_info.cooldown_time", "model_list is empty, so * selects nothing"),
        (BASE, "model_list.5.model_info.id", "model_list is a list of 2: use * or an index below 2, not '5'"),
        (BASE, "model_list.first.model_info", "use * or an index"),
        (BASE, "router_settings.*", "router_settings is a map: * only selects list items"),
        (BASE, "router_settings.allowed_fails.x", "router_settings.allowed_fails is 3, not a map or a list"),
        (BASE, "", "not a dotted key"),
        (BASE, "coolant..window", "not a dotted key"),
    ],
)
def test_override_errors(data: dict[str, Any], key: str, problem: str) -> None:
    with pytest.raises(ConfigError) as info:
        override(data, key, 1)
    assert info.value.source == "override"
    assert problem in info.value.problem


@pytest.mark.parametrize(
    ("text", "value"),
    [("30", 30), ("2.5", 2.5), ("null", None), ("~", None), ("{}", {}), ("[1, 2]", [1, 2]), ("sliding", "sliding")],
)
def test_parse_value(text: str, value: Any) -> None:
    assert parse_value(text) == value


def test_parse_value_error() -> None:
    with pytest.raises(ConfigError, match=r"^command line: cannot read '\{a: ' as a YAML value: "):
        parse_value("{a: ")


@given(st.integers(min_value=-50, max_value=50))
def test_override_then_parse_allowed_fails(n: int) -> None:
    raw = override(BASE, "model_list.*.model_info.allowed_fails", n)
    if n < 0:
        with pytest.raises(ConfigError, match=r"model_list\[0\]\.model_info\.allowed_fails: must be an integer >= 0"):
            parse_config(raw, "grid")
    else:
        assert {e.allowed_fails for e in parse_config(raw, "grid").policy.registry.entries.values()} == {n}


# ------------------------------------------------------------------------------------------------
# A realistic proxy config (tests/data/configs/litellm-proxy.yaml).

FIXTURE = Path(__file__).parents[1] / "data" / "configs" / "litellm-proxy.yaml"


def test_fixture_proxy_config() -> None:
    cfg = load_config(FIXTURE)
    assert cfg.warnings == ()
    reg = cfg.policy.registry
    # Also checked against LiteLLM 1.110.2's Router (see LITELLM_IDS above for how).
    wildcard_id = "e0f302a1412e78470ebb28cbed01fff5f88c0d331c667e9f2ba4b413c6fbd282"
    assert list(reg.entries) == ["gpt-4o-eu", "gpt-4o-us", "claude-sonnet-1", wildcard_id]
    assert reg.entries["gpt-4o-eu"].allowed_fails_policy == {"RateLimit": 10, "ContentPolicyViolation": 1000}
    us = reg.entries["gpt-4o-us"]
    assert (us.cooldown_time, us.params_cooldown_time) == (30.0, 45.0)
    assert reg.entries[wildcard_id].wildcard
    assert cfg.policy.lone("claude-sonnet") is False  # it has a fallback
    assert cfg.policy.router.allowed_fails == 3 and cfg.policy.router.cooldown_time == 60.0
    assert cfg.policy.options.window == "sliding" and cfg.policy.options.backoff == Backoff()
    assert cfg.runtime.kafka.sasl_plain_password == "os.environ/KAFKA_PASSWORD"
    assert "KAFKA_PASSWORD" not in repr(cfg) and "REDIS_PASSWORD" not in repr(cfg)
