"""S1-S3 (docs/input-bounds.md): secrets are cut out of text before any of it leaves the processor.

E4 masking keeps the first 50 characters of an error text, which is exactly where providers quote the key
they refused ("Incorrect API key provided: sk-proj-..."). So every text a record carries is redacted first,
by two kinds of rule:
- by shape: a token whose form names its issuer (`sk-…`, `AKIA…`, `AIza…`, `ghp_…`, `xoxb-…`, a JWT, a PEM
  private-key block, …), the shapes the secret scanners' rule sets (gitleaks, detect-secrets) list for the
  providers a gateway talks to;
- by structure: the value next to a name that says it is a secret (`"password": "…"`, `api_key=…`,
  `Authorization: …`), in JSON or Python dicts (quotes escaped or not), query strings, assignments and headers;
  and the AWS secret access key, which has no shape of its own, in a text that holds an AWS key id.
Each match becomes `[REDACTED]`; what names it (`Bearer `, `api-key=`, `"password": "`) stays. A text with
no match comes back as the same string, so outputs without secrets are byte-identical to what they were
before redaction existed (compatible-profile parity).

`printable` is the other half of a safe human-facing line: control characters (a newline above all) are
escaped, so one record cannot forge a line of `coolant tail`, a log or an alert. It is not applied to the
records themselves (LiteLLM keeps newlines in the texts it stores; JSON escapes them anyway).

Pure: standard-library `re` only, used by the core (E4) and by the shell (dead letters, logs, tail, alerts).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

REDACTED = "[REDACTED]"

_WORDS = (
    "password passwd pwd pass passphrase secret client_secret clientsecret secret_key secretkey private_key "
    "privatekey secret_access_key secretaccesskey api_key apikey access_key accesskey account_key accountkey "
    "subscription_key access_token accesstoken refresh_token auth_token id_token session_token security_token "
    "bearer_token private_token sas_token api_token oauth_token authorization credential credentials "
    "connection_string connectionstring cookie set_cookie"
)
_SECRET: frozenset[str] = frozenset(_WORDS.split())
"""Names whose value is a secret, also as the last part of a longer name (`openai_api_key`, `DB_PASSWORD`,
`x-api-key`; `-` and `.` read as `_`)."""
_ALONE: frozenset[str] = frozenset({"token"})
"""Secret only as the whole name: `max_tokens` and `input_cost_per_token` are not secrets."""
_PARAMETER: frozenset[str] = frozenset({"key", "sig", "signature", "x_amz_signature", "x_goog_signature"})
"""Secret only as a parameter (`name=value`): Google's `?key=`, Azure SAS `sig=`, AWS SigV4 `X-Amz-Signature=`."""
_HEADER: frozenset[str] = frozenset(
    {
        "password", "passwd", "passphrase", "client_secret", "secret_key", "private_key", "secret_access_key",
        "api_key", "apikey", "access_key", "access_token", "authorization", "proxy_authorization",
        "subscription_key", "cookie", "set_cookie", "security_token",
    }
)
"""Secret after an unquoted `Name: value` (headers, YAML) even when the value is bare. Not `token:` or `secret:`:
"Invalid token: expired" is an error message, not a credential."""
_NAME_BEFORE = re.compile(r"(?<![A-Za-z0-9_.-])([A-Za-z][A-Za-z0-9_.-]{0,63})(\\{0,3}[\"'])?[ \t]*\Z")
"""The name in front of a separator (searched in the few characters before it), and its closing quote."""
_SEPARATOR = re.compile(r"[=:]")
_OPEN_QUOTE = re.compile(r"[ \t]*(\\{0,3}[\"'])")
_BARE_START = re.compile(r"[ \t]*")
_SCHEME = re.compile(r"(?i:bearer|basic|token|digest|apikey|sharedaccesssignature|sharedkey|aws4-hmac-sha256)\s+")
_QUOTED_VALUE = re.compile(r"(?:[^\"'\\\r\n]|\\(?![\\\"']))+")
"""A quoted value up to its closing quote, escaped (`\\"`, inside a JSON string) or not."""
_BARE_VALUE = re.compile(r"[^\s&\"',;}#<>\\\]\)\[]+")
_PLACEHOLDERS = frozenset({"none", "null", "nil", "undefined", "true", "false", REDACTED.lower()})
"""Values that say there is no secret (`api_key=None`; also `...` and `***`): kept, so messages about a missing
key stay readable."""
_HEADER_MIN = 6
"""A bare header value holds a digit and this many characters or more: "api_key: API key for X" is prose."""


