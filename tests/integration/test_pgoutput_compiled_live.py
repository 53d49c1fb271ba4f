"""The compiled TupleData decoder against its pure-Python reference on a live stream: every
message of a real pgoutput slot (wide types, unicode, NULLs, unchanged TOASTed values, old
images of REPLICA IDENTITY FULL) decodes to identical messages through both."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import pq

from connectors.postgres import _pgoutput_c as compiled  # built by the install
from connectors.postgres import pgoutput as po
from tests.integration import pg_cleanup
from tests.integration.conftest import PgInfo

pytestmark = pytest.mark.postgres

BIG = "toasted ✓ " * 40_000  # compressed out of line: unchanged in later updates

TABLE = """
CREATE TABLE wide (
  id bigint PRIMARY KEY, t text, uni varchar(40), n numeric(12,3), nv numeric, f float8,
  b boolean, ts timestamptz, d date, j jsonb, arr int[], tarr text[], by bytea, u uuid,
  iv interval, big text, nulls text
)"""

WRITES = [
    "INSERT INTO wide VALUES (1, 'plain', 'héllo 日本 🦀', 12.5, 'NaN', 'Infinity', true, "
    "'2024-02-29 23:59:59.123456+00', '0001-01-01 BC', '{\"k\": [1, \"é\"]}', "
    "'{1,NULL,3}', '{\"a,b\",\"\"}', '\\x00ff10', gen_random_uuid(), '1 year 2 mons', "
    f"'{BIG}', NULL)",
    "INSERT INTO wide (id, t) VALUES (2, E'tab\\tnew\\nline\\\\ \"quote\"')",
    "INSERT INTO wide (id, t, n, f) SELECT g, repeat('x', g), g / 7.0, -g * 1.5e300 "
    "FROM generate_series(3, 200) g",
    "UPDATE wide SET t = 'changed', nulls = 'now set' WHERE id = 1",  # big stays unchanged
    "UPDATE wide SET id = 1000 WHERE id = 2",
    "DELETE FROM wide WHERE id BETWEEN 3 AND 50",
    "TRUNCATE wide",
]


@pytest.fixture
def stream(postgres: PgInfo) -> Iterator[list[bytes]]:
    db = f"tm_tuplec_{uuid.uuid4().hex[:8]}"
    pg_cleanup.create_database(postgres.dsn("postgres"), db)
    try:
        with psycopg.connect(postgres.dsn(db), autocommit=True) as c:
            c.execute(TABLE)
            c.execute("ALTER TABLE wide REPLICA IDENTITY FULL")
            c.execute("CREATE PUBLICATION pub FOR TABLE wide")
            c.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (db,))
            for sql in WRITES:
                c.execute(sql.encode())
            (end,) = c.execute("SELECT pg_current_wal_lsn()::text").fetchone()  # type: ignore[misc]
        yield _read(postgres.dsn(db, replication="database"), db, po.str_to_lsn(end))
    finally:
        pg_cleanup.drop_database(postgres.dsn("postgres"), db)


def _read(dsn: str, slot: str, end: int) -> list[bytes]:
    """The pgoutput messages of the slot, up to the transaction that passes ``end``."""
    conn = psycopg.connect(dsn, autocommit=True)
    try:  # not ``with``: its exit would send a query into the COPY stream
        pgc = conn.pgconn
        pgc.send_query(
            f"START_REPLICATION SLOT {slot} LOGICAL 0/0 "
            "(proto_version '1', publication_names 'pub', messages 'true')".encode()
        )
        res = pgc.get_result()
        assert res is not None and res.status == pq.ExecStatus.COPY_BOTH
        out: list[bytes] = []
        while True:
            n, buf = pgc.get_copy_data(0)
            assert n > 0, "replication stream ended early"
            data = bytes(buf)
            if data[:1] != b"w":
                continue
            out.append(data[25:])
            if data[25] == 0x43 and po.decode(data[25:]).end_lsn >= end:  # type: ignore[union-attr]
                return out
    finally:
        conn.close()


def test_a_live_stream_decodes_identically(
    stream: list[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(po, "_tuple", po._tuple_py)
    want = [po.decode(m) for m in stream]
    monkeypatch.setattr(po, "_tuple", compiled.tuple_at)
    got = [po.decode(m) for m in stream]
    assert got == want
    ops = [type(m).__name__ for m in want]
    assert (ops.count("Insert"), ops.count("Update"), ops.count("Delete")) == (200, 2, 48)
    assert "Truncate" in ops
    first = next(m for m in got if isinstance(m, po.Insert))
    assert first.new[2] == "héllo 日本 🦀" and first.new[15] == BIG and first.new[16] is None
    update, key_change = (m for m in got if isinstance(m, po.Update))
    assert update.new[1] == "changed" and update.new[15] is po.UNCHANGED_TOAST
    assert key_change.old is not None and key_change.old[0] == "2"
    assert key_change.new[:2] == ["1000", 'tab\tnew\nline\\ "quote"']
