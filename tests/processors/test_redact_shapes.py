"""S1-S3 by shape and by structure: one row per secret shape (the 12 of issue 26 and more), each checked in the
text itself, in E4's mask, in a dead letter (raw and error) and as a person sees it (`shown`); and control
characters escaped in every human-facing line."""

from __future__ import annotations

import orjson
import pytest

from coolant.processors.emit import mask
from coolant.processors.redact import REDACTED, printable, redact, redact_bytes, rule_names, shown
from coolant.streams.deadletter import deadletter_value

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM9OiJjRazXBZ1BJjP5CEqVH8e2Z2\n"
    "q8JxRk5vYb3Q7wXhF0p1sT9uV2wX4yZ6aB8cD0eF2gH4iJ6kL8mN0oP2qR4sT6u\n-----END RSA PRIVATE KEY-----"
)

# (shape, text, the secrets that must be gone, what must stay)
SHAPES: list[tuple[str, str, tuple[str, ...], str]] = [
    ("openai", "Incorrect API key provided: sk-proj-Xb3kQ9vLmN2pR7sT1uW4T3BlbkFJyZ6aC8eG0iK2mO4qS6uW8yA0.",
     ("sk-proj-Xb3kQ9", "T3BlbkFJyZ6a"), "Incorrect API key provided: "),
    ("anthropic", "authentication_error: invalid x-api-key sk-ant-api03-Qw9Er8Ty7Ui6Op5As4Df3Gh2Jk1Lz0Xc9Vb8Nm7"
     "-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789AbCdEfGhIjKlMnOpQrStUvWxAA", ("sk-ant-api03", "Qw9Er8Ty7"),
     "authentication_error: invalid x-api-key "),
    ("aws id and secret", f"Unable to locate credentials: AKIAIOSFODNN7EXAMPLE {AWS_SECRET} (us-east-1)",
     ("AKIAIOSFODNN7EXAMPLE", AWS_SECRET), "(us-east-1)"),
    ("aws id and secret, joined", f"credentials AKIAIOSFODNN7EXAMPLE:{AWS_SECRET} rejected",
     ("AKIAIOSFODNN7EXAMPLE", AWS_SECRET), " rejected"),
    ("aws id and secret, json", f'{{"AccessKeyId": "ASIAY34FZKBOKMUTVV7A", "SecretAccessKey": "{AWS_SECRET}"}}',
     ("ASIAY34FZKBOKMUTVV7A", AWS_SECRET), '"SecretAccessKey": "'),
    ("aws secret by name", f"aws_secret_access_key={AWS_SECRET} region=eu-west-1", (AWS_SECRET,), " region=eu-west-1"),
    ("google", "API key not valid. Please pass a valid API key: AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
     ("AIzaSyD-9tSrke72",), "Please pass a valid API key: "),
    ("github", "Bad credentials ghp_1234567890abcdefghijklmnopqrstuvwxyzAB and "
     "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ012345",
     ("ghp_1234567890", "github_pat_11ABC"), "Bad credentials "),
    ("slack", "invalid_auth for xoxb-1234567890-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx at "
     "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
     ("xoxb-1234567890", "T00000000/B00000000"), "hooks.slack.com/services/"),
    ("jwt", "token eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV"
     " rejected", ("eyJhbGciOi", "SflKxwRJSM"), " rejected"),
    ("bearer", "401 Unauthorized: Authorization: Bearer 9f8e7d6c5b4a3928171615141312111a", ("9f8e7d6c5b4a",),
     "Authorization: Bearer "),
    ("basic auth header", "Authorization: Basic dXNlcjpwYXNzd29yZA==", ("dXNlcjpwYXNz",), "Authorization: Basic "),
    ("url credentials", "could not connect to postgres://admin:s3cr3tPa55@db:5432/app and redis://:hunter2@cache:6379",
     ("s3cr3tPa55", "hunter2"), "postgres://admin:"),
    ("azure api-key header", "Access denied: api-key: 0123456789abcdef0123456789abcdef", ("0123456789abcdef",),
     "api-key: "),
    ("azure subscription key", "Ocp-Apim-Subscription-Key: 9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d", ("9a8b7c6d",),
     "Ocp-Apim-Subscription-Key: "),
    ("azure storage account key", "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=Eby8vdM02xNOcqFlqUwJPLl"
     "mEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;EndpointSuffix=core.windows.net",
     ("Eby8vdM02x",), ";EndpointSuffix=core.windows.net"),
    ("azure sas signature", "GET https://acct.blob.core.windows.net/c?sv=2021&sig=abc%2Bdef%3Dxyz&se=2025 403",
     ("abc%2Bdef",), "&se=2025 403"),
    ("azure ad client secret", "AADSTS7000215: invalid secret abc8Q~aBcDeFgHiJkLmNoPqRsTuVwXyZ01234567",
     ("aBcDeFgHiJkLmNoPqRs",), "AADSTS7000215: invalid secret "),
    ("pem block", f"loading key failed: {PEM} (bad padding)", ("MIIEpAIBAAKCAQEA", "q8JxRk5vYb3Q"),
     " (bad padding)"),
    ("pem block cut short", "key: -----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBkg4LVWM9nuwNSk3yB", ("MHcCAQEEIBkg",),
     "key: "),
    ("pem block in escaped json", '{"msg": "x -----BEGIN OPENSSH PRIVATE KEY-----\\nb3BlbnNzaC1rZXktdjEAAAAA\\n'
     '-----END OPENSSH PRIVATE KEY-----", "a": 1}', ("b3BlbnNzaC1rZXk",), '", "a": 1}'),
    ("json password", 'Error code: 400 - {"user": "svc", "password": "hunter2 with spaces", "model": "gpt-4o"}',
     ("hunter2",), '"model": "gpt-4o"'),
    ("json password, escaped in a string", '{"exception_message": "{\\"password\\": \\"hunter2\\", \\"u\\": 1}"}',
     ("hunter2",), '\\"password\\": \\"'),
    ("python dict", "{'api_key': 'abcdef0123456789', 'client_secret': 'x', 'model': 'x'}",
     ("abcdef0123456789", "'x', 'model'"), "'model': 'x'"),
    ("query string", "GET /v1/x?user=bob&password=hunter2&access_token=ya&model=y", ("hunter2", "=ya&"),
     "&model=y"),
    ("assignment", "config: client_secret=abcDEF123 DB_PASSWORD='pa ss' grant_type=client_credentials",
     ("abcDEF123", "pa ss"), " grant_type=client_credentials"),
    ("header with a prefix", "X-API-Key: 9a8b7c6d5e4f, x-goog-api-key: 1a2b3c4d5e6f7",
     ("9a8b7c6d5e4f", "1a2b3c4d5e6f7"), "X-API-Key: "),
    ("other providers", "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567 gsk_" + "a1" * 26 + " r8_" + "Z9" * 16,
     ("hf_AbCd", "gsk_a1a1", "r8_Z9Z9"), " "),
]


