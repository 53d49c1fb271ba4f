"""Cassandra commit log segments, read in pure Python: descriptor, sync sections, entries.

A segment (``CommitLog-<version>-<id>.log``) is a descriptor header followed by *sections*,
one per sync: an 8-byte sync marker (the position of the next marker and a CRC) and the
entries written since the previous sync. An entry is ``size | CRC(size) | mutation |
CRC(size + mutation)``. With commit log compression each section's body is compressed
(``uncompressed length`` + the compressor's block); positions are then *logical* (as if
uncompressed), as in Cassandra's own ``CommitLogPosition`` and the ``_cdc.idx`` file.

The reader never trusts bytes past the durable offset that Cassandra writes into
``<segment>_cdc.idx`` on each sync (and it reports ``COMPLETED`` once the segment is closed),
and every problem (truncation, a CRC mismatch, an unknown version) is a
:class:`CommitLogError` naming the file and the position, so the offset never moves past it.
"""

from __future__ import annotations

import json
import re
import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from connectors.cassandra.mutation import (
    MutationError,
    PartitionUpdate,
    RawTables,
    SchemaLookup,
    decode_mutation,
)
from connectors.cassandra.tabledef import TableDef
from connectors.cassandra.vint import read_unsigned_vint

#: commit log descriptor version → messaging version of the mutations (4.0, 5.0)
MESSAGING_VERSIONS = {7: 12, 8: 13}
SYNC_MARKER_SIZE = 8
_NAME = re.compile(r"^CommitLog-(\d+)-(\d+)\.log$")
_INT = struct.Struct(">i")
_UINT = struct.Struct(">I")
_INT_UINT = struct.Struct(">iI")
#: entry heads (4-byte size, CRC32 of the size) found right, by their 8 bytes: (size, CRC)
_HEADS: dict[bytes, tuple[int, int]] = {}


class CommitLogError(Exception):
    """A segment cannot be read at ``pos`` (a logical position); ``reason`` says why."""

    def __init__(self, file: str, pos: int, reason: str) -> None:
        super().__init__(f"commit log {file} at position {pos}: {reason}")
        self.file = file
        self.pos = pos
        self.reason = reason


class TruncatedSegment(CommitLogError):
    pass


class ChecksumMismatch(CommitLogError):
    pass


class UnsupportedSegment(CommitLogError):
    pass


@dataclass(frozen=True)
class Descriptor:
    version: int
    id: int
    parameters: dict[str, Any]
    #: position of the first sync marker
    header_end: int

    @property
    def messaging_version(self) -> int:
        return MESSAGING_VERSIONS[self.version]

    @property
    def compression(self) -> str | None:
        """The compressor's class name (short form, e.g. ``LZ4Compressor``) or None."""
        cls = self.parameters.get("compressionClass")
        return str(cls).rsplit(".", 1)[-1] if cls else None


class Entry(NamedTuple):
    """One mutation. ``start`` is the logical position of its size field, ``end`` the
    position right after its CRC: the offset stored once it is delivered. (A named tuple:
    one is built per mutation.)"""

    start: int
    end: int
    data: bytes


@dataclass(frozen=True)
class CdcIndex:
    """``<segment>_cdc.idx``: the logical offset up to which the segment is durable, and
    whether Cassandra closed the segment (nothing will be appended)."""

    offset: int
    completed: bool


def segment_id(name: str) -> int | None:
    """The segment id from a file name, None for other files (the ids order segments)."""
    m = _NAME.match(name)
    return int(m.group(2)) if m else None


def list_segments(directory: Path) -> list[tuple[int, Path]]:
    out = []
    for p in directory.glob("CommitLog-*.log"):
        seg = segment_id(p.name)
        if seg is not None:
            out.append((seg, p))
    return sorted(out)


def index_path(segment: Path) -> Path:
    return segment.with_name(segment.name[: -len(".log")] + "_cdc.idx")


