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

from coolant.config.loader import parse_config
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


_HEAD = (
    '{"schema":"coolant.outcome/1","event_id":"e1","deployment_id":"d","model_group":"g","ok":false,'
)
# raw JSON text, so number spellings and escapes reach both readers as a producer wrote them
CORPUS: list[tuple[str, str]] = [
    ("plain", _HEAD + '"ts":1767225600.5,"status_code":500}'),
    ("status 500.0", _HEAD + '"ts":1767225600.5,"status_code":500.0}'),
    ("status 5e2", _HEAD + '"ts":1767225600.5,"status_code":5e2}'),
    ("status 500.5", _HEAD + '"ts":1767225600.5,"status_code":500.5}'),
    ("status 99", _HEAD + '"ts":1767225600.5,"status_code":99}'),
    ("status 600", _HEAD + '"ts":1767225600.5,"status_code":600}'),
    ("status 10**25", _HEAD + '"ts":1767225600.5,"status_code":10000000000000000000000000}'),
    ("status null", _HEAD + '"ts":1767225600.5,"status_code":null}'),
    ("attempt 1.0", _HEAD + '"ts":1767225600.5,"attempt":1.0}'),
    ("attempt 1e0", _HEAD + '"ts":1767225600.5,"attempt":1e0}'),
    ("attempt 2**40", _HEAD + '"ts":1767225600.5,"attempt":1099511627776}'),
    ("lone surrogate", _HEAD + '"ts":1767225600.5,"exception_message":"\\ud800 boom"}'),
    ("surrogate pair", _HEAD + '"ts":1767225600.5,"exception_message":"\\ud83d\\ude00"}'),
    ("lone surrogate in unknown field", _HEAD + '"ts":1767225600.5,"x":"\\udfff"}'),
    ("ts integer", _HEAD + '"ts":1767225600}'),
    ("ts milliseconds", _HEAD + '"ts":1767225600000}'),
    ("ts 1e12", _HEAD + '"ts":1e12}'),
    ("ts 1e300", _HEAD + '"ts":1e300}'),
    ("ts 1e400", _HEAD + '"ts":1e400}'),
    ("ts negative", _HEAD + '"ts":-1}'),
    ("ts zero", _HEAD + '"ts":0}'),
    ("cooldown_time 1e308", _HEAD + '"ts":1767225600.5,"cooldown_time":1e308}'),
    ("cooldown_time -5", _HEAD + '"ts":1767225600.5,"cooldown_time":-5}'),
    ("cooldown_time 3600.0", _HEAD + '"ts":1767225600.5,"cooldown_time":3600.0}'),
    ("latency 1e400", _HEAD + '"ts":1767225600.5,"latency_ms":1e400}'),
    ("latency -3", _HEAD + '"ts":1767225600.5,"latency_ms":-3}'),
    ("health status 503.0", '{"schema":"coolant.health/1","event_id":"h","ts":1767225600.5,"deployment_id":"d",'
     '"model_group":"g","healthy":false,"status_code":503.0}'),
    ("deployment allowed_fails 3.0", '{"schema":"coolant.deployment/1","deployment_id":"d","model_group":"g",'
     '"allowed_fails":3.0,"allowed_fails_policy":{"RateLimitErrorAllowedFails":2.0}}'),
    ("deployment cooldown_time 1e9", '{"schema":"coolant.deployment/1","deployment_id":"d","model_group":"g",'
     '"cooldown_time":1e9}'),
    ("not an object", "[1]"),
    ("null", "null"),
]


def _strict_json(text: str) -> Any:
    """RFC 8259 JSON, as a validator's reader (JSON.parse, ajv) sees it: no NaN or Infinity literals."""
    def refuse(name: str) -> Any:
        raise ValueError(name)

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize(("why", "text"), CORPUS, ids=[c[0] for c in CORPUS])
def test_schema_and_decoder_agree(validators: dict[str, Draft202012Validator], why: str, text: str) -> None:
    """Issue 17: whatever the schema accepts the worker accepts, and the other way round."""
    obj = _strict_json(text)
    schema_says = isinstance(obj, dict) and _schema_ok(validators, obj)
    try:
        decode(text.encode())
        decoder_says = True
    except InvalidRecord:
        decoder_says = False
    assert schema_says == decoder_says, (why, schema_says, decoder_says)


def test_the_corpus_has_both_verdicts(validators: dict[str, Draft202012Validator]) -> None:
    """Guards the agreement test against a corpus (or a schema) that says yes, or no, to everything."""
    verdicts = {isinstance(o, dict) and _schema_ok(validators, o) for o in (_strict_json(t) for _, t in CORPUS)}
    assert verdicts == {True, False}


def test_integral_floats_and_surrogates_are_read_as_the_schema_reads_them() -> None:
    rec = decode((_HEAD + '"ts":1767225600.5,"status_code":5e2,"exception_message":"\\ud800!"}').encode())
    assert type(rec).__name__ == "Outcome"
    assert rec.status_code == 500 and type(rec.status_code) is int  # type: ignore[union-attr]
    assert rec.exception_message == "\ufffd!"  # type: ignore[union-attr]


def test_milliseconds_are_refused_with_a_hint() -> None:
    with pytest.raises(InvalidRecord, match="milliseconds") as e:
        decode((_HEAD + '"ts":1767225600000}').encode())
    assert e.value.field == "ts"