def _is_secret(name: str, separator: str, quoted_name: bool, quoted_value: bool) -> bool:
    """Whether the value after `name` + `separator` is a secret, by the name and the context."""
    n = name.lower().replace("-", "_").replace(".", "_")
    tail = n.rsplit("_", 2)
    ends = {n, "_".join(tail[-2:]), tail[-1]} if len(tail) > 1 else {n}
    if ends & _SECRET or n in _ALONE:
        return quoted_value or separator == "=" or quoted_name or bool(ends & _HEADER)
    if separator == "=" and not quoted_value:
        return n in _PARAMETER or bool(ends & _PARAMETER - {"key", "sig"})
    return False


def _structure(text: str) -> str:
    """Values of names that say they are secrets (`"password": "…"`, `api_key=…`, `Authorization: …`) redacted;
    the name, the separator, the quote and an auth scheme (`Bearer `) stay."""
    spans: list[tuple[int, int]] = []
    end = 0
    for sep in _SEPARATOR.finditer(text):
        at = sep.start()
        if at < end or text.startswith("==", at) or (at and text[at - 1] in "=!<>:") or text.startswith("//", at + 1):
            continue  # inside a value already redacted; a comparison; a URL's scheme
        name = _NAME_BEFORE.search(text, max(0, at - 72), at)
        if name is None:
            continue
        quote = _OPEN_QUOTE.match(text, at + 1)
        if quote:
            start = quote.end()
        elif sep.group() == "=":
            start = at + 1  # `name = value` unquoted is prose or code (`key = model_id`), `name=value` is not
        else:
            start = _BARE_START.match(text, at + 1).end()  # type: ignore[union-attr]
        if not _is_secret(name.group(1), sep.group(), name.group(2) is not None, quote is not None):
            continue
        scheme = _SCHEME.match(text, start)
        if scheme:
            start = scheme.end()
        value = (_QUOTED_VALUE if quote else _BARE_VALUE).match(text, start)
        if value is None:
            continue
        found = value.group()
        if found.lower() in _PLACEHOLDERS or found.strip("*.…") == "":
            continue
        if not quote and sep.group() == ":" and name.group(2) is None and (
            len(found) < _HEADER_MIN or not any(c.isdigit() for c in found)
        ):
            continue
        spans.append((start, value.end()))
        end = value.end()
    if not spans:
        return text
    parts: list[str] = []
    last = 0
    for a, b in spans:
        parts += (text[last:a], REDACTED)
        last = b
    parts.append(text[last:])
    return "".join(parts)


@dataclass(frozen=True, slots=True)
class _Rule:
    """One secret shape: its pattern (group 1 kept in front of the redaction when `keep`), and the lower-case
    substrings at least one of which a text must hold for the pattern to be worth running."""

    name: str
    triggers: tuple[str, ...]
    pattern: re.Pattern[str]
    keep: bool = False

    def apply(self, text: str) -> str:
        return self.pattern.sub(self._replace if self.keep else REDACTED, text)

    @staticmethod
    def _replace(m: re.Match[str]) -> str:
        return m.group(1) + REDACTED


def _rule(name: str, triggers: str, pattern: str, keep: bool = False) -> _Rule:
    return _Rule(name, tuple(triggers.split()), re.compile(pattern), keep)


