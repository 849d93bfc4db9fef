"""Faust tables used as changelogged dicts of bytes, written outside Faust's per-event path.

`Table.__setitem__` sends each write through Faust's per-message changelog machinery, which cost more than the
whole decision, and only inside a stream's current event. The path stores, the cooldown history and the ejection
state instead read and write the table's in-memory store (`Table.data`) and send the changelog record themselves
with the partition named (the source record's), which is what lets them write from the lanes' batches. A new
owner recovers the table from that changelog exactly as from Faust's own writes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from typing import Any


def sized(value: bytes) -> bytes:
    """A copy of `value` in an allocation of its own size: orjson (3.x) returns each result in a buffer of about
    4 KB however short it is, and a table keeps what it is given for as long as the key lives (645 MB of path
    states in one profile; 4 KB of cooldown history per deployment ever cooled)."""
    return bytes(memoryview(value))


class RawTable:
    """A Faust table of bytes: `data` (its in-memory store), `changelog` (its changelog topic's name), `write`."""

    __slots__ = ("table",)

    def __init__(self, table: Any) -> None:
        self.table = table

    @property
    def name(self) -> str:
        return str(self.table.name)

    @property
    def data(self) -> MutableMapping[bytes, bytes]:
        data: MutableMapping[bytes, bytes] = self.table.data
        return data

    @property
    def changelog(self) -> str:
        return str(self.table.changelog_topic.get_topic_name())

    def on_recover(self, callback: Callable[[], Awaitable[None]]) -> None:
        """Called after each recovery of the table (a rebalance): cached objects built from it are stale."""
        self.table.on_recover(callback)

    def values(self) -> Iterator[bytes]:
        return iter(list(self.data.values()))

    async def write(self, producer: Any, key: bytes, value: bytes | None, partition: int) -> Any:
        """Store `value` (None deletes) and send it to the changelog on `partition`; the send's future (it
        resolves once the write is durable)."""
        if value is None:
            self.data.pop(key, None)
        else:
            self.data[key] = value = sized(value)
        return await producer.send(self.changelog, key, value, partition, None, None)
