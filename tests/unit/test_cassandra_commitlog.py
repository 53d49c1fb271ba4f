"""The pure-Python commit log reader on segments written by a real Cassandra 5.0.9 node
(tests/fixtures/cassandra, see regenerate.py there): plain, LZ4- and Deflate-compressed, and
one in 4.x format (commit log version 7, storage_compatibility_mode: CASSANDRA_4), each
holding the same golden operations among the node's own system writes."""

from __future__ import annotations

import gzip
import json
import struct
import uuid
import zlib
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from cdc.errors import RetriableError
from connectors.cassandra.commitlog import (
    ChecksumMismatch,
    CommitLogError,
    Damage,
    Entry,
    TruncatedSegment,
    UnsupportedSegment,
    iter_entries,
    iter_mutations,
    read_cdc_index,
    read_descriptor,
)
from connectors.cassandra.mutation import (
    MutationError,
    UnknownTable,
    decode_mutation,
    decode_mutation_generic,
)
from connectors.cassandra.tabledef import TableDef, table_from_json, tables_by_raw_id

FIXTURES = Path(__file__).parents[1] / "fixtures" / "cassandra"


class Fixture:
    def __init__(self, name: str) -> None:
        self.data = gzip.decompress((FIXTURES / f"{name}.log.gz").read_bytes())
        self.file = (FIXTURES / f"{name}.segment").read_text().strip()
        self.limit = int((FIXTURES / f"{name}.idx").read_text())
        docs = json.loads((FIXTURES / f"{name}.schema.json").read_text())
        self.tables: dict[uuid.UUID, TableDef] = {t.id: t for t in map(table_from_json, docs)}

    def golden(self) -> list[tuple[int, Row]]:
        out = []
        for e in iter_entries(self.data, self.file, limit=self.limit):
            for table, rows, _ in decode_mutation(e.data, self.tables.get):
                if table.keyspace == "golden":
                    out.extend((e.end, Row._make(r)) for r in rows)
        return out


class Row(NamedTuple):
    """A decoded row (a plain :data:`RowChange` tuple) with its fields named."""

    table: TableDef
    kind: str
    partition_key: list[Any]
    clustering: list[Any] | None
    cells: dict[str, Any]
    timestamp: int
    static: bool


def _cells(row: Row) -> dict[str, Any]:
    return {k: v[0] for k, v in row.cells.items()}


@pytest.mark.parametrize("name", ["plain", "lz4", "deflate", "cassandra4"])
def test_golden_segment_decodes_every_operation(name: str) -> None:
    fx = Fixture(name)
    rows = [r for _, r in fx.golden()]
    assert [(r.kind, r.partition_key, r.clustering, r.static) for r in rows] == [
        ("insert", [1], ["a"], False),
        ("update", [1], ["a"], False),
        ("update", [1], ["a"], False),
        ("update", [1], ["a"], False),
        ("row_delete", [1], ["a"], False),
        ("insert", [2], ["b"], False),
        ("update", [2], None, True),
        # DELETE ... WHERE id = 2 AND ck > 'a': its range tombstone's two bounds
        ("range_start_excl", [2], ["a"], False),
        ("range_end_incl", [2], [], False),
        ("partition_delete", [3], None, False),
        ("insert", [4], [""], False),
    ]
    # USING TIMESTAMP 1700000000000001..10 (the range delete's two bounds: ...08)
    assert [r.timestamp for r in rows] == [
        1700000000000000 + i for i in (1, 2, 3, 4, 5, 6, 7, 8, 8, 9, 10)
    ]
    assert _cells(rows[0]) == {
        "v": "hello",
        "n": 42,
        "f": 1.5,
        "b": True,
        "u": "5b6962dd-3f90-4c93-8f61-eabfa4a803e2",
        "ts": 1704164645678,  # 2024-01-02 03:04:05.678 UTC in ms
        "d": 19724,  # 2024-01-02 in days since the epoch
        "bl": b"\xca\xfe",
        "dec": "12.345",
    }
    assert all(deletion_ts is None and set_ for _, deletion_ts, set_ in rows[0].cells.values())
    assert _cells(rows[1]) == {"v": "upd"}  # only the changed column
    assert _cells(rows[2]) == {"s": ["x", "y"], "m": {"k": 7}, "l": [9], "fl": [1, 2]}
    value, deletion_ts, set_ = rows[3].cells["n"]
    assert value is None and deletion_ts is not None and set_
    assert rows[4].cells == {}
    value, deletion_ts, _ = rows[5].cells["v"]
    assert value == "ttl" and deletion_ts is not None  # expires: when, in µs
    assert _cells(rows[6]) == {"st": "static"}
    assert rows[7].cells == rows[8].cells == {}
    assert _cells(rows[10]) == {"v": "last"}


