"""SeenHashes against a plain multiset of the same ints: random adds, lookups and bucket drops, on both of its
layouts (direct sorted insertion, and the fresh dict merged in past SORTED_INSERT_MAX), with shared hashes."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from coolant.processors import seen
from coolant.processors.seen import SeenHashes


def check(rng: random.Random, steps: int, spread: int) -> None:
    got = SeenHashes()
    want: Counter[tuple[int, int]] = Counter()  # (hash, bucket) -> copies
    for _ in range(steps):
        r = rng.random()
        if r < 0.7:
            h, b = rng.randrange(-spread, spread), rng.randrange(0, 12)
            got.add(h, b)
            want[h, b] += 1
        elif r < 0.72:
            gone = set(rng.sample(range(12), rng.randrange(0, 4)))
            got.drop(gone)
            for key in [k for k in want if k[1] in gone]:
                del want[key]
        h = rng.randrange(-spread, spread)
        assert (h in got) == any(k[0] == h for k in want), h
        assert len(got) == sum(want.values())


@pytest.mark.parametrize("seed", range(6))
def test_membership_is_a_sets_on_random_streams(seed: int) -> None:
    check(random.Random(seed), 3000, spread=2000)  # small range: shared hashes, repeated adds


@pytest.mark.parametrize("seed", range(3))
def test_membership_past_direct_insertion(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(seen, "SORTED_INSERT_MAX", 64)  # the fresh dict and its merges, on a short stream
    check(random.Random(seed), 4000, spread=1500)


def test_extreme_hashes_and_whole_bucket_expiry() -> None:
    s = SeenHashes()
    lo, hi = -(2**63), 2**63 - 1
    s.add(lo, 1)
    s.add(hi, 2)
    s.add(hi, 3)  # the same hash in two buckets: dropping one keeps the other
    assert lo in s and hi in s and 0 not in s
    s.drop([2])
    assert hi in s and len(s) == 2
    s.drop([1, 3])
    assert lo not in s and hi not in s and len(s) == 0


def test_discard_forgets_one_copy() -> None:
    s = SeenHashes()
    s.add(5, 1)
    s.add(5, 2)
    s.add(7, 1)
    s.discard(5)
    assert 5 in s and len(s) == 2
    s.discard(5)
    s.discard(5)  # not held: nothing to do
    assert 5 not in s and 7 in s and len(s) == 1
