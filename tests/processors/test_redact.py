"""S1-S3: redaction by pattern (table of real-looking secrets), and E4 byte-identical without one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import coolant.processors.redact as redact_module
from coolant.processors.emit import mask
from coolant.processors.redact import REDACTED, redact, redact_bytes

# (what, text, the secret that must be gone, what must stay)
SECRETS: list[tuple[str, str, str, str]] = [
    ("openai project key", "Incorrect API key provided: sk-proj-Xb3kQ9vLmN2pR7sT1uW4yZ6aC8eG0iK2mO4qS6uW8yA0.",
     "sk-proj-Xb3kQ9", "Incorrect API key provided: "),
    ("openai legacy key", "sk-4f9Kd8Jq2Lm5Np7Qr9St1Uv3Wx5Yz7Ab9Cd1Ef3Gh5Ij7Kl is not valid", "sk-4f9Kd8",
     " is not valid"),
    ("anthropic key", "invalid x-api-key sk-ant-api03-Qw9Er8Ty7Ui6Op5As4Df3Gh2Jk1Lz0Xc9Vb8Nm7-AbCdEfAA",
     "sk-ant-api03-Qw9",
     "invalid x-api-key "),
    ("aws key at the start", "AKIAIOSFODNN7EXAMPLE: The security token included in the request is invalid",
     "AKIAIOSFODNN7EXAMPLE", ": The security token"),
    ("aws session key", "credentials ASIAY34FZKBOKMUTVV7A expired", "ASIAY34FZKBOKMUTVV7A", "credentials "),
    ("jwt", "token eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV"
     " rejected", "eyJhbGciOi", " rejected"),
    ("jwt header alone", "eyJhbGciOiJSUzI1NiIsImtpZCI6IjEifQ", "eyJhbGciOi", ""),
    ("bearer", "401 Unauthorized: Authorization: Bearer 9f8e7d6c5b4a3928171615141312111a", "9f8e7d6c5b4a",
     "Authorization: Bearer "),
    ("azure api-key in a url", "POST https://res.openai.azure.com/openai/deployments/x?api-version=1&api-key="
     "0123456789abcdef0123456789abcdef failed", "0123456789abcdef", "api-version=1&api-key="),
    ("azure header", "Ocp-Apim-Subscription-Key: 9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d", "9a8b7c6d",
     "Ocp-Apim-Subscription-Key: "),
    ("google key in a url", "GET https://generativelanguage.googleapis.com/v1beta/models?key=AIzaSyD-9tSrke72PouQMnMX"
     "-a7eZSW0jkFMBWY", "AIzaSyD-9tS", "models?key="),
    ("google key bare", "API key not valid: AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY", "AIzaSyD", "API key not valid: "),
    ("key= in a url", "https://api.example.com/v1?key=s3cr3tv4lu3&model=x", "s3cr3tv4lu3", "&model=x"),
    ("url password", "cannot connect to redis://default:hunter2hunter2@cache:6379/0", "hunter2hunter2",
     "@cache:6379/0"),
    ("json api_key", "{'api_key': 'abcdef0123456789', 'model': 'x'}", "abcdef0123456789", "'model': 'x'"),
    ("github token", "ghp_1234567890abcdefghijklmnopqrstuvwxyzAB leaked", "ghp_1234567890", " leaked"),
]


@pytest.mark.parametrize(("what", "text", "secret", "kept"), SECRETS, ids=[s[0] for s in SECRETS])
def test_secret_shapes_are_redacted(what: str, text: str, secret: str, kept: str) -> None:
    out = redact(text)
    assert secret not in out, (what, out)
    assert REDACTED in out and kept in out, (what, out)
    masked = mask(text)
    assert masked is not None and secret not in masked


PLAIN = [
    "Rate limit reached for gpt-4o in organization org-abc123 on tokens per min (TPM): Limit 30000, Used 29000",
    "litellm.InternalServerError: AzureException - The server had an error while processing your request.",
    "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.",
    "Error code: 429 - {'error': {'message': 'Request too large', 'type': 'tokens', 'param': None}}",
    "max_tokens=4096 is too large; key error: 'choices'",
    "deployment 3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a1f returned 503",
    "Invalid token: expired",
    "",
]


@pytest.mark.parametrize("text", PLAIN)
def test_text_without_secrets_is_unchanged(text: str) -> None:
    assert redact(text) is text or redact(text) == text


def test_mask_is_byte_identical_for_the_example_traffic() -> None:
    """Parity: redaction changes nothing in E4's output for messages without a secret (every example message)."""
    root = Path(__file__).resolve().parents[2]
    texts = {
        t
        for line in (root / "examples" / "traffic.jsonl").read_bytes().splitlines()
        for t in (json.loads(line).get("exception_message"), json.loads(line).get("exception_type"))
        if t
    }
    assert texts
    for text in texts:
        assert redact(text) == text, text
        cut = text[:1024]
        expected = cut if len(cut) <= 50 else cut[:50] + "*" * (len(cut) - 50)
        assert mask(text) == expected


def test_redact_bytes_keeps_invalid_utf8_around_matches() -> None:
    raw = b"\xff\xfe key sk-proj-Xb3kQ9vLmN2pR7sT1uW4 \xff"
    out = redact_bytes(raw)
    assert out.startswith(b"\xff\xfe key ") and out.endswith(b" \xff") and b"Xb3kQ9" not in out
    assert redact_bytes(b"\xff plain") == b"\xff plain"


def test_health_transitions_are_redacted() -> None:
    from coolant.processors.health import transition
    from coolant.schemas import Health

    probe = Health(event_id="p", ts=1_800_000_000.0, deployment_id="d", model_group="g", healthy=False,
                   status_code=401, exception_type="AuthenticationError",
                   exception_message="AKIAIOSFODNN7EXAMPLE: The security token included in the request is invalid")
    ht = transition(None, probe)
    assert ht is not None and "AKIAIOSFODNN7EXAMPLE" not in ht.exception_received
    assert ht.exception_received.startswith(REDACTED)


@pytest.mark.parametrize(("what", "text", "secret", "kept"), SECRETS, ids=[s[0] for s in SECRETS])
def test_a_secret_is_redacted_every_time_and_never_kept(what: str, text: str, secret: str, kept: str) -> None:
    """Clean texts are remembered to skip the pattern next time; a text with a secret is redacted again on each
    call, and not held in that memory."""
    first, again = redact(text), redact(text)
    assert secret not in first and secret not in again and first == again
    assert text not in redact_module._CLEAN


def test_a_clean_text_comes_back_as_the_same_string_each_time() -> None:
    text = "".join(["RateLimitError: ", "upstream said no"])  # built at run time: not an interned constant
    assert redact(text) is text
    assert redact(text) is text
    assert text in redact_module._CLEAN
