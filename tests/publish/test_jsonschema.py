"""The checked-in JSON Schema files: fresh, valid draft 2020-12, and in agreement with `decode`.

Needs the `jsonschema` package (test extra) to validate; the generator itself does not.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from coolant.config import parse_config
from coolant.publish.command import deployment_records
from coolant.schemas import InvalidRecord, decode, encode
from coolant.schemas.jsonschema import DEFAULT_DIR, RECORDS, file_name, generate, main, render

ROOT = Path(__file__).resolve().parents[2]


def test_checked_in_schemas_are_fresh() -> None:
    """Fails when a record class or a description changed without regenerating the files."""
    assert DEFAULT_DIR == ROOT / "schemas" / "json"
    stale = [
        name for name, schema in generate().items()
        if not (DEFAULT_DIR / name).exists() or (DEFAULT_DIR / name).read_text(encoding="utf-8") != render(schema)
    ]
    assert not stale, f"stale: {stale}; run: python -m coolant.schemas.jsonschema --write"
    assert sorted(p.name for p in DEFAULT_DIR.glob("*.schema.json")) == sorted(generate())


def test_check_and_write_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--check", "--dir", str(tmp_path)]) == 1  # missing
    assert main(["--write", "--dir", str(tmp_path)]) == 0
    assert main(["--check", "--dir", str(tmp_path)]) == 0
    target = tmp_path / file_name("outcome")
    target.write_text(target.read_text().replace("Unique per attempt", "Unique"))
    assert main(["--check", "--dir", str(tmp_path)]) == 1  # edited by hand
    assert main(["--write", "--dir", str(tmp_path)]) == 0
    (tmp_path / "old.schema.json").write_text("{}")
    assert main(["--check", "--dir", str(tmp_path)]) == 1  # not generated
    assert "old.schema.json: not generated" in capsys.readouterr().err


def test_module_entry_point_checks_the_repository() -> None:
    proc = subprocess.run([sys.executable, "-m", "coolant.schemas.jsonschema", "--check"],
                          capture_output=True, text=True, check=False, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr


@pytest.fixture(scope="module")
def validators() -> dict[str, Draft202012Validator]:
    out = {}
    for name in RECORDS:
        schema = json.loads((DEFAULT_DIR / file_name(name)).read_text())
        Draft202012Validator.check_schema(schema)
        out[RECORDS[name][1]] = Draft202012Validator(schema)
    return out


def test_schema_shape(validators: dict[str, Draft202012Validator]) -> None:
    for tag, v in validators.items():
        s = v.schema
        assert s["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert s["properties"]["schema"]["const"] == tag
        assert s["required"][0] == "schema"
        assert s["additionalProperties"] is True
        assert all(p.get("description") for p in s["properties"].values())
    outcome = validators["coolant.outcome/1"].schema
    assert outcome["required"] == ["schema", "event_id", "ts", "deployment_id", "model_group", "ok"]
    assert outcome["properties"]["attempt"]["default"] == 0
    assert outcome["properties"]["final"]["default"] is True
    assert outcome["properties"]["source"]["default"] == "request"


def _examples() -> list[dict[str, Any]]:
    lines = (ROOT / "examples" / "traffic.jsonl").read_bytes().splitlines()
    outcomes = [json.loads(line) for line in lines[:200]]
    health = [json.loads(line) for line in lines if b'"coolant.health/1"' in line]
    cfg = parse_config({"model_list": [
        {"model_name": "a", "litellm_params": {"model": "x/a"},
         "model_info": {"id": "a1", "cooldown_time": 0, "allowed_fails": 1,
                        "allowed_fails_policy": {"RateLimitErrorAllowedFails": 4}}},
        {"model_name": "x/*", "litellm_params": {"model": "x/*"}},
    ]})
    deployments = [json.loads(encode(r)) for r in deployment_records(cfg)]
    deleted = {"schema": "coolant.deployment/1", "deployment_id": "a1", "model_group": "a", "deleted": True}
    return outcomes + health + deployments + [deleted]


def _good_outcome(**changes: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {"schema": "coolant.outcome/1", "event_id": "e1", "ts": 1767225600.5,
                           "deployment_id": "d", "model_group": "g", "ok": False, "status_code": 429}
    rec.update(changes)
    return {k: v for k, v in rec.items() if v is not ...}


BROKEN: list[tuple[str, dict[str, Any]]] = [
    ("missing event_id", _good_outcome(event_id=...)),
    ("missing ok", _good_outcome(ok=...)),
    ("missing schema", _good_outcome(schema=...)),
    ("next version", _good_outcome(schema="coolant.outcome/2")),
    ("output record tag", _good_outcome(schema="coolant.cooldown/1")),
    ("empty event_id", _good_outcome(event_id="")),
    ("event_id too long", _good_outcome(event_id="x" * 129)),
    ("ts as string", _good_outcome(ts="1767225600")),
    ("ts null", _good_outcome(ts=None)),
    ("ok as string", _good_outcome(ok="false")),
    ("negative attempt", _good_outcome(attempt=-1)),
    ("status_code as string", _good_outcome(status_code="429")),
    ("health without healthy", {"schema": "coolant.health/1", "event_id": "h", "ts": 1.0,
                                "deployment_id": "d", "model_group": "g"}),
    ("negative cooldown_time", {"schema": "coolant.deployment/1", "deployment_id": "d", "model_group": "g",
                                "cooldown_time": -1}),
    ("policy value negative", {"schema": "coolant.deployment/1", "deployment_id": "d", "model_group": "g",
                               "allowed_fails_policy": {"RateLimitErrorAllowedFails": -1}}),
    ("policy not a map", {"schema": "coolant.deployment/1", "deployment_id": "d", "model_group": "g",
                          "allowed_fails_policy": [1]}),
]


def _schema_ok(validators: dict[str, Draft202012Validator], rec: dict[str, Any]) -> bool:
    # a consumer picks the schema by the tag, as the worker's decoder does; an unknown tag is invalid
    v = validators.get(rec.get("schema", ""))
    return v is not None and v.is_valid(rec)


def _decode_ok(rec: dict[str, Any]) -> bool:
    try:
        decode(json.dumps(rec))
    except InvalidRecord:
        return False
    return True


def test_examples_validate(validators: dict[str, Draft202012Validator]) -> None:
    examples = _examples()
    assert {e["schema"] for e in examples} == set(validators)
    for rec in examples:
        errors = list(validators[rec["schema"]].iter_errors(rec))
        assert not errors, (rec, [e.message for e in errors])
        assert _decode_ok(rec)


def test_unknown_fields_are_allowed(validators: dict[str, Draft202012Validator]) -> None:
    rec = _good_outcome(region="eu-west", extra={"nested": [1, 2]})
    assert _schema_ok(validators, rec) and _decode_ok(rec)


@pytest.mark.parametrize(("why", "rec"), BROKEN, ids=[b[0] for b in BROKEN])
def test_broken_records_fail_schema_and_decode_alike(
    validators: dict[str, Draft202012Validator], why: str, rec: dict[str, Any]
) -> None:
    assert not _schema_ok(validators, rec), why
    assert not _decode_ok(rec), why


def test_documented_difference_integral_floats(validators: dict[str, Draft202012Validator]) -> None:
    """JSON Schema's "integer" accepts 1.0; the decoder does not. The descriptions tell producers."""
    rec = _good_outcome(attempt=1.0)
    assert _schema_ok(validators, rec) and not _decode_ok(rec)
    assert "not `1.0`" in validators["coolant.outcome/1"].schema["properties"]["attempt"]["description"]