def read_cdc_index(segment: Path) -> CdcIndex | None:
    """The durable offset of a segment in ``cdc_raw``; None when no index exists (yet). Also
    accepts the ``-CDC.idx`` spelling of some Cassandra builds."""
    for path in (index_path(segment), segment.with_name(segment.name[: -len(".log")] + "-CDC.idx")):
        try:
            text = path.read_text()
        except FileNotFoundError:
            continue
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        if not lines:
            return None  # being rewritten right now: read it again on the next poll
        try:
            offset = int(lines[0])
        except ValueError as exc:
            raise CommitLogError(
                path.name, 0, f"the CDC index holds {lines[0]!r}, not an offset"
            ) from exc
        return CdcIndex(offset, len(lines) > 1 and lines[1] == "COMPLETED")
    return None


def read_descriptor(data: bytes, file: str) -> Descriptor:
    """``int version | long id | short paramsLen | params JSON | int CRC``."""
    if len(data) < 18:
        raise TruncatedSegment(file, 0, f"{len(data)} bytes is too short for a descriptor")
    version, id_ = struct.unpack_from(">iq", data, 0)
    if version not in MESSAGING_VERSIONS:
        raise UnsupportedSegment(
            file,
            0,
            f"commit log version {version} is not supported (supported: "
            f"{', '.join(map(str, sorted(MESSAGING_VERSIONS)))}: Cassandra 4.0 to 5.0)",
        )
    (plen,) = struct.unpack_from(">H", data, 12)
    end = 14 + plen + 4
    if len(data) < end:
        raise TruncatedSegment(file, 0, "the descriptor runs past the end of the file")
    params_bytes = data[14 : 14 + plen]
    crc = zlib.crc32(
        struct.pack(">iiii", version, id_ & 0xFFFFFFFF, (id_ >> 32) & 0xFFFFFFFF, plen)
        + params_bytes
    )
    (claimed,) = _UINT.unpack_from(data, 14 + plen)
    if crc != claimed:
        raise ChecksumMismatch(file, 0, "descriptor CRC mismatch")
    try:
        params = json.loads(params_bytes.decode("utf-8")) if plen else {}
    except ValueError as exc:
        raise CommitLogError(file, 14, f"descriptor parameters are not JSON: {exc}") from exc
    if any(k.startswith("encCipher") or k == "encKeyAlias" for k in params):
        raise UnsupportedSegment(file, 0, "encrypted commit logs are not supported")
    return Descriptor(version, id_, params, end)


def _decompressor(desc: Descriptor, file: str) -> Any:
    kind = desc.compression
    if kind is None:
        return None
    if kind == "LZ4Compressor":
        import lz4.block

        # Cassandra's LZ4Compressor: a 4-byte little-endian uncompressed length, then a block.
        return lambda b: lz4.block.decompress(b)
    if kind == "DeflateCompressor":
        return zlib.decompress
    raise UnsupportedSegment(
        file, 0, f"commit log compression {kind} is not supported (LZ4Compressor, Deflate)"
    )


def _first_id(payload: bytes) -> bytes:
    """The first table id of a mutation of more than 127 partition updates."""
    try:
        _, pos = read_unsigned_vint(payload, 0)
    except IndexError:
        return b""
    return payload[pos : pos + 16]


def _entry_head(
    body: bytes, pos: int, file: str, body_start: int, heads: dict[bytes, tuple[int, int]]
) -> tuple[int, int, int]:
    """An entry's size and size CRC at ``pos`` checked: ``(size, CRC32 of the size, end of
    the mutation)``, size 0 for the end of the entries. A right pair is remembered in
    ``heads`` by its 8 bytes (the same few sizes recur)."""
    n = len(body)
    if n - pos >= 8:
        size, size_crc = _INT_UINT.unpack_from(body, pos)
    else:
        (size,) = _INT.unpack_from(body, pos)  # zero padding, or an error below
        size_crc = -1
    if size == 0:
        return 0, 0, pos
    if size < 10:
        raise CommitLogError(file, body_start + pos, f"invalid mutation size {size}")
    end = pos + 8 + size
    if end + 4 > n:
        raise TruncatedSegment(
            file, body_start + pos, f"a {size}-byte mutation runs past its section"
        )
    known = zlib.crc32(body[pos : pos + 4])
    if known != size_crc:
        raise ChecksumMismatch(file, body_start + pos, "mutation size CRC mismatch")
    if len(heads) < 4096:
        heads[body[pos : pos + 8]] = (size, known)
    return size, known, end


