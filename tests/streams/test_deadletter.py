"""B7 and S2: a dead-letter value is bounded whatever the record, and secrets in it are redacted by default."""

from __future__ import annotations

import base64

import orjson

from coolant.streams.deadletter import RAW_KEEP, deadletter_value


def _dl(raw: bytes | None, **kw: bool) -> dict[str, object]:
    return orjson.loads(deadletter_value("bad", "t", 3, 7, raw, **kw))  # type: ignore[no-any-return]


def test_small_utf8_record_is_kept_as_text() -> None:
    d = _dl(b'{"a": 1}')
    assert d == {"error": "bad", "topic": "t", "partition": 3, "offset": 7, "raw": '{"a": 1}', "raw_size": 8}


def test_escaped_quotes_and_invalid_bytes_stay_bounded() -> None:
    for raw in (b'\\"' * 300_000, b"\xff" * 300_000, b'\x00"' * 300_000):
        value = deadletter_value("bad", "t", 0, 0, raw)
        assert len(value) < 8 * RAW_KEEP, len(value)
        d = orjson.loads(value)
        assert d["raw_size"] == len(raw) and d["raw_truncated"] is True


def test_non_utf8_is_base64() -> None:
    d = _dl(b"\xff\x00abc")
    assert d["raw_encoding"] == "base64" and base64.b64decode(str(d["raw"])) == b"\xff\x00abc"


def test_a_cut_inside_a_character_is_still_text() -> None:
    raw = b"a" * (RAW_KEEP - 1) + "é".encode() * 10
    d = _dl(raw)
    assert "raw_encoding" not in d and d["raw"] == "a" * (RAW_KEEP - 1)


def test_secrets_are_redacted_unless_raw_is_kept() -> None:
    raw = b'{"exception_message": "bad key sk-proj-Xb3kQ9vLmN2pR7sT1uW4yZ6"}'
    assert "Xb3kQ9" not in str(_dl(raw)["raw"])
    assert "Xb3kQ9" in str(_dl(raw, keep_raw=True)["raw"])
    err = orjson.loads(deadletter_value("Invalid value 'AKIAIOSFODNN7EXAMPLE'", "t", 0, 0, b"{}"))
    assert "AKIAIOSFODNN7EXAMPLE" not in err["error"]


def test_tombstone() -> None:
    d = _dl(None)
    assert d["tombstone"] is True and d["raw_size"] == 0


def test_kept_raw_is_labelled_and_the_error_still_redacted() -> None:
    """--keep-raw-deadletters keeps the record as it came, says so in the value, and never the error's secret."""
    raw = b'{"password": "hunter2"}'
    kept = orjson.loads(deadletter_value("bad password=hunter2", "t", 0, 0, raw, keep_raw=True))
    assert kept["raw"] == raw.decode() and kept["raw_unredacted"] is True
    assert "hunter2" not in kept["error"]
    default = orjson.loads(deadletter_value("bad password=hunter2", "t", 0, 0, raw))
    assert "raw_unredacted" not in default and "hunter2" not in default["raw"] + default["error"]


def test_a_secret_across_the_cut_is_redacted_whole() -> None:
    """The cut at RAW_KEEP comes after redaction: a PEM block that straddles it leaves none of its body."""
    body = "MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM9Oi" * 60
    raw = ('{"m": "' + "x" * (RAW_KEEP - 100) + "-----BEGIN RSA PRIVATE KEY-----" + body
           + '-----END RSA PRIVATE KEY-----", "pad": "' + "y" * 2 * RAW_KEEP + '"}').encode()
    d = _dl(raw)
    assert d["raw_truncated"] is True and "MIIEpAIB" not in str(d["raw"]) and d["raw_size"] == len(raw)
