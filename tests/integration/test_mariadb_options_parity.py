"""MariaDB column options against Debezium 3.6's MariaDB connector (in Debezium Server).

Both capture one table with every common MariaDB column type (``envelope.version=3`` on
tidemark's side), with ``column.propagate.source.type`` on all its columns and a mask and a
truncation on two of them: a snapshot, then streamed inserts, an update and a delete. Every
record of the table's topic must match, schemas included (the ``__debezium.source.column.*``
parameters JDBC sinks size their columns by), with the tools' own fields set aside as in
``smt_parity.py``; a NULL in the masked column is read as the mask, which Debezium writes
for it and tidemark does not (docs/postgres.md). No JSON column: MariaDB's JSON is a
checked LONGTEXT, which tidemark names ``io.debezium.data.Json`` and Debezium a plain string
(the T4 entry of docs/benchmarks.md).

Never skipped: if Debezium Server or its Java runtime cannot be resolved, the test fails.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from bench.compare import debezium
from bench.compare.common import stop_process
from tests.integration.conftest import MySqlInfo
from tests.integration.debezium_server import debezium_server
from tests.integration.mysql_harness import (
    MySqlHarness,
    debezium_mariadb_properties,
    module_harness,
)
from tests.integration.smt_parity import collect, contains, differences, has_records

pytestmark = [pytest.mark.mariadb, pytest.mark.kafka]

COLUMNS = (
    "id int NOT NULL AUTO_INCREMENT PRIMARY KEY, ti tinyint, tiu tinyint unsigned, "
    "si smallint, mi mediumint, i int unsigned, bi bigint, f float, d double, "
    "dec1 decimal(10,2), b bit(5), bo boolean, c char(3), vc varchar(20), t text, "
    "secret varchar(30), note varchar(30), bin binary(2), vb varbinary(8), bl blob, "
    "dt date, tm time(3), dtm datetime(6), ts timestamp(3) NULL DEFAULT NULL, y year, "
    "e enum('a','b'), s set('x','y')"
)
ROWS = [
    "INSERT INTO mo (ti, tiu, si, mi, i, bi, f, d, dec1, b, bo, c, vc, t, secret, note, bin, vb, "
    "bl, dt, tm, dtm, ts, y, e, s) VALUES (-5, 250, -300, 70000, 4000000000, -9, 1.5, "
    "2.25, 12.34, b'10101', true, 'abc', 'héllo', 'text', 'hide me', 'a long note', "
    "'ab', 'xyz', 'blob', '2024-01-05', '10:20:30.123', '2024-01-05 10:20:30.123456', "
    "'2024-01-05 10:20:30.123', 2024, 'b', 'x,y')",
    "INSERT INTO mo (id) VALUES (2)",
]
CHANGES = [
    "UPDATE mo SET vc = 'updated', secret = 'other', note = NULL WHERE id = 1",
    "INSERT INTO mo (id, vc, secret, note) VALUES (3, 'three', 's3', 'n3')",
    "DELETE FROM mo WHERE id = 2",
    "INSERT INTO mo (id, vc) VALUES (9999, 'sentinel')",
]


def _masked_nulls(topic: str, doc: Any) -> Any:
    """Debezium's mask replaces a NULL too; tidemark keeps it null (docs/postgres.md)."""
    payload = doc.get("payload") if isinstance(doc, dict) else None
    if not isinstance(payload, dict):
        return doc
    out = dict(payload)
    for side in ("before", "after"):
        row = out.get(side)
        if isinstance(row, dict) and "secret" in row and row["secret"] is None:
            out[side] = {**row, "secret": "***"}
    return {**doc, "payload": out}


@pytest.fixture(scope="module")
def h(
    mariadb: MySqlInfo, kafka: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MySqlHarness]:
    yield from module_harness(mariadb, kafka, tmp_path_factory, "mop")


def test_column_options_match_debezium(h: MySqlHarness, kafka: str, tmp_path: Path) -> None:
    home, java = debezium_server()
    h.sql(f"CREATE TABLE mo ({COLUMNS})", *ROWS)
    tag = uuid.uuid4().hex[:6]
    dbz_prefix, tm_prefix = f"dbzmo{tag}", f"tmmo{tag}"
    admin = AdminClient({"bootstrap.servers": kafka})
    topics = [NewTopic(f"{p}.{h.dbname}.mo", 1, 1) for p in (dbz_prefix, tm_prefix)]
    for fut in admin.create_topics(topics).values():
        fut.result(30)
    options = {
        # not the masked and truncated columns: Debezium applies only the first rule that
        # matches a column, tidemark all of them (docs/postgres.md, "Events")
        "column.propagate.source.type": rf"{h.dbname}\.mo\.(?!secret|note).*",
        "column.mask.with.3.chars": rf"{h.dbname}\.mo\.secret",
        "column.truncate.to.2.chars": rf"{h.dbname}\.mo\.note",
        "table.include.list": rf"{h.dbname}\.mo",
    }
    workdir = tmp_path / "debezium"
    props = debezium_mariadb_properties(h, kafka, workdir, dbz_prefix, "initial")
    props.update({f"debezium.source.{k}": v.replace("\\", "\\\\") for k, v in options.items()})
    cfg = h.config(snapshot_mode="initial")
    cfg.update(
        {
            "database.server.name": tm_prefix,
            "connector.class": "io.debezium.connector.mariadb.MariaDbConnector",
            "envelope.version": "3",
            "include.schema.changes": "false",
            **options,
        }
    )
    run = debezium.start(home, java, workdir, props)
    try:
        with h.running(cfg) as tm:

            def alive() -> None:
                if tm.errors:
                    raise tm.errors[0]
                if run.proc.poll() is not None:
                    raise AssertionError(f"Debezium Server exited:\n{run.log_tail(60)}")

            def wait(prefix: str, count: int, marker: bytes) -> None:
                deadline = time.monotonic() + 120
                while not has_records(kafka, prefix, count, lambda v: contains(marker, v)):
                    alive()
                    if time.monotonic() > deadline:
                        raise AssertionError(f"{prefix}: waited 120 s for {marker!r}")
                    time.sleep(0.5)

            for prefix in (dbz_prefix, tm_prefix):
                wait(prefix, 2, b'"r"')  # both snapshots are done
            h.sql(*CHANGES)
            for prefix in (dbz_prefix, tm_prefix):
                wait(prefix, 1, b'"sentinel"')
            time.sleep(1)
            jvm = collect(kafka, dbz_prefix, _masked_nulls)
            py = collect(kafka, tm_prefix, _masked_nulls)
    except BaseException:
        print(run.log_tail(60))
        raise
    finally:
        stop_process(run.proc, timeout=60)
        run.log.close()
    assert sum(len(r) for r in jvm.values()) >= 6
    diffs = differences(jvm, py)
    assert not diffs, "records differ:\n\n" + "\n\n".join(diffs)