@dataclass(frozen=True)
class Damage:
    """A section whose entries from ``error.pos`` up to ``skipped_to`` were passed over."""

    error: CommitLogError
    skipped_to: int


@dataclass
class Cursor:
    """Where the next unread section starts (file and logical position): a segment that is
    still being written is re-read from there on each poll, not from its beginning."""

    phys: int = 0
    logical: int = 0


#: one entry and its mutation decoded: ``(start, end, data, updates, error)``, the error
#: being what the generic decoder raises for a mutation that does not decode (then
#: ``updates`` is empty: the segment reads on, what to do with it is the caller's choice).
#: ``updates`` is also empty when ``decode_table`` declined the mutation. A plain tuple:
#: one is built per mutation (a named tuple costs 0.1 µs more), read by unpacking.
Decoded = tuple[int, int, bytes, list[PartitionUpdate], MutationError | None]


def iter_entries(
    data: bytes,
    file: str,
    *,
    limit: int | None = None,
    after: int = 0,
    cursor: Cursor | None = None,
    damaged: list[Damage] | None = None,
) -> Iterator[Entry]:
    """Every entry of a segment whose section ends at or before ``limit`` (the ``_cdc.idx``
    offset; None: up to the first zero marker), skipping entries that end at or before
    ``after`` (the stored offset). ``cursor`` (updated as whole sections are read) resumes
    at a section boundary. Raises :class:`CommitLogError` on damaged bytes; with ``damaged``
    given, a damaged entry (CRC mismatch, bad size) skips the rest of its section instead
    and is appended there (the descriptor and sync markers must still be intact)."""
    return _read(data, file, limit, after, cursor, damaged, None, {}, None)


def iter_mutations(
    data: bytes,
    file: str,
    lookup: SchemaLookup,
    tables: RawTables,
    *,
    limit: int | None = None,
    after: int = 0,
    cursor: Cursor | None = None,
    damaged: list[Damage] | None = None,
    decode_table: Callable[[TableDef], bool] | None = None,
) -> Iterator[Decoded]:
    """:func:`iter_entries` with each mutation decoded as :func:`decode_mutation` decodes it
    (same arguments, same results), in the same loop: the usual entry (one partition update
    of a table in ``tables`` whose reader is compiled) costs no call but its table's
    reader, which is the commit log reader's hot path. ``decode_table`` (given the entry's
    first table when ``tables`` knows it) may decline to decode an entry: it comes without
    updates."""
    return _read(data, file, limit, after, cursor, damaged, lookup, tables, decode_table)


