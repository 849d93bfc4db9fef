"""JSON Schema (draft 2020-12) of the input records, made from the record classes themselves.

Gateways written in other languages validate against `schemas/json/*.schema.json` (checked in at
the repository root). They are generated, never edited: `msgspec.json.schema` gives the fields,
types and constraints exactly as `decode` checks them; this module adds what the classes do not
say: `schema` is a required constant, unknown fields are allowed (forward compatibility, contract
preamble), and titles, descriptions and documented defaults come from the contract (§1.1-1.3).

    python -m coolant.schemas.jsonschema --check   # exit 1 if the checked-in files are stale (CI)
    python -m coolant.schemas.jsonschema --write   # regenerate them

JSON Schema's "integer" accepts `1.0` and `5e2`, and JSON readers accept a lone surrogate escape
(`"\ud800"`); `decode` reads them the same way (B5 in docs/input-bounds.md), so a record the schema
accepts is one the worker accepts. What JSON Schema cannot say, B1's size and nesting limits, is in
the descriptions.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import msgspec

from coolant.schemas.deployment import DEPLOYMENT_SCHEMA, DeploymentRecord
from coolant.schemas.health import HEALTH_SCHEMA, Health
from coolant.schemas.outcome import OUTCOME_SCHEMA, Outcome

__all__ = ["DEFAULT_DIR", "RECORDS", "file_name", "generate", "main", "render"]

DRAFT = "https://json-schema.org/draft/2020-12/schema"
DEFAULT_DIR = Path(__file__).resolve().parents[2] / "schemas" / "json"
"""`schemas/json/` at the repository root (for a source checkout)."""

_INT = " An integer (`1.0` and `1e0` are read as 1)."
_ID = "LiteLLM `model_info.id` of the deployment (the Kafka message key)."
_GROUP = "LiteLLM `model_name` (the model group)."
_EVENT_ID = "Unique per attempt; duplicates are dropped (publishers deliver at least once)."
_TS = (
    "When the {} finished: epoch seconds (float), event time set by the producer; below 1e10 (milliseconds "
    "are refused, B2). A live worker also refuses a ts more than its clock-skew allowance ahead of its clock (B6)."
)
_STATUS = "HTTP status of a failure; null when the error carried none." + _INT
_EXC_TYPE = (
    "Exception class name, LiteLLM's names (`RateLimitError`, `APIConnectionError`, "
    "`ContentPolicyViolationError`, `InternalServerError`, ...)."
)
_EXC_MESSAGE = (
    "Error text; publishers truncate it to 1,024 characters; coolant masks it further before it "
    "leaves the processor."
)

# name -> (record class, schema tag, title, description, {field: description}, {field: documented default})
RECORDS: dict[str, tuple[type[msgspec.Struct], str, str, str, dict[str, str], dict[str, Any]]] = {
    "outcome": (
        Outcome,
        OUTCOME_SCHEMA,
        "coolant request outcome (coolant.outcome/1)",
        "One record per attempt a gateway makes against a deployment (first try, each retry, each "
        "fallback hop). Published to the outcomes topic, keyed by deployment_id. Unknown fields are "
        "ignored; a missing required field, a wrong type or another `schema` value makes the record invalid, "
        "and so does a record above 1 MiB or nested deeper than 32 levels (B1).",
        {
            "schema": "Record type and version: always `coolant.outcome/1`.",
            "event_id": _EVENT_ID,
            "ts": _TS.format("attempt"),
            "deployment_id": _ID,
            "model_group": _GROUP,
            "ok": "True when the attempt succeeded.",
            "status_code": _STATUS,
            "exception_type": _EXC_TYPE,
            "exception_message": _EXC_MESSAGE,
            "retry_after": "The raw `Retry-After` response header value (integer seconds or HTTP-date).",
            "cooldown_time": "A per-request cooldown override in seconds (LiteLLM's `cooldown_time` request kwarg); "
            "at most 365 days either way (a negative value is ignored).",
            "attempt": "0 = first try; each retry or fallback hop counts up." + _INT,
            "final": "Whether this attempt's result was returned to the caller.",
            "source": "`request`, or `pre_call_check` for a rate-limit pre-flight that failed; any other "
            "value is read as `request`.",
            "gateway": "Publisher / pod id.",
            "latency_ms": "Attempt latency in milliseconds.",
            "ratelimit": "The quota a successful response announced (opt-in quota-aware cooldowns): "
            "`remaining_requests` and `remaining_tokens` (integers; from `x-ratelimit-remaining-*` or "
            "`anthropic-ratelimit-*-remaining`), `reset_requests` and `reset_tokens` (seconds after `ts` until the "
            "budget refills: `x-ratelimit-reset-*` such as `6m0s`, or an `anthropic-ratelimit-*-reset` time minus "
            "the response time); each key optional; null or absent when the response announced none.",
            "origin": "Who ended a failed attempt: `caller` (the client disconnected) or `upstream` (the "
            "deployment: an error status, a refused or reset connection, a timeout, a stream that died mid-answer); "
            "null or absent when the publisher cannot tell. The compatible profile ignores it; the outlier profile "
            "does not count a `caller` failure against the deployment.",
        },
        {"attempt": 0, "final": True, "source": "request"},
    ),
    "health": (
        Health,
        HEALTH_SCHEMA,
        "coolant health probe (coolant.health/1)",
        "One record per health probe of a deployment. Published to the health topic, keyed by "
        "deployment_id. Unknown fields are ignored; a missing required field, a wrong type or another "
        "`schema` value makes the record invalid.",
        {
            "schema": "Record type and version: always `coolant.health/1`.",
            "event_id": _EVENT_ID.replace("attempt", "probe"),
            "ts": _TS.format("probe"),
            "deployment_id": _ID,
            "model_group": _GROUP,
            "healthy": "True when the probe succeeded.",
            "status_code": _STATUS,
            "exception_type": _EXC_TYPE,
            "exception_message": _EXC_MESSAGE,
            "latency_ms": "Probe latency in milliseconds.",
            "prober": "Prober id.",
            "mode": "Probe mode: `chat`, `embedding`, ...",
        },
        {},
    ),
    "deployment": (
        DeploymentRecord,
        DEPLOYMENT_SCHEMA,
        "coolant deployment (coolant.deployment/1)",
        "A registry entry for one deployment, on the compacted deployments topic keyed by deployment_id. "
        "Built from the LiteLLM config file (`coolant deployments sync`) or published by gateways; it "
        "replaces the whole entry for its id. Unknown fields are ignored; a missing required field, a "
        "wrong type or another `schema` value makes the record invalid.",
        {
            "schema": "Record type and version: always `coolant.deployment/1`.",
            "deployment_id": _ID,
            "model_group": _GROUP,
            "wildcard": "Whether the model name contains `*`; absent or null: derived from model_group.",
            "cooldown_time": "Deployment-level cooldown in seconds (`model_info.cooldown_time`); 0 disables "
            "cooldown for it; null: not set.",
            "allowed_fails": "Failures allowed per window before a cooldown (`model_info.allowed_fails`)." + _INT,
            "allowed_fails_policy": "Per-error-category allowed fails with LiteLLM's keys "
            "(`RateLimitErrorAllowedFails`, `ContentPolicyViolationErrorAllowedFails`, ...), each an integer "
            ">= 0 or null, written without a fraction or exponent (`1`, not `1.0`).",
            "deleted": "True removes the deployment from the live registry.",
        },
        {"deleted": False},
    ),
}


def file_name(name: str) -> str:
    """`outcome` -> `outcome.v1.schema.json` (the version is the tag's `/N`)."""
    tag = RECORDS[name][1]
    return f"{name}.v{tag.rsplit('/', 1)[1]}.schema.json"


def _inline(spec: Any, defs: dict[str, Any]) -> Any:
    """Replace `$ref`s to nested objects (e.g. an outcome's `ratelimit`) by their definition, open to unknown keys."""
    if isinstance(spec, list):
        return [_inline(item, defs) for item in spec]
    if not isinstance(spec, dict):
        return spec
    ref = spec.get("$ref")
    if isinstance(ref, str):
        nested = dict(defs[ref.rsplit("/", 1)[1]])
        nested.pop("title", None)
        props = {k: {key: v for key, v in _inline(p, defs).items() if key != "default"}
                 for k, p in nested.get("properties", {}).items()}
        return {**nested, "properties": props, "additionalProperties": True}
    return {k: _inline(v, defs) for k, v in spec.items()}


def _schema(name: str) -> dict[str, Any]:
    cls, tag, title, description, docs, defaults = RECORDS[name]
    raw = msgspec.json.schema(cls)
    defs = raw["$defs"]
    body = defs[raw["$ref"].rsplit("/", 1)[1]]
    missing = set(body["properties"]) ^ set(docs)
    if missing:
        raise RuntimeError(f"{cls.__name__}: fields and contract descriptions differ: {sorted(missing)}")
    properties: dict[str, Any] = {}
    for field, spec in body["properties"].items():
        spec = dict(spec)
        if field == "schema":
            spec = {"const": tag}
        spec.pop("default", None)
        out = {"description": docs[field], **_inline(spec, defs)}
        if field in defaults:
            out["default"] = defaults[field]
        properties[field] = out
    required = ["schema", *(f for f in body["required"] if f != "schema")]
    return {
        "$schema": DRAFT,
        "$id": f"urn:coolant:schema:{tag}",
        "title": title,
        "description": description,
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": True,
    }


def generate() -> dict[str, dict[str, Any]]:
    """File name -> schema, for every input record."""
    return {file_name(name): _schema(name) for name in RECORDS}


def render(schema: dict[str, Any]) -> str:
    """The checked-in text: 2-space indent, key order as built, trailing newline."""
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def _stale(directory: Path) -> list[str]:
    problems: list[str] = []
    wanted = generate()
    for name, schema in wanted.items():
        path = directory / name
        if not path.exists():
            problems.append(f"{path}: missing")
        elif path.read_text(encoding="utf-8") != render(schema):
            problems.append(f"{path}: out of date")
    if directory.is_dir():
        for path in sorted(directory.glob("*.schema.json")):
            if path.name not in wanted:
                problems.append(f"{path}: not generated by coolant.schemas.jsonschema (delete it)")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m coolant.schemas.jsonschema",
        description="Generate or check the JSON Schema files of coolant's input records.",
    )
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="exit 1 if the files are missing or stale")
    mode.add_argument("--write", action="store_true", help="(re)generate the files")
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help=f"output directory (default {DEFAULT_DIR})")
    args = parser.parse_args(argv)
    directory: Path = args.dir
    if args.check:
        problems = _stale(directory)
        for problem in problems:
            print(problem, file=sys.stderr)
        if problems:
            print("run: python -m coolant.schemas.jsonschema --write", file=sys.stderr)
            return 1
        return 0
    directory.mkdir(parents=True, exist_ok=True)
    for name, schema in generate().items():
        path = directory / name
        text = render(schema)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}", file=sys.stderr)
    for problem in _stale(directory):
        print(problem, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