@pytest.mark.parametrize(("shape", "text", "secrets", "kept"), SHAPES, ids=[s[0] for s in SHAPES])
def test_every_shape_is_redacted_wherever_it_goes(shape: str, text: str, secrets: tuple[str, ...], kept: str) -> None:
    out = redact(text)
    assert REDACTED in out and kept in out, (shape, out)
    masked = mask(text) or ""
    letter = orjson.loads(deadletter_value(f"invalid: {text}", "t", 0, 1, text.encode()))
    for secret in secrets:
        assert secret not in out, (shape, out)
        assert secret not in masked, (shape, masked)
        assert secret not in letter["raw"] and secret not in letter["error"], (shape, letter)
        assert secret not in shown(text)
    assert redact(out) == out  # redacting again changes nothing


def test_shape_table_covers_the_twelve_shapes_of_the_issue() -> None:
    named = {s[0].split(" ")[0].split(",")[0] for s in SHAPES}
    assert {"openai", "anthropic", "aws", "google", "github", "slack", "jwt", "bearer", "url", "azure", "pem",
            "json"} <= named
    assert len(rule_names()) == len(set(rule_names()))


NOT_SECRETS = [
    "Invalid token: expired",
    "api_key=None was given; pass api_key=... or set OPENAI_API_KEY",
    "max_tokens=4096 is too large; input_cost_per_token=0.5",
    "the secret: is safe, api_key: API key for X",
    "key = model_id and lock_key == other",
    "{'loc': ['body', 'messages'], 'msg': 'field required', 'type': 'missing'}",
    "Rate limit reached for gpt-4o on tokens per min (TPM): Limit 30000, Used 29000, Requested 1500.",
    "sha1 " + "0123456789abcdef" * 2 + "01234567",  # 40 hex characters, no AWS key id in the text
]


@pytest.mark.parametrize("text", NOT_SECRETS)
def test_no_secret_no_change(text: str) -> None:
    assert redact(text) == text


def test_an_aws_secret_alone_is_not_guessed() -> None:
    """Without an AWS key id in the same text, 40 base64 characters could be any hash: kept."""
    assert redact(f"etag {AWS_SECRET}") == f"etag {AWS_SECRET}"
    assert AWS_SECRET not in redact(f"AKIAIOSFODNN7EXAMPLE then later {AWS_SECRET}")


@pytest.mark.parametrize(
    ("raw", "shown_as"),
    [
        ("line one\nFORGED 2026-01-01 COOLDOWN dep", "line one\\nFORGED 2026-01-01 COOLDOWN dep"),
        ("a\r\nb\tc", "a\\r\\nb\\tc"),
        ("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"),
        ("bell\x07 del\x7f c1\x85", "bell\\x07 del\\x7f c1\\x85"),
        ("sep\u2028para\u2029", "sep\\u2028para\\u2029"),
        ("bidi \u202eevil\u202c \u2066x\u2069", "bidi \\u202eevil\\u202c \\u2066x\\u2069"),
        ("plain text, unicode é 日本", "plain text, unicode é 日本"),
    ],
)
def test_printable_escapes_control_characters(raw: str, shown_as: str) -> None:
    assert printable(raw) == shown_as
    assert "\n" not in printable(raw) and "\r" not in printable(raw)


def test_shown_redacts_then_escapes() -> None:
    assert shown("key sk-proj-Xb3kQ9vLmN2pR7sT1uW4\nnext") == f"key {REDACTED}\\nnext"


def test_a_big_record_is_redacted_quickly_enough_to_matter_not() -> None:
    """A 1 MB dead letter with many secret names in it is still redacted (the shell bounds what it passes)."""
    raw = (b'{"password": "hunter2", "token": "t0ken", "pad": "' + b"x" * 100 + b'"}\n') * 6000
    out = redact_bytes(raw)
    assert b"hunter2" not in out and b"t0ken" not in out and out.count(REDACTED.encode()) == 12000


def test_a_secret_in_the_exception_type_leaves_no_part_behind() -> None:
    """N1 keeps the last dotted part of a type; of a JWT that is its signature, which no longer looks like one."""
    from coolant.processors.categories import exception_name

    jwt = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzdmMtYWNjb3VudCJ9.Zm9vYmFyYmF6cXV4cXV1eA"
    name = exception_name(f"AuthenticationError {jwt}")
    assert name is not None and "Zm9vYmFy" not in name and REDACTED in name
    assert exception_name("litellm.RateLimitError") == "RateLimitError"
