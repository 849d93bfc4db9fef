"""A compact set of 64-bit id hashes tagged by event-time bucket: the live worker's in-memory dedup index (L2).

A Python `set[int]` costs about 73 B per id (a 40 B int object and its share of a hash table kept at most 60%
full), and a set of its own per bucket would add hundreds of bytes per (deployment, bucket); a worker at 2,000
records/s over 10,000 deployments remembers ~500k ids in ~110k such buckets (L3's window). Here an id costs 16 B:
its hash in a sorted `array('q')` (membership by binary search) and its bucket in a parallel one, so that
forgetting a bucket (L3, once `hw - late_after` passes its end) drops exactly its ids without reading them back
from anywhere. Membership is exact for the hashes: the structure answers what a `set` of the same ints would
(tested against one on random streams).

A bit filter (2-4 B an id) in front of the arrays answers most lookups, those of new ids, without the binary
search. Insertion into the sorted arrays is a `memmove`, cheap while they are short; past `SORTED_INSERT_MAX` hashes new
ones wait in a small dict that is merged into the arrays once it holds a sixteenth of them, so a deployment of any
rate costs O(1) amortized per id (the merge sorts two sorted runs: linear).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterable

MIN_FILTER_BYTES = 16
"""The smallest filter: 128 bits, for up to 16 hashes."""
SORTED_INSERT_MAX = 4096
"""Up to this many hashes, a new one is inserted into the sorted arrays directly; above it, it waits in `_fresh`."""


class SeenHashes:
    """Hashes, each tagged with a bucket, with `in` over all of them; forgets whole buckets."""

    __slots__ = ("_bits", "_buckets", "_fresh", "_hashes", "_load", "_mask")

    def __init__(self) -> None:
        self._bits = bytearray(MIN_FILTER_BYTES)
        """A bit per `hash & _mask` of every hash held: most lookups are of new ids, and a clear bit answers them
        without the binary search (a set bit still asks the arrays, so the answer stays exact)."""
        self._mask = MIN_FILTER_BYTES * 8 - 1
        self._load = 0
        """Bits set in the filter at most: hashes held at its last rebuild plus those added since. A dropped hash
        leaves its bit set (a wasted binary search, never a wrong answer) until the next rebuild, which comes
        once the load reaches one bit per byte."""
        self._hashes = array("q")
        """Every hash not in `_fresh`, ascending (a hash two ids share is there twice)."""
        self._buckets = array("q")
        """The bucket of each of `_hashes`, at the same index."""
        self._fresh: dict[int, int] | None = None
        """Hash -> bucket, added and not merged into the arrays yet (only once they are past SORTED_INSERT_MAX)."""

    def __contains__(self, h: object) -> bool:
        k = h & self._mask  # type: ignore[operator]
        if not self._bits[k >> 3] >> (k & 7) & 1:
            return False
        fresh = self._fresh
        if fresh is not None and h in fresh:
            return True
        a = self._hashes
        i = bisect_left(a, h)  # type: ignore[call-overload]
        return i < len(a) and bool(a[i] == h)

    def __len__(self) -> int:
        return len(self._hashes) + (0 if self._fresh is None else len(self._fresh))

    def add(self, h: int, bucket: int) -> None:
        """Remember `h` under `bucket` (a hash held already is held twice: each copy goes with its own bucket)."""
        a = self._hashes
        fresh = self._fresh
        bits = self._bits
        load = self._load + 1
        if load > len(bits):  # the filter would be more than 1/8 set: rebuilt from what is held
            self._refilter()
            a, fresh, bits, load = self._hashes, None, self._bits, self._load + 1
        self._load = load
        k = h & self._mask
        bits[k >> 3] |= 1 << (k & 7)
        if fresh is None:
            if len(a) < SORTED_INSERT_MAX:
                i = bisect_left(a, h)
                a.insert(i, h)
                self._buckets.insert(i, bucket)
                return
            fresh = self._fresh = {}
        elif h in fresh:  # a second id with this hash: the dict cannot hold both, the arrays can
            self._merge()
            self.add(h, bucket)
            return
        fresh[h] = bucket
        if len(fresh) * 16 > len(a):
            self._merge()

    def update(self, hashes: Iterable[int], bucket: int) -> None:
        for h in hashes:
            self.add(h, bucket)

    def _merge(self) -> None:
        fresh = self._fresh
        self._fresh = None
        if fresh:
            pairs = sorted([*zip(self._hashes, self._buckets, strict=True), *fresh.items()])
            self._hashes = array("q", [h for h, _ in pairs])
            self._buckets = array("q", [b for _, b in pairs])

    def _refilter(self) -> None:
        """The filter rebuilt from the arrays, with two bytes or more per hash held: as many adds again before
        the next rebuild (O(1) amortized)."""
        self._merge()
        hashes = self._hashes
        size = MIN_FILTER_BYTES
        while size < 2 * len(hashes):
            size *= 2
        bits = self._bits = bytearray(size)
        mask = self._mask = size * 8 - 1
        for h in hashes:
            k = h & mask
            bits[k >> 3] |= 1 << (k & 7)
        self._load = len(hashes)

    def drop(self, buckets: Iterable[int]) -> None:
        """Forget every hash added under these buckets (one pass over the rest, however many buckets)."""
        gone = set(buckets)
        if not gone:
            return
        self._merge()
        tags = self._buckets
        keep = [i for i, b in enumerate(tags) if b not in gone]
        if len(keep) < len(tags):
            hashes = self._hashes
            self._hashes = array("q", [hashes[i] for i in keep])
            self._buckets = array("q", [tags[i] for i in keep])

    def discard(self, h: int) -> None:
        """Forget one copy of `h`, if held (not on the hot path)."""
        self._merge()
        a = self._hashes
        i = bisect_left(a, h)
        if i < len(a) and a[i] == h:
            del a[i]
            del self._buckets[i]
