"""Reading JSONL record files (plain, .gz, or stdin), line by line, with positions for error reports."""

from __future__ import annotations

import gzip
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import BinaryIO

from coolant.errors import CoolantError
from coolant.schemas import InvalidRecord, Record, decode, decode_block
from coolant.schemas.codec import newlines

Line = tuple[str, int, bytes]
"""(source path, line number, raw bytes) of one non-blank line."""
Block = tuple[str, int, bytes]
"""(source path, number of its first line, whole lines of raw bytes)."""
BLOCK_BYTES = 1 << 20


class SourceError(CoolantError):
    """A file that cannot be opened or read (a bad path, a corrupt gzip stream), or an output that cannot be
    written."""


def _open(path: str) -> tuple[BinaryIO, BinaryIO]:
    """(stream of decompressed bytes, underlying file) — the file's position drives progress."""
    if path == "-":
        return sys.stdin.buffer, sys.stdin.buffer
    try:
        raw = open(path, "rb")  # noqa: SIM115 - closed by read_lines
    except OSError as exc:
        raise SourceError(f"{path}: cannot open: {exc.strerror or exc}") from None
    if path.endswith(".gz"):
        return gzip.GzipFile(fileobj=raw, mode="rb"), raw  # type: ignore[return-value]
    return raw, raw


def open_output(path: os.PathLike[str] | str) -> BinaryIO:
    """An output file for writing, opened before any work so a bad path fails first, with one line."""
    try:
        return open(path, "wb")
    except OSError as exc:
        raise SourceError(f"{os.fspath(path)}: cannot write: {exc.strerror or exc}") from None


def check_readable(paths: list[str]) -> None:
    """Fail fast, before any output, on a path that cannot be opened."""
    for path in paths:
        if path != "-":
            stream, raw = _open(path)
            stream.close()
            raw.close()


def total_size(paths: list[str]) -> int:
    """Bytes on disk of the named files (compressed size for .gz), for progress display."""
    return sum(os.path.getsize(p) for p in paths if p != "-")


@contextmanager
def _reading(path: str) -> Iterator[tuple[BinaryIO, BinaryIO | None]]:
    """(decompressed stream, underlying file or None for stdin); read errors become SourceError."""
    stream, raw = _open(path)
    seekable = raw is not sys.stdin.buffer
    try:
        yield stream, (raw if seekable else None)
    except (OSError, EOFError) as exc:  # includes a corrupt gzip stream
        raise SourceError(f"{path}: read failed: {exc}") from None
    finally:
        if seekable:
            stream.close()
            raw.close()


def read_lines(paths: list[str], on_bytes: Callable[[int], None] | None = None) -> Iterator[Line]:
    """Yield every non-blank line of every file, in order. `on_bytes` receives on-disk bytes consumed."""
    for path in paths:
        with _reading(path) as (stream, raw):
            last = 0
            for lineno, data in enumerate(stream, 1):
                if on_bytes is not None and raw is not None and not lineno & 0xFFF:
                    pos = raw.tell()
                    on_bytes(pos - last)
                    last = pos
                if not data.isspace():
                    yield path, lineno, data
            if on_bytes is not None and raw is not None:
                on_bytes(raw.tell() - last)


def read_blocks(paths: list[str], on_bytes: Callable[[int], None] | None = None) -> Iterator[Block]:
    """Yield each file as blocks of whole lines (about 1 MB each), in order, for batch decoding."""
    for path in paths:
        with _reading(path) as (stream, raw):
            lineno, last = 1, 0
            while block := stream.read(BLOCK_BYTES):
                if not block.endswith(b"\n"):
                    block += stream.readline()
                yield path, lineno, block
                lineno += newlines(block)  # counted once: decode_block (B9) wants it too
                if on_bytes is not None and raw is not None:
                    pos = raw.tell()
                    on_bytes(pos - last)
                    last = pos


def decode_records(block: Block, on_invalid: Callable[[str], None]) -> list[Record]:
    """The valid records of a block, in order, decoded in one call. A block with a bad line is redone line by
    line, so each invalid record goes to `on_invalid` as "file:line: problem" (and B5 gets its second chance)."""
    source, first, data = block
    try:
        return decode_block(data)
    except InvalidRecord:
        pass
    records = []
    for lineno, line in enumerate(data.split(b"\n"), first):
        if not line.strip():
            continue
        try:
            records.append(decode(line))
        except InvalidRecord as exc:
            on_invalid(f"{source}:{lineno}: {exc}")
    return records