# In order: a PEM block first (its body would otherwise meet the base64 rules), then the shapes; `_structure` last.
_RULES: tuple[_Rule, ...] = (
    _rule("pem private key", "private", r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----(?s:.*?-----END"
          r"[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----|[^\"]*)"),
    _rule("aws access key id", "akia asia a3t abia acca", r"\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b"),
    _rule("openai/anthropic key", "sk-", r"\bsk-[A-Za-z0-9][A-Za-z0-9_\-]{10,}"),
    _rule("stripe key", "k_live_ k_test_", r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{10,}"),
    _rule("google api key", "aiza", r"\bAIza[0-9A-Za-z_\-]{30,}"),
    _rule("google oauth token", "ya29. gocspx-", r"\b(?:ya29\.[0-9A-Za-z_\-]{20,}|GOCSPX-[0-9A-Za-z_\-]{20,})"),
    _rule("jwt", "eyj", r"\beyJ[A-Za-z0-9_\-]{8,}(?:\.[A-Za-z0-9_\-]*){0,2}"),
    _rule("github token", "ghp_ gho_ ghu_ ghs_ ghr_ github_pat_",
          r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})"),
    _rule("gitlab token", "glpat-", r"\bglpat-[A-Za-z0-9_\-]{20,}"),
    _rule("slack token", "xox xapp-", r"\b(?:xox[abposre]-[A-Za-z0-9\-]{10,}|xapp-[0-9]-[A-Za-z0-9\-]{10,})"),
    _rule("slack webhook", "hooks.slack.com", r"(hooks\.slack\.com/(?:services|workflows|triggers)/)[A-Za-z0-9/_\-]+",
          keep=True),
    _rule("llm provider key", "hf_ gsk_ xai- pplx- r8_ nvapi-",
          r"\b(?:hf_[A-Za-z0-9]{30,}|gsk_[A-Za-z0-9]{40,}|xai-[A-Za-z0-9]{40,}|pplx-[A-Za-z0-9]{40,}|"
          r"r8_[A-Za-z0-9]{30,}|nvapi-[A-Za-z0-9_\-]{40,})"),
    _rule("sendgrid, npm or databricks token", "sg. npm_ dapi",
          r"\b(?:SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}|npm_[A-Za-z0-9]{36}|dapi[a-f0-9]{32})"),
    _rule("azure ad client secret", "q~",
          r"(?<![A-Za-z0-9_~.-])[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.\-]{31,34}(?![A-Za-z0-9_~.-])"),
    _rule("azure cognitive services key", "jqqj9", r"\b[A-Za-z0-9]{40,60}JQQJ9[0-9A-Z][A-Za-z0-9]{20,40}\b"),
    _rule("bearer token", "bearer", r"(\b(?i:bearer)\s+)[A-Za-z0-9._~+/=\-]{8,}", keep=True),
    _rule("url credentials", "://", r"(://[^/\s:@\"']*:)[^/\s@\"']+(?=@)", keep=True),
)
_AWS_ID_TRIGGERS = _RULES[1].triggers
_AWS_SECRET = re.compile(r"(?<![A-Za-z0-9/+=])(?=[A-Za-z0-9/+]{0,39}[a-z])(?=[A-Za-z0-9/+]{0,39}[A-Z0-9/+])"
                         r"[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
"""An AWS secret access key: 40 characters of base64, no prefix of its own. Only looked for in a text that
holds an AWS key id (the two are issued, and leak, together): alone, the shape would match any hash."""

_CLEAN: dict[str, None] = {}
"""Recent texts known to hold no secret (at most `_CLEAN_MAX`, each at most `_CLEAN_CHARS` long): error texts
repeat (a provider's few messages per status). Only clean texts are kept, so no secret stays in memory
because of it."""
_CLEAN_MAX = 1024
_CLEAN_CHARS = 512


def redact(text: str) -> str:
    """`text` with every secret substring replaced; the very same string when there is none.

    Each rule runs only on a text holding one of its triggers (a substring search, far cheaper than the
    pattern): most error texts hold none, and a 1 MB record is not scanned by every pattern."""
    if text in _CLEAN:
        return text
    lower = text.lower()
    out = text
    for rule in _RULES:
        if any(t in lower for t in rule.triggers):
            out = rule.apply(out)
    if "=" in out or ":" in out:
        out = _structure(out)
    if out is text or out == text:
        if len(text) <= _CLEAN_CHARS:
            if len(_CLEAN) >= _CLEAN_MAX:
                _CLEAN.clear()
            _CLEAN[text] = None
        return text
    if any(t in lower for t in _AWS_ID_TRIGGERS):
        out = _AWS_SECRET.sub(REDACTED, out)
    return out


def redact_bytes(raw: bytes) -> bytes:
    """`redact` on raw bytes (dead-letter values): invalid UTF-8 is kept byte for byte around the matches."""
    text = raw.decode("utf-8", "surrogateescape")
    out = redact(text)
    return raw if out == text else out.encode("utf-8", "surrogateescape")


def rule_names() -> list[str]:
    return [rule.name for rule in _RULES] + ["name and value"]


_ESCAPES: dict[int, str] = {
    c: {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(chr(c), f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}")
    for c in (*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
}
"""C0 and C1 controls, DEL, the Unicode line and paragraph separators, and the bidirectional overrides (which
reorder what a terminal shows): each as its escape."""
_CONTROL = re.compile("[" + "".join(re.escape(chr(c)) for c in _ESCAPES) + "]")


def printable(text: str) -> str:
    """`text` with every control character escaped (`\\n`, `\\x1b`, `\\u2028`): one line, as it was written."""
    return text.translate(_ESCAPES) if _CONTROL.search(text) else text


def shown(text: str) -> str:
    """What a person may see of a record's text: redacted, then `printable`."""
    return printable(redact(text))
