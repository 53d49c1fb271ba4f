"""tidemark's binlog decoder against python-mysql-replication on a live MariaDB stream.

One workload (every type of the MariaDB type tests, charsets, UUID/INET, spatial, zero dates,
MINIMAL and NOBLOB row images, multi-row transactions, DDL in between) is read twice from the
same GTID position, once through the library's loop and event classes and once through the
raw-packet decoder, into the same processor; every event must be identical, value types
included (see tests/unit/test_mysql_binlog_decoder.py for the comparison).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

from cdc.spi import PositionReached, RowChange, TableId
from connectors.mysql import binlog_decoder as raw
from connectors.mysql import connection as ev
from connectors.mysql.binlog import BinlogProcessor, Resume
from connectors.mysql.binlog_decoder import RawBinlogReader
from connectors.mysql.connection import BinlogReader
from connectors.mysql.gtid import MariaDbGtidSet
from tests.integration.conftest import MySqlInfo
from tests.integration.mysql_harness import MySqlHarness, module_harness
from tests.integration.test_mysql_mariadb_types import (
    EDGE_DDL,
    EDGE_ROWS,
    INET4,
    INET6,
    SWEEP_DDL,
    SWEEP_ROWS,
    UUIDS,
)
from tests.unit.test_mysql_binlog_decoder import assert_same
from tests.unit.test_mysql_fixtures import Ctx, new_state

pytestmark = [pytest.mark.mariadb, pytest.mark.kafka]


@pytest.fixture(scope="module")
def h(
    mariadb: MySqlInfo, kafka: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MySqlHarness]:
    yield from module_harness(mariadb, kafka, tmp_path_factory, "bdec")


class OnlyDb(Ctx):
    def __init__(self, db: str) -> None:
        super().__init__()
        self.db = db

    def is_included(self, table_id: TableId) -> bool:
        return table_id.catalog == self.db


def workload(h: MySqlHarness) -> list[str]:
    ins = [f"INSERT INTO sweep VALUES ({i + 1}, {row})" for i, row in enumerate(SWEEP_ROWS)]
    edges = [f"INSERT INTO edges VALUES ({i + 1}, {row})" for i, row in enumerate(EDGE_ROWS)]
    nets = [
        f"INSERT INTO nets VALUES ({i + 1}, '{UUIDS[i % len(UUIDS)]}', "
        f"'{INET4[i % len(INET4)]}', '{v6}', NULL)"
        for i, (v6, _) in enumerate(INET6)
    ]
    return [
        f"CREATE TABLE sweep (id int PRIMARY KEY, {SWEEP_DDL})",
        *ins,
        "UPDATE sweep SET y = 1999, t6 = '-00:00:01.5', j = '{\"a\": [1, 2]}' WHERE id = 1",
        "DELETE FROM sweep WHERE id = 2",
        f"CREATE TABLE edges (id int PRIMARY KEY, {EDGE_DDL})",
        "SET sql_mode = ''",
        *edges,
        "CREATE TABLE nets (id int PRIMARY KEY, u uuid, i4 inet4, i6 inet6 NOT NULL, nu uuid)",
        *nets,
        "CREATE TABLE geo (id int PRIMARY KEY, p point, g geometry, ls linestring NULL, "
        "mp multipolygon NULL)",
        "INSERT INTO geo VALUES (1, POINT(1.5, -2), ST_GeomFromText('POINT(3 4)', 4326), "
        "ST_GeomFromText('LINESTRING(0 0,1 1)'), "
        "ST_GeomFromText('MULTIPOLYGON(((0 0,1 0,1 1,0 0)))'))",
        "CREATE TABLE img (id int PRIMARY KEY, n int, t text, b blob, v varchar(20), "
        "d decimal(12,4), k bigint unsigned)",
        "INSERT INTO img VALUES (1, 1, 'text', 'blob', 'v', -12345678.0042, 18446744073709551615)"
        ", (2, 2, 't2', 'b2', 'v2', 0.0001, 0)",
        "SET SESSION binlog_row_image = 'MINIMAL'",
        "UPDATE img SET v = 'min' WHERE id = 1",
        "DELETE FROM img WHERE id = 2",
        "SET SESSION binlog_row_image = 'NOBLOB'",
        "UPDATE img SET n = 5 WHERE id = 1",
        "SET SESSION binlog_row_image = 'FULL'",
        "BEGIN",
        *[f"INSERT INTO img VALUES ({i}, {i}, 'x', 'y', 'z', {i}.5, {i})" for i in range(3, 40)],
        "UPDATE img SET n = n + 1 WHERE id > 2",
        "COMMIT",
        "ALTER TABLE img ADD COLUMN extra int AFTER n",
        "INSERT INTO img (id, extra) VALUES (100, 7)",
        "CREATE TABLE end_marker (id int)",
    ]


def read(h: MySqlHarness, reader_class: type[BinlogReader], start: str, **cfg: str) -> list[Any]:
    db = h.db
    st = new_state(
        database_hostname=db.host,
        database_port=str(db.port),
        database_user=db.user,
        database_password=db.password,
        **cfg,
    )
    ctx = OnlyDb(h.dbname)
    st.register_all(ctx)
    processor = BinlogProcessor(st, ctx, Resume(None, 4, start), MariaDbGtidSet(start))
    reader = reader_class(
        st.cfg, random.randint(5400, 6400), mariadb=True, gtids=start, annotate_rows=True
    )
    try:
        for event in reader:
            processor.handle(event)
            if isinstance(event, raw.Query | ev.QueryEvent) and "end_marker" in event.query:
                break
    finally:
        reader.close()
    return [e for e in ctx.events if not isinstance(e, PositionReached)]


def test_live_stream_decodes_identically(h: MySqlHarness) -> None:
    start = str(h.sql("SELECT @@GLOBAL.gtid_binlog_pos")[0][0])
    conn = h.connect()
    try:
        with conn.cursor() as cur:
            for statement in workload(h):
                cur.execute(statement)
    finally:
        conn.close()
    skip = {"event_deserialization_failure_handling_mode": "warn"}  # the MINIMAL DELETE
    for cfg in (skip, {**skip, "binlog_buffer_size": "10", "include_query": "true"}):
        library = read(h, BinlogReader, start, **cfg)
        ours = read(h, RawBinlogReader, start, **cfg)
        rows = [e for e in ours if isinstance(e, RowChange)]
        assert len(rows) > 50
        assert {r.table_id.table for r in rows} == {"sweep", "edges", "nets", "geo", "img"}
        assert any(r.partial for r in rows)  # the MINIMAL / NOBLOB images
        assert_same(library, ours)
