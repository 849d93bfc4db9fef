"""S1-S3 (docs/input-bounds.md): secrets are cut out of text by pattern before any of it leaves the processor.

E4 masking keeps the first 50 characters of an error text, which is exactly where providers quote the key
they refused ("Incorrect API key provided: sk-proj-..."). So every text a record carries is redacted first:
each match of a known key shape becomes `[REDACTED]` (a prefix that names what it was, `Bearer `, `api-key=`,
stays). A text with no match comes back as the same string, so outputs without secrets are byte-identical to
what they were before redaction existed (compatible-profile parity).

Pure: standard-library `re` only, used by the core (E4) and by the shell (dead letters, logs).
"""

from __future__ import annotations

import re

REDACTED = "[REDACTED]"

# (name, pattern, keep): `keep` is the number of the group kept in front of the redaction (0: none)
_RULES: tuple[tuple[str, str, int], ...] = (
    ("openai/anthropic key", r"\bsk-[A-Za-z0-9][A-Za-z0-9_\-]{10,}", 0),
    ("aws access key id", r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b", 0),
    ("google api key", r"\bAIza[0-9A-Za-z_\-]{30,}", 0),
    ("jwt", r"\beyJ[A-Za-z0-9_\-]{8,}(?:\.[A-Za-z0-9_\-]*){0,2}", 0),
    ("github token", r"\bgh[pousr]_[A-Za-z0-9]{30,}", 0),
    ("slack token", r"\bxox[abposr]-[A-Za-z0-9\-]{10,}", 0),
    ("bearer token", r"(\b(?i:bearer)\s+)[A-Za-z0-9._~+/=\-]{8,}", 1),
    ("url password", r"(://[^/\s:@]+:)[^/\s@]+(?=@)", 1),
    (
        "key in a url or an assignment",
        r"((?:\b|[?&;])(?i:(?:x-)?api[-_]?key|key|access[-_]?token|token|secret|client[-_]?secret|password|sig|"
        r"signature|accountkey|aws_secret_access_key)=)[^\s&\"',;}#]{6,}",
        1,
    ),
    (
        "key in a header or a json field",
        r"(\b(?i:(?:x-)?api[-_]?key|ocp-apim-subscription-key|subscription[-_]?key|x-goog-api-key|"
        r"aws_secret_access_key)[\"']?\s*:\s*[\"']?)[^\s&\"',;}]{6,}",
        1,
    ),
)
_PATTERN = re.compile("|".join(f"(?P<r{i}>{p})" for i, (_, p, _) in enumerate(_RULES)))
_GROUPS: list[tuple[str, int]] = []
"""For each rule, its group name and the absolute number of the group it keeps (0: none)."""


def _index() -> None:
    for i, (_, _, keep) in enumerate(_RULES):
        name = f"r{i}"
        _GROUPS.append((name, _PATTERN.groupindex[name] + keep if keep else 0))


_index()


def _replace(m: re.Match[str]) -> str:
    for name, kept in _GROUPS:
        if m.group(name) is not None:
            return (m.group(kept) if kept else "") + REDACTED
    return REDACTED  # pragma: no cover - some group always matched


_CLEAN: dict[str, None] = {}
"""Recent texts known to hold no secret (at most `_CLEAN_MAX`, each at most `_CLEAN_CHARS` long): error texts
repeat (a provider's few messages per status) and the pattern costs microseconds a text, once per cooldown
field. Only clean texts are kept, so no secret stays in memory because of it."""
_CLEAN_MAX = 1024
_CLEAN_CHARS = 512


def redact(text: str) -> str:
    """`text` with every secret-shaped substring replaced; the very same string when there is none."""
    if text in _CLEAN:
        return text
    out = _PATTERN.sub(_replace, text)
    if out == text and len(text) <= _CLEAN_CHARS:
        if len(_CLEAN) >= _CLEAN_MAX:
            _CLEAN.clear()
        _CLEAN[text] = None
        return text
    return out


def redact_bytes(raw: bytes) -> bytes:
    """`redact` on raw bytes (dead-letter values): invalid UTF-8 is kept byte for byte around the matches."""
    text = raw.decode("utf-8", "surrogateescape")
    out = redact(text)
    return raw if out == text else out.encode("utf-8", "surrogateescape")


def rule_names() -> list[str]:
    return [name for name, _, _ in _RULES]