def _read(
    data: bytes,
    file: str,
    limit: int | None,
    after: int,
    cursor: Cursor | None,
    damaged: list[Damage] | None,
    lookup: SchemaLookup | None,
    tables: RawTables,
    decode_table: Callable[[TableDef], bool] | None,
) -> Iterator[Any]:
    """Entries (``lookup`` None) or :class:`Decoded` mutations, see the two above."""
    desc = read_descriptor(data, file)
    decompress = _decompressor(desc, file)
    crc32 = zlib.crc32
    new_tuple = tuple.__new__  # Entry(...) without its Python-level __new__
    heads = _HEADS
    heads_get = heads.get
    unpack_uint = _UINT.unpack_from
    tables_get = tables.get
    phys = desc.header_end
    logical = desc.header_end
    if cursor is not None and cursor.phys > phys:
        phys, logical = cursor.phys, cursor.logical
    while True:
        if limit is not None and logical >= limit:
            return
        if phys + SYNC_MARKER_SIZE > len(data):
            if limit is not None:
                raise TruncatedSegment(
                    file, logical, f"the file ends before the durable offset {limit}"
                )
            return
        nxt, claimed = struct.unpack_from(">iI", data, phys)
        crc = zlib.crc32(
            struct.pack(">iii", desc.id & 0xFFFFFFFF, (desc.id >> 32) & 0xFFFFFFFF, phys)
        )
        if crc != claimed:
            if nxt == 0 and claimed == 0:
                if limit is not None:
                    raise TruncatedSegment(
                        file, logical, f"no sync marker before the durable offset {limit}"
                    )
                return  # the unwritten tail
            raise ChecksumMismatch(file, logical, "sync marker CRC mismatch")
        if nxt <= phys or nxt > len(data):
            raise TruncatedSegment(
                file, logical, f"the section ends at {nxt}, past the file's {len(data)} bytes"
            )
        if decompress is None:
            body = data[phys + SYNC_MARKER_SIZE : nxt]
            body_start = phys + SYNC_MARKER_SIZE
        else:
            (length,) = _INT.unpack_from(data, phys + SYNC_MARKER_SIZE)
            try:
                body = decompress(data[phys + SYNC_MARKER_SIZE + 4 : nxt])
            except Exception as exc:
                raise CommitLogError(
                    file, logical, f"section does not decompress ({desc.compression}): {exc}"
                ) from exc
            if len(body) != length:
                raise CommitLogError(
                    file, logical, f"section decompressed to {len(body)} bytes, not {length}"
                )
            body_start = logical + SYNC_MARKER_SIZE
        section_end = body_start + len(body)
        if limit is not None and section_end > limit:
            return  # written but not yet synced: the next index update covers it
        # the section's entries, inline (one generator per segment, not per section)
        pos = 0
        n = len(body)
        try:
            while n - pos >= 4:
                head = heads_get(body[pos : pos + 8])
                if head is not None:  # a size met before, with its CRC: both are right
                    size, known = head
                    end = pos + 8 + size
                    if end + 4 > n:
                        raise TruncatedSegment(
                            file, body_start + pos, f"a {size}-byte mutation runs past its section"
                        )
                else:
                    size, known, end = _entry_head(body, pos, file, body_start, heads)
                    if size == 0:
                        break  # end-of-segment marker / zero padding
                payload = body[pos + 8 : end]
                if crc32(payload, known) != unpack_uint(body, end)[0]:
                    raise ChecksumMismatch(file, body_start + pos, "mutation CRC mismatch")
                start = body_start + pos
                pos = end + 4
                if body_start + pos <= after:
                    continue
                if lookup is None:
                    yield new_tuple(Entry, (start, body_start + pos, payload))
                    continue
                # decode_mutation's fast path, inline: one partition update, a known table
                updates = error = None
                first = payload[0]
                table = tables_get(payload[1:17] if first < 0x80 else _first_id(payload))
                if table is not None and decode_table is not None and not decode_table(table):
                    updates = []  # declined
                elif first == 1 and table is not None:
                    fn = table.compiled.get("partition")
                    if fn is not None:
                        try:
                            got = fn(payload, 17)
                        except Exception:
                            got = None  # decode_mutation below says what is wrong
                        if got is not None:
                            updates = [got[0]]
                if updates is None:
                    try:
                        updates = decode_mutation(payload, lookup, tables)
                    except MutationError as exc:
                        updates, error = [], exc
                yield (start, body_start + pos, payload, updates, error)
        except CommitLogError as exc:
            if damaged is None:
                raise
            # the sync marker chain is intact: go on with the next section
            damaged.append(Damage(exc, section_end))
        phys = nxt
        logical = section_end
        if cursor is not None:
            cursor.phys, cursor.logical = phys, logical
