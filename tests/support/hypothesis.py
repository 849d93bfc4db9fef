"""Hypothesis profiles: `ci` (Hypothesis's own defaults: every property runs its full example count; CI and
`scripts/test` select it) and `quick` (a twentieth of the examples, for a local edit-test loop).

Select one with pytest's `--hypothesis-profile NAME` (Hypothesis's own option) or `HYPOTHESIS_PROFILE=NAME`;
without either it is `ci`. A test that wants more or fewer examples than the profile's default writes
`examples(n)`: n under `ci`, scaled down with the profile.
"""

from __future__ import annotations

import os

from hypothesis import settings

CI = "ci"
QUICK = "quick"
QUICK_SHARE = 5
"""`quick`'s examples per hundred of `ci`'s."""
ENV = "HYPOTHESIS_PROFILE"

settings.register_profile(CI, settings())
settings.register_profile(QUICK, settings(max_examples=QUICK_SHARE))


def load() -> None:
    """Load the profile `HYPOTHESIS_PROFILE` names (`ci` if unset); pytest's `--hypothesis-profile` wins, as it
    is applied after this (at configure time)."""
    name = os.environ.get(ENV) or CI
    if name not in (CI, QUICK):
        raise ValueError(f"{ENV}={name!r}: expected {CI!r} or {QUICK!r}")
    settings.load_profile(name)


def examples(n: int) -> int:
    """`n` examples under `ci`, proportionally fewer under a profile with fewer (at least one)."""
    default = settings.get_profile(CI).max_examples
    return max(1, n * settings.default.max_examples // default)
