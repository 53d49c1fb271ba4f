"""pgoutput decoding from bytes recorded from a real PostgreSQL 15 (see fixtures/record.py)."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest

from cdc.spi import UNAVAILABLE
from connectors.postgres import pgoutput as po
from connectors.postgres.schema import relation_key

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "pgoutput" / "workload_v1.bin"


def frames() -> list[bytes]:
    data = FIXTURE.read_bytes()
    out, i = [], 0
    while i < len(data):
        (n,) = struct.unpack_from("!I", data, i)
        out.append(data[i + 4 : i + 4 + n])
        i += 4 + n
    return out


def test_recorded_workload_decodes_to_the_expected_messages() -> None:
    msgs = [po.decode(f) for f in frames()]
    kinds = [type(m).__name__ for m in msgs]
    assert kinds == [
        "Begin",
        "Relation",
        "Insert",
        "Insert",
        "Commit",
        "Begin",
        "Update",
        "Commit",
        "Begin",
        "Update",
        "Commit",
        "Begin",
        "Delete",
        "Commit",
        "Begin",
        "Message",
        "Commit",
        "Begin",
        "Relation",
        "Truncate",
        "Commit",
    ]
    rel = msgs[1]
    assert isinstance(rel, po.Relation)
    assert (rel.namespace, rel.name, rel.replica_identity) == ("public", "golden", "d")
    assert [(c.name, c.type_oid, c.is_key) for c in rel.columns] == [
        ("id", 23, True),
        ("name", 25, False),
        ("big", 25, False),
        ("n", 1700, False),
    ]
    assert rel.columns[3].type_modifier == (6 << 16 | 2) + 4  # numeric(6,2)
    ins = msgs[2]
    assert isinstance(ins, po.Insert) and ins.relation_oid == rel.oid
    assert ins.new == ["1", "one", "x" * 3000, "1.50"]
    assert msgs[3].new == ["2", "two", None, None]  # type: ignore[union-attr]
    begin, commit = msgs[0], msgs[4]
    assert isinstance(begin, po.Begin) and isinstance(commit, po.Commit)
    assert begin.final_lsn == commit.commit_lsn < commit.end_lsn
    assert begin.commit_ts_us == commit.commit_ts_us and begin.commit_ts_us > 1_600_000_000e6


def test_unchanged_toast_key_change_delete_message_truncate() -> None:
    msgs = [po.decode(f) for f in frames()]
    toast = msgs[6]
    assert isinstance(toast, po.Update)
    assert toast.old is None and toast.key is None
    assert toast.new[:2] == ["1", "uno"] and toast.new[2] is UNAVAILABLE
    key_change = msgs[9]
    assert isinstance(key_change, po.Update)
    assert key_change.key == ["2", None, None, None] and key_change.new[0] == "3"
    delete = msgs[12]
    assert isinstance(delete, po.Delete) and delete.key == ["3", None, None, None]
    message = msgs[15]
    assert isinstance(message, po.Message)
    assert (message.transactional, message.prefix, message.content) == (
        True,
        "golden-prefix",
        b"hello",
    )
    truncate = msgs[19]
    assert isinstance(truncate, po.Truncate) and truncate.relation_oids == [msgs[1].oid]  # type: ignore[union-attr]


def test_truncated_or_unknown_messages_raise_a_clear_error() -> None:
    insert = frames()[2]
    with pytest.raises(po.PgOutputError, match="truncated or malformed 'I'"):
        po.decode(insert[:20])
    with pytest.raises(po.PgOutputError, match="unknown pgoutput message type 'Z'"):
        po.decode(b"Z123")
    with pytest.raises(po.PgOutputError):
        po.decode(b"")


def test_replication_envelope_and_status_update() -> None:
    xlog = b"w" + struct.pack("!QQq", 100, 200, 0) + b"B..."
    msg = po.decode_copy_data(xlog)
    assert isinstance(msg, po.XLogData)
    assert (msg.data_start, msg.wal_end, msg.payload) == (100, 200, b"B...")
    assert msg.server_clock_us == po.PG_EPOCH_OFFSET_US
    ka = po.decode_copy_data(b"k" + struct.pack("!QqB", 300, 0, 1))
    assert isinstance(ka, po.Keepalive) and ka.wal_end == 300 and ka.reply_requested
    status = po.standby_status(1, 2, 3, po.PG_EPOCH_OFFSET_US)
    assert status[:1] == b"r" and struct.unpack("!QQQqB", status[1:]) == (1, 2, 3, 0, 0)


def test_lsn_text_round_trip() -> None:
    assert po.lsn_to_str(0x16B3748) == "0/16B3748"
    assert po.str_to_lsn("1/0000000A") == (1 << 32) | 10
    assert po.str_to_lsn(po.lsn_to_str(123456789012)) == 123456789012
    with pytest.raises(ValueError):
        po.str_to_lsn("nonsense")


def test_decoding_in_place_inside_a_copydata_payload_matches_decode() -> None:
    """The streaming loop decodes each message where it lies after the 25-byte XLogData
    header; the result, and the errors with their byte positions, are those of ``decode``."""
    header = b"w" + struct.pack("!QQq", 1, 2, 3)
    for frame in frames():
        assert po.decode_at(header + frame, 25) == po.decode(frame)
    insert = frames()[2]
    bad = bytearray(insert)
    bad[insert.index(b"t", 7)] = ord("z")  # first column's kind byte
    with pytest.raises(po.PgOutputError) as direct:
        po.decode(bytes(bad))
    with pytest.raises(po.PgOutputError) as in_place:
        po.decode_at(header + bytes(bad), 25)
    assert "unknown tuple data kind 'z'" in str(direct.value)
    assert str(in_place.value) == str(direct.value)
    with pytest.raises(po.PgOutputError, match="truncated or malformed 'I'"):
        po.decode_at(header + insert[:20], 25)
    with pytest.raises(po.PgOutputError, match="empty"):
        po.decode_at(header, 25)


def test_insert_at_matches_the_decoded_insert_and_its_errors() -> None:
    header = b"w" + struct.pack("!QQq", 1, 2, 3)
    inserts = [f for f in frames() if f[:1] == b"I"]
    assert inserts
    for frame in inserts:
        msg = po.decode(frame)
        assert isinstance(msg, po.Insert)
        assert po.insert_at(header + frame, 25) == (msg.relation_oid, msg.new)
    with pytest.raises(po.PgOutputError, match="truncated or malformed 'I'"):
        po.insert_at(header + inserts[0][:20], 25)
    no_tuple = bytearray(inserts[0])
    no_tuple[5] = ord("X")
    with pytest.raises(po.PgOutputError, match="without a new tuple"):
        po.insert_at(header + bytes(no_tuple), 25)


def test_the_stream_loops_inlined_insert_decodes_as_insert_at() -> None:
    """The stream loop decodes an Insert without calling ``insert_at``; on recorded inserts
    it hands on the same relation and tuple, and malformed ones fail with the same errors."""
    from types import SimpleNamespace

    from connectors.postgres.streaming import _StreamState

    got: list[tuple[int, list[object], int]] = []
    state = SimpleNamespace(received=0, insert=lambda oid, new, lsn: got.append((oid, new, lsn)))
    header = b"w" + struct.pack("!QQq", 100, 200, 3)
    inserts = [f for f in frames() if f[:1] == b"I"]
    for frame in inserts:
        got.clear()
        _StreamState.handle(state, header + frame)  # type: ignore[arg-type]
        assert got == [(*po.insert_at(header + frame, 25), 100)]
    with pytest.raises(po.PgOutputError, match="truncated or malformed 'I'"):
        _StreamState.handle(state, header + inserts[0][:20])  # type: ignore[arg-type]
    no_tuple = bytearray(inserts[0])
    no_tuple[5] = ord("X")
    with pytest.raises(po.PgOutputError, match="without a new tuple"):
        _StreamState.handle(state, header + bytes(no_tuple))  # type: ignore[arg-type]


def _relation(identity: str, *cols: tuple[str, bool]) -> po.Relation:
    columns = [po.RelationColumn(key, name, 23, -1) for name, key in cols]
    return po.Relation(None, 1, "public", "c", identity, columns)


def test_the_key_is_the_replica_identity_the_relation_message_flags() -> None:
    """The key of a relation version comes from its per-column flags (the identity when the
    rows were written), never a key column the row images do not carry."""
    # DEFAULT: the flagged columns are the primary key at that position, whatever it is now
    old = _relation("d", ("id", True), ("x", False))
    assert relation_key(old, ("id", "x")) == ("id",)
    assert relation_key(_relation("d", ("id", False), ("x", False)), ("id",)) == ()
    # USING INDEX: today's primary key only when the index carries all of it
    index = _relation("i", ("id", False), ("code", True), ("x", False))
    assert relation_key(index, ("id",)) == ("code",)
    both = _relation("i", ("id", True), ("code", True))
    assert relation_key(both, ("id",)) == ("id",)
    # FULL flags every column, NOTHING none: today's key, within the message's columns
    full = _relation("f", ("id", True), ("x", True))
    assert relation_key(full, ("id", "gone")) == ("id",)
    assert relation_key(_relation("n", ("id", False)), ("id",)) == ("id",)


def test_recorded_relation_flags_its_primary_key() -> None:
    rel = po.decode(frames()[1])
    assert isinstance(rel, po.Relation)
    assert relation_key(rel, ()) == ("id",)


def test_the_stream_loop_handles_a_memoryview_as_the_bytes() -> None:
    """The stream loop hands libpq's buffer on as a memoryview (no copy per message): every
    recorded message, and a keepalive, must be handled exactly as its ``bytes`` copy."""
    from types import SimpleNamespace

    from connectors.postgres.streaming import _StreamState

    def state(calls: list[object]) -> Any:
        def note(name: str) -> Any:
            return lambda *args: calls.append((name, *args))

        st = SimpleNamespace(
            received=0,
            reply_requested=False,
            insert=note("insert"),
            update=note("update"),
            delete=note("delete"),
            begin_tx=note("begin"),
            commit_tx=note("commit"),
            keepalive=note("keepalive"),
        )
        st.handlers = {kind: note(kind.__name__) for kind in (po.Relation, po.Update,
                       po.Delete, po.Truncate, po.Message, po.Insert)}  # fmt: skip
        return st

    header = b"w" + struct.pack("!QQq", 100, 200, 3)
    payloads = [header + f for f in frames()]
    payloads.append(b"k" + struct.pack("!QqB", 300, 4, 1))
    for payload in payloads:
        from_bytes: list[object] = []
        from_view: list[object] = []
        a, b = state(from_bytes), state(from_view)
        _StreamState.handle(a, payload)
        _StreamState.handle(b, memoryview(payload))
        assert from_view == from_bytes and from_bytes
        assert (b.received, b.reply_requested) == (a.received, a.reply_requested)
    with pytest.raises(po.PgOutputError, match="truncated or malformed 'I'"):
        _StreamState.handle(state([]), memoryview(payloads[2][:45]))


def test_the_stream_loops_inlined_update_and_delete_decode_as_the_messages() -> None:
    """Updates and deletes are decoded in the stream loop without a message object: on
    recorded ones, whole or cut short or with a bad tuple kind, they hand on what the general
    path's message holds, or fail with its error."""
    from types import SimpleNamespace

    from connectors.postgres.streaming import _StreamState

    header = b"w" + struct.pack("!QQq", 100, 200, 3)

    def inline(payload: bytes) -> object:
        got: list[tuple[object, ...]] = []
        state = SimpleNamespace(
            received=0,
            update=lambda *args: got.append(("update", *args)),
            delete=lambda *args: got.append(("delete", *args)),
            handlers={},
        )
        try:
            _StreamState.handle(state, payload)  # type: ignore[arg-type]
        except po.PgOutputError as exc:
            return str(exc)
        return got

    def general(payload: bytes) -> object:
        try:
            msg = po.decode_at(payload, 25)
        except po.PgOutputError as exc:
            return str(exc)
        if isinstance(msg, po.Update):
            return [("update", msg.relation_oid, msg.old, msg.key, msg.new, 100)]
        assert isinstance(msg, po.Delete)
        return [("delete", msg.relation_oid, msg.old, msg.key, 100)]

    changes = [f for f in frames() if f[:1] in (b"U", b"D")]
    assert {f[:1] for f in changes} == {b"U", b"D"}
    for frame in changes:
        whole = inline(header + frame)
        assert isinstance(whole, list) and whole == general(header + frame)
        bad = bytearray(frame)
        bad[5] = ord("X")
        for broken in (frame[:6], frame[:12], frame[:-1], bytes(bad)):
            assert inline(header + broken) == general(header + broken)