@pytest.mark.parametrize("name", ["plain", "lz4", "deflate", "cassandra4"])
def test_every_mutation_of_the_real_segment_decodes(name: str) -> None:
    """The node's own system writes (range tombstones, composite keys, many types) too."""
    fx = Fixture(name)
    entries = list(iter_entries(fx.data, fx.file, limit=fx.limit))
    assert len(entries) > 50
    assert entries[-1].end == fx.limit
    ranges = 0
    for e in entries:
        ranges += sum(n for _, _, n in decode_mutation(e.data, fx.tables.get))
    assert ranges >= 1  # the golden range delete at least


def test_positions_resume_after_a_stored_offset() -> None:
    fx = Fixture("plain")
    golden = fx.golden()
    third_end = golden[2][0]
    after = [e.end for e in iter_entries(fx.data, fx.file, limit=fx.limit, after=third_end)]
    assert after and min(after) > third_end
    assert [end for end, _ in golden if end > third_end] == [
        end for end, _ in golden if end in set(after)
    ]


def test_compressed_positions_are_logical() -> None:
    fx = Fixture("lz4")
    assert read_descriptor(fx.data, fx.file).compression == "LZ4Compressor"
    assert fx.limit > len(fx.data)  # the index counts uncompressed bytes


def test_never_reads_past_the_durable_offset() -> None:
    fx = Fixture("plain")
    golden = fx.golden()
    # an index that covered only part of the file: the sections after it are not read yet
    entries = list(iter_entries(fx.data, fx.file, limit=golden[0][0]))
    assert entries and entries[-1].end <= golden[0][0]


def test_truncated_segment_names_file_and_position() -> None:
    fx = Fixture("plain")
    cut = fx.data[: fx.limit - 100]
    with pytest.raises(TruncatedSegment) as err:
        list(iter_entries(cut, fx.file, limit=fx.limit))
    assert fx.file in str(err.value) and err.value.pos < fx.limit


def test_mutation_crc_mismatch_names_file_and_position() -> None:
    fx = Fixture("plain")
    end, _ = fx.golden()[0]
    entry = next(e for e in iter_entries(fx.data, fx.file, limit=fx.limit) if e.end == end)
    bad = bytearray(fx.data)
    bad[entry.start + 20] ^= 0xFF
    with pytest.raises(ChecksumMismatch) as err:
        list(iter_entries(bytes(bad), fx.file, limit=fx.limit))
    assert err.value.pos == entry.start
    assert f"commit log {fx.file} at position {entry.start}: mutation CRC mismatch" == str(
        err.value
    )


def test_unknown_commit_log_version() -> None:
    fx = Fixture("plain")
    bad = struct.pack(">i", 99) + fx.data[4:]
    with pytest.raises(UnsupportedSegment, match=r"version 99 is not supported"):
        list(iter_entries(bad, fx.file, limit=fx.limit))


def test_descriptor_crc_mismatch() -> None:
    fx = Fixture("plain")
    bad = bytearray(fx.data)
    bad[6] ^= 0x01  # inside the segment id
    with pytest.raises(ChecksumMismatch, match="descriptor CRC mismatch"):
        read_descriptor(bytes(bad), fx.file)


