"""B3 (docs/input-bounds.md): a Retry-After is honoured up to 7 days by default, LiteLLM's values exact below."""

from __future__ import annotations

from email.utils import formatdate

import pytest

from coolant.processors.duration import RETRY_AFTER_MAX, retry_after_seconds

T0 = 1_800_000_000.0


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("17", 17.0),
        ("86400", 86_400.0),
        ("100000", 100_000.0),  # in LiteLLM's recorded episodes, which it honours: parity
        (str(7 * 86_400), RETRY_AFTER_MAX),
        (str(7 * 86_400 + 1), RETRY_AFTER_MAX),
        ("31536000", RETRY_AFTER_MAX),
        ("9" * 400, RETRY_AFTER_MAX),  # issue 26: this gave a year
        (formatdate(T0 + 100_000, usegmt=True), 100_000.0),
        (formatdate(T0 + 30 * 86_400, usegmt=True), RETRY_AFTER_MAX),
    ],
)
def test_retry_after_is_bounded_above_what_providers_send(header: str, seconds: float) -> None:
    assert retry_after_seconds(header, T0) == seconds


def test_the_bound_sits_between_the_longest_provider_answer_and_a_year() -> None:
    assert 100_000 < RETRY_AFTER_MAX < 365 * 86_400
