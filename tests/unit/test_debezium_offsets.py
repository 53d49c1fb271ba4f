"""Debezium Server's offset file and the translation of offsets between Debezium and tidemark.
The file fixture was written by the real Debezium Server 3.6 (PostgreSQL connector, Kafka sink);
the integration test test_switch_from_debezium.py moves a connector both ways on real servers."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc.errors import OffsetError
from cdc.offsets.debezium_server_file import (
    StoredOffset,
    parse_offsets,
    read_entries,
    render_offsets,
    write_entries,
)
from connectors.mysql import offsets as mysql_offsets
from connectors.postgres import offsets as pg_offsets

FIXTURE = Path(__file__).parents[1] / "fixtures" / "debezium" / "postgres-offsets.dat"
#: a tidemark PostgreSQL streaming offset after a completed transaction (its end: LSN 96)
TIDEMARK_PG = {
    "lsn": 90,
    "txId": 4,
    "ts_usec": 1,
    "lsn_commit": 80,
    "seq": 2,
    "complete": True,
    "flush_lsn": 96,
}


def test_debezium_servers_file_is_read_and_written_back() -> None:
    data = FIXTURE.read_bytes()
    (entry,) = parse_offsets(data)
    assert entry.name == "kafka" and entry.partition == {"server": "mig"}
    assert entry.offset == {
        "lsn_proc": 749741880,
        "messageType": "INSERT",
        "lsn_commit": 749741816,
        "lsn": 749741880,
        "txId": 55676,
        "ts_usec": 1795864356214558,
    }
    # the Java serialization is written back byte for byte; the JSON inside is encoded as
    # tidemark's offset stores encode it (sorted keys), which Debezium reads the same
    assert write_entries(read_entries(data)) == data
    assert parse_offsets(render_offsets([entry])) == [entry]


def test_many_entries_and_deleted_offsets_round_trip() -> None:
    entries = [
        StoredOffset(f"n{i % 3}", {"server": f"s{i}"}, None if i % 5 == 0 else {"pos": i})
        for i in range(40)
    ]
    assert parse_offsets(render_offsets(entries)) == entries
    assert read_entries(write_entries([(None, None)])) == [(None, None)]


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"", "ends inside"),
        (b"PK\x03\x04", "no Java serialization header"),
        (FIXTURE.read_bytes() + b"\x00", "bytes after the HashMap"),
        (FIXTURE.read_bytes().replace(b"java.util.HashMap", b"java.util.Hashtab"), "class"),
        (FIXTURE.read_bytes()[:-20], "ends inside"),
    ],
)
def test_anything_else_is_refused_naming_where(data: bytes, why: str) -> None:
    with pytest.raises(OffsetError, match=why) as err:
        read_entries(data)
    assert "at byte" in str(err.value)


def test_entries_that_are_not_connect_json_are_refused() -> None:
    data = write_entries([(b"not json", b"{}")])
    with pytest.raises(OffsetError, match="entry 1"):
        parse_offsets(data)


def test_postgres_offsets_both_ways() -> None:
    (entry,) = parse_offsets(FIXTURE.read_bytes())
    taken = pg_offsets.from_debezium(entry.offset)
    assert taken.refused is None and any("continues after them" in n for n in taken.notes)
    stored, problems = pg_offsets.validate_offset(entry.partition, taken.offset)
    assert problems == []
    assert stored is not None
    # the transactions Debezium finished are skipped; the one it was in continues after its
    # last delivered change (debezium_through)
    assert stored["lsn_commit"] == 749741816 and stored["flush_lsn"] <= 749741880
    with_tx = pg_offsets.from_debezium({**entry.offset, "transaction_id": "7"})
    assert with_tx.offset == taken.offset
    running = pg_offsets.from_debezium(
        {"lsn": 5, "snapshot": "INITIAL", "last_snapshot_record": False}
    )
    assert running.offset is None and running.refused and "snapshot" in running.refused
    finished = pg_offsets.from_debezium(
        {"lsn": 5, "txId": 3, "snapshot": "INITIAL", "last_snapshot_record": True}
    )
    assert finished.offset is not None
    assert finished.offset["lsn_commit"] == 5 and finished.offset["complete"] is False
    ours = TIDEMARK_PG
    back = pg_offsets.to_debezium(ours)
    assert back.offset == {
        "lsn_proc": 96,
        "messageType": "COMMIT",
        "lsn_commit": 96,
        "lsn": 96,
        "txId": 4,
        "ts_usec": 1,
    }
    assert pg_offsets.to_debezium({"lsn": 5, "snapshot": True}).refused


def test_mysql_offsets_both_ways() -> None:
    debezium = {
        "file": "b.000003",
        "pos": 154,
        "gtids": "0-1-10",
        "event": 4,
        "row": 1,
        "ts_sec": 9,
        "server_id": 1,
        "transaction_id": "0-1-11",
    }
    taken = mysql_offsets.from_debezium(debezium)
    assert taken.offset is not None and "transaction_id" not in taken.offset
    assert any("again from its start" in n for n in taken.notes)
    stored, problems = mysql_offsets.validate_offset({"server": "s"}, taken.offset)
    assert problems == [] and stored is not None
    position = mysql_offsets.BinlogPosition.from_offset(stored)
    assert position.already_emitted() == (0, 0)
    ours = {
        "file": "b.000003",
        "pos": 154,
        "event": 2,
        "row": 3,
        "ts_sec": 9,
        "server_id": 1,
        "row_events": 2,
    }
    back = mysql_offsets.to_debezium(ours)
    assert back.offset == {"file": "b.000003", "pos": 154, "ts_sec": 9, "server_id": 1}
    assert mysql_offsets.from_debezium({"file": "b.000003", "pos": 4, "snapshot": True}).refused


def test_debeziums_change_inside_a_transaction_is_where_streaming_continues() -> None:
    (entry,) = parse_offsets(FIXTURE.read_bytes())
    assert entry.offset is not None
    assert pg_offsets.debezium_through(entry.offset) == (749741880, 1)
    assert pg_offsets.debezium_through({**entry.offset, "lsn_events_processed": 3}) == (
        749741880,
        3,
    )
    # what PATCH /offsets stores of it still says so; tidemark's own offsets never do
    stored, _ = pg_offsets.validate_offset({"server": "mig"}, dict(entry.offset))
    assert stored is not None and pg_offsets.debezium_through(stored) == (749741880, 1)
    ours = {**TIDEMARK_PG, "complete": False, "flush_lsn": 70}
    assert pg_offsets.debezium_through(ours) is None
    for message_type in ("COMMIT", "BEGIN", "MESSAGE"):
        assert pg_offsets.debezium_through({**entry.offset, "messageType": message_type}) is None
    without_commit = {k: v for k, v in entry.offset.items() if k != "lsn_commit"}
    assert pg_offsets.debezium_through(without_commit) is None