def test_sync_marker_crc_mismatch() -> None:
    fx = Fixture("plain")
    desc = read_descriptor(fx.data, fx.file)
    bad = bytearray(fx.data)
    bad[desc.header_end + 5] ^= 0x01
    with pytest.raises(ChecksumMismatch) as err:
        list(iter_entries(bytes(bad), fx.file, limit=fx.limit))
    assert "sync marker" in str(err.value) and err.value.pos == desc.header_end


def test_mutation_for_an_unknown_table() -> None:
    fx = Fixture("plain")
    end, row = fx.golden()[0]
    entry = next(e for e in iter_entries(fx.data, fx.file, limit=fx.limit) if e.end == end)
    with pytest.raises(UnknownTable) as err:
        decode_mutation(entry.data, lambda tid: None)
    assert err.value.table_id == row.table.id
    assert str(row.table.id) in str(err.value)


def test_cdc_index_file(tmp_path: Path) -> None:
    seg = tmp_path / "CommitLog-8-17.log"
    seg.write_bytes(b"")
    assert read_cdc_index(seg) is None
    (tmp_path / "CommitLog-8-17_cdc.idx").write_text("4096")
    idx = read_cdc_index(seg)
    assert idx is not None and (idx.offset, idx.completed) == (4096, False)
    (tmp_path / "CommitLog-8-17_cdc.idx").write_text("8192\nCOMPLETED")
    idx = read_cdc_index(seg)
    assert idx is not None and (idx.offset, idx.completed) == (8192, True)
    (tmp_path / "CommitLog-8-17_cdc.idx").write_text("junk")
    with pytest.raises(CommitLogError, match=r"CommitLog-8-17_cdc\.idx"):
        read_cdc_index(seg)


def test_damaged_entry_skips_only_its_section_when_asked() -> None:
    fx = Fixture("plain")
    entries = list(iter_entries(fx.data, fx.file, limit=fx.limit))
    bad = bytearray(fx.data)
    bad[entries[0].start + 20] ^= 0xFF
    damaged: list[Damage] = []
    kept = list(iter_entries(bytes(bad), fx.file, limit=fx.limit, damaged=damaged))
    assert len(damaged) == 1 and damaged[0].error.pos == entries[0].start
    skipped_to = damaged[0].skipped_to
    assert [e.end for e in kept] == [e.end for e in entries if e.start >= skipped_to]
    assert kept and kept[-1].end == fx.limit


def _decoded(data: bytes, lookup: Any, decode: Any) -> Any:
    """Everything a decode returns (or the error it raises, with its byte offset)."""
    try:
        updates = decode(data, lookup)
    except MutationError as exc:
        return (type(exc).__name__, str(exc), exc.offset)
    # every field of every row but its table (a TableDef: compared by name)
    return [(table.qualified, ranges, [r[1:] for r in rows]) for table, rows, ranges in updates]


@pytest.mark.parametrize("name", ["plain", "lz4", "deflate", "cassandra4"])
def test_compiled_row_readers_decode_exactly_as_the_generic_decoder(name: str) -> None:
    """The fast path (per-table compiled row readers) against the reference decoder on every
    mutation of the real segment, and on damaged copies: the same rows, or the same error
    at the same byte."""
    fx = Fixture(name)
    lookup = fx.tables.get
    damaged = 0
    for e in iter_entries(fx.data, fx.file, limit=fx.limit):
        assert repr(_decoded(e.data, lookup, decode_mutation)) == repr(
            _decoded(e.data, lookup, decode_mutation_generic)
        )
        for cut in (5, 17, 25, len(e.data) // 2, len(e.data) - 3):
            for bad in (
                e.data[:cut],
                e.data[:cut] + bytes([e.data[cut] ^ 0x5A]) + e.data[cut + 1 :],
            ):
                got = _decoded(bad, lookup, decode_mutation)
                assert repr(got) == repr(_decoded(bad, lookup, decode_mutation_generic))
                damaged += isinstance(got, tuple)
    assert damaged > 100  # the damaged copies did fail
    golden = next(t for t in fx.tables.values() if t.qualified == "golden.t")
    assert "partition" in golden.compiled  # the fast path did read it


def test_a_failing_schema_lookup_is_asked_once() -> None:
    """A lookup that fails (the node does not answer) is not retried by the generic decoder."""
    fx = Fixture("plain")
    end, _ = fx.golden()[0]
    entry = next(e for e in iter_entries(fx.data, fx.file, limit=fx.limit) if e.end == end)
    calls = []

    def lookup(tid: uuid.UUID) -> TableDef | None:
        calls.append(tid)
        raise RetriableError("the Cassandra node does not answer")

    with pytest.raises(RetriableError):
        decode_mutation(entry.data, lookup)
    assert len(calls) == 1


def _recrc(data: bytes, e: Entry, payload: bytes) -> bytes:
    """``data`` with entry ``e`` (of an uncompressed segment) holding ``payload`` (same size)
    and a CRC that matches it: bytes that frame right but may not decode."""
    size = struct.pack(">i", len(payload))
    crc = zlib.crc32(payload, zlib.crc32(size))
    return data[: e.start + 8] + payload + struct.pack(">I", crc) + data[e.end :]


def _one_loop(fx: Fixture, data: bytes, **kw: Any) -> list[tuple[int, int, bytes, Any]]:
    """iter_mutations' output, in _decoded's form (rows, or the error with its offset)."""
    out = []
    tables = tables_by_raw_id(fx.tables.values())
    for start, end, payload, updates, error in iter_mutations(
        data, fx.file, fx.tables.get, tables, limit=fx.limit, **kw
    ):
        if error is not None:
            assert updates == []
            got: Any = (type(error).__name__, str(error), error.offset)
        else:
            got = _decoded(payload, None, lambda *_, u=updates: u)
        out.append((start, end, payload, got))
    return out


@pytest.mark.parametrize("name", ["plain", "lz4", "deflate", "cassandra4"])
def test_one_loop_reader_yields_what_entries_and_the_generic_decoder_give(name: str) -> None:
    """iter_mutations (framing, CRCs and the compiled readers in one generator) against
    iter_entries + decode_mutation_generic: the same entries, rows and errors, on the real
    segment, with a table filter, and on copies whose mutations are damaged under a valid
    CRC (uncompressed segments)."""
    fx = Fixture(name)
    lookup = fx.tables.get
    entries = list(iter_entries(fx.data, fx.file, limit=fx.limit))
    want = [
        (e.start, e.end, e.data, _decoded(e.data, lookup, decode_mutation_generic)) for e in entries
    ]
    assert repr(_one_loop(fx, fx.data)) == repr(want)

    def golden(t: TableDef) -> bool:
        return t.keyspace == "golden"

    filtered = _one_loop(fx, fx.data, decode_table=golden)
    assert [w[:3] for w in want] == [f[:3] for f in filtered]
    kept = [f for f, e in zip(filtered, entries, strict=True) if f[3] != []]
    assert kept == [w for w, e in zip(want, entries, strict=True) if golden(lookup(_table_id(e)))]
    assert len(kept) >= 9  # the golden operations (each its own mutation)
    if read_descriptor(fx.data, fx.file).compression is not None:
        return
    errors = 0
    for e in entries[::2]:
        for cut in (0, 1, 17, 25, len(e.data) // 2, len(e.data) - 3):
            payload = e.data[:cut] + bytes([e.data[cut] ^ 0x5A]) + e.data[cut + 1 :]
            bad = _recrc(fx.data, e, payload)
            got = _one_loop(fx, bad, after=e.start)[0]  # from the damaged entry on
            assert repr(got) == repr(
                (e.start, e.end, payload, _decoded(payload, lookup, decode_mutation_generic))
            )
            errors += isinstance(got[3], tuple)
    assert errors > 50  # the damaged copies did fail, with the generic decoder's error


def _table_id(e: Entry) -> uuid.UUID:
    return uuid.UUID(bytes=e.data[1:17])
