"""The schema change topic of tidemark's MariaDB connector against Debezium 3.6's.

Debezium Server (its ``MariaDbConnector``) and tidemark (``connector.class`` the same,
``envelope.version=3``) stream one MariaDB database from its current position, both with
``include.schema.changes=true``; then a series of DDL runs there: CREATE TABLE with many
column types (per-column character sets, generated and bit columns), defaults,
keys, comments and enums; CREATE TABLE ... LIKE; ALTER TABLE adding, changing, renaming and
dropping columns, keys, defaults and the table comment; CREATE/DROP INDEX; RENAME TABLE;
TRUNCATE; DROP TABLE, also of several tables with IF EXISTS. Each side's
schema change topic is then compared record by record: key, ``databaseName``,
``schemaName``, ``ddl`` and every ``tableChanges`` entry (the table after the change: its
columns with their JDBC types, type names, lengths, scales, positions, defaults, enum values
and comments, its key columns, charset, comment), schemas included.

Left out of the comparison, because the tools' own runs differ there: the ``source`` block
(binlog file/position, GTID, thread, timestamps, server id) and the value's ``ts_ms``. The
snapshot's schema change events are not compared (each side's snapshot describes the database
in its own statements); ``snapshot.mode`` is Debezium's ``no_data`` on both.

Never skipped: if Debezium Server or its Java runtime cannot be resolved, the test fails.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
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
from tests.integration.smt_parity import read_all

pytestmark = [pytest.mark.mariadb, pytest.mark.kafka]

DDL = [
    "CREATE TABLE kinds (id int NOT NULL AUTO_INCREMENT, "
    "name varchar(40) NOT NULL DEFAULT 'none' COMMENT 'who', "
    "price decimal(10,2) DEFAULT 1.50, qty smallint unsigned, big bigint, "
    "flag tinyint(1) DEFAULT 0, ratio double, score float, "
    "born date, at datetime(3), seen timestamp(6) NULL DEFAULT NULL, t time, y year, "
    "state enum('new','done') DEFAULT 'new', tags set('a','b'), "
    "body text, blobby blob, raw varbinary(16), doc longtext, c char(3), "
    "PRIMARY KEY (id), UNIQUE KEY uq_name (name)) "
    "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT='all kinds'",
    "ALTER TABLE kinds ADD COLUMN extra int DEFAULT 7 AFTER name",
    "ALTER TABLE kinds MODIFY COLUMN qty int NOT NULL DEFAULT 0",
    "ALTER TABLE kinds CHANGE COLUMN big bigger bigint unsigned",
    "ALTER TABLE kinds DROP COLUMN score",
    "ALTER TABLE kinds ADD COLUMN first_col int FIRST",
    "CREATE INDEX ix_at ON kinds (at)",
    "DROP INDEX ix_at ON kinds",
    "CREATE TABLE pair (a int NOT NULL, b varchar(10) NOT NULL, v json, PRIMARY KEY (a, b))",
    "RENAME TABLE pair TO pair2",
    "ALTER TABLE pair2 RENAME TO pair3",
    "TRUNCATE TABLE pair3",
    "CREATE TABLE nokey (x int, y int)",
    "ALTER TABLE nokey ADD UNIQUE KEY uq_x (x)",
    "DROP TABLE nokey",
    # (no NCHAR / NATIONAL VARCHAR: tidemark reads them as CHAR / VARCHAR in the table's
    # character set, Debezium keeps the national type names; see docs/mysql.md)
    "CREATE TABLE nat (id int PRIMARY KEY, latin varchar(10) CHARACTER SET latin1, "
    "g int GENERATED ALWAYS AS (id * 2) VIRTUAL, b bit(3), bin binary(4), d double(8,3), "
    "m mediumint, ts timestamp)",
    "CREATE TABLE copied LIKE kinds",
    "ALTER TABLE kinds COMMENT = 'changed'",
    "ALTER TABLE kinds ALTER COLUMN extra SET DEFAULT 9",
    "ALTER TABLE nat ADD COLUMN u varchar(5) CHARACTER SET utf8mb3 COLLATE utf8mb3_bin",
    "DROP TABLE IF EXISTS copied, nat, missing_one",
    "DROP TABLE pair3",
    "CREATE TABLE zz_sentinel (id int PRIMARY KEY)",
]
SENTINEL = "zz_sentinel"

#: value fields compared for presence only: each run's own
RUN_FIELDS = ("source", "ts_ms")


@pytest.fixture
def h(
    mariadb: MySqlInfo, kafka: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MySqlHarness]:
    yield from module_harness(mariadb, kafka, tmp_path_factory, "scp")


def _records(kafka: str, topic: str) -> list[dict[str, Any]]:
    out = []
    for _, key, value, _ in read_all(kafka, topic):
        doc = orjson.loads(value) if value else None
        payload = doc["payload"] if doc else None
        if payload is None or payload["source"].get("snapshot") not in (False, "false"):
            continue
        schema = doc["schema"]
        kept = {k: v for k, v in payload.items() if k not in RUN_FIELDS}
        out.append(
            {
                "key": orjson.loads(key) if key else None,
                "present": sorted(k for k in payload if k in RUN_FIELDS),
                "payload": kept,
                "schema": {
                    **schema,
                    "fields": [f for f in schema["fields"] if f["field"] != "source"],
                },
            }
        )
    return out


def _wait_sentinel(kafka: str, topic: str, check: Any, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        check()
        if any(SENTINEL in (r["payload"].get("ddl") or "") for r in _records(kafka, topic)):
            return
        time.sleep(0.5)
    raise AssertionError(f"no schema change for {SENTINEL} on {topic} within {timeout:.0f} s")


#: the second run: Debezium's SchemaChangeEventFilter on both sides, its JVM class there
FILTER = {
    "transforms": "scf",
    "transforms.scf.type": "io.debezium.transforms.SchemaChangeEventFilter",
    "transforms.scf.schema.change.event.exclude.list": "DROP,ALTER,DATABASE",
}


@pytest.mark.parametrize("smt", [None, FILTER], ids=["plain", "schema-change-filter"])
def test_schema_change_topic_matches_debezium(
    h: MySqlHarness, kafka: str, tmp_path: Path, smt: dict[str, str] | None
) -> None:
    """The second run drops DROP, ALTER and DATABASE events (index DDL, renames as ALTER
    under ``envelope.version=3``) on both sides; what is left must match again."""
    home, java = debezium_server()
    tag = uuid.uuid4().hex[:6]
    dbz_prefix, tm_prefix = f"dbzddl{tag}", f"tmddl{tag}"
    admin = AdminClient({"bootstrap.servers": kafka})
    for fut in admin.create_topics([NewTopic(p, 1, 1) for p in (dbz_prefix, tm_prefix)]).values():
        fut.result(30)
    workdir = tmp_path / "debezium"
    props = debezium_mariadb_properties(h, kafka, workdir, dbz_prefix, "no_data")
    props["debezium.source.include.schema.changes"] = "true"
    props.update({f"debezium.{k}": v for k, v in (smt or {}).items()})
    cfg = h.config(snapshot_mode="no_data")
    cfg.update(
        {
            "database.server.name": tm_prefix,
            "connector.class": "io.debezium.connector.mariadb.MariaDbConnector",
            "envelope.version": "3",
            "include.schema.changes": "true",
            **(smt or {}),
        }
    )
    run = debezium.start(home, java, workdir, props)
    try:

        def dbz_alive() -> None:
            if run.proc.poll() is not None:
                raise AssertionError(f"Debezium Server exited:\n{run.log_tail(60)}")

        with h.running(cfg) as tm:
            h.wait_streaming(tm)
            # Debezium streams once its (schema only) snapshot wrote the history
            deadline = time.monotonic() + 120
            while (
                "Starting streaming" not in run.log_tail(400)
                and "streaming" not in run.log_tail(400).lower()
            ):
                dbz_alive()
                if time.monotonic() > deadline:
                    raise AssertionError(f"Debezium did not start streaming:\n{run.log_tail(60)}")
                time.sleep(0.5)
            time.sleep(2)
            h.sql(*DDL)

            def tm_alive() -> None:
                if tm.errors:
                    raise tm.errors[0]

            _wait_sentinel(kafka, tm_prefix, tm_alive)
            _wait_sentinel(kafka, dbz_prefix, dbz_alive)
    except BaseException:
        print(run.log_tail(80))
        raise
    finally:
        stop_process(run.proc, timeout=60)
        run.log.close()
    jvm, py = _records(kafka, dbz_prefix), _records(kafka, tm_prefix)
    kinds = {c["type"] for r in py for c in r["payload"].get("tableChanges") or []}
    if smt is None:
        assert len(jvm) >= len(DDL) - 2, [r["payload"].get("ddl") for r in jvm]
        assert {"CREATE", "ALTER", "DROP"} <= kinds
    else:
        assert len(jvm) >= 4 and kinds == {"CREATE"}, [r["payload"].get("ddl") for r in jvm]
    diffs = []
    for i in range(max(len(jvm), len(py))):
        a = jvm[i] if i < len(jvm) else None
        b = py[i] if i < len(py) else None
        if a != b:
            diffs.append(f"#{i}: {(a or b or {}).get('payload', {}).get('ddl')!r}\n" + _diff(a, b))
    assert not diffs, (
        f"{len(diffs)} of {max(len(jvm), len(py))} schema change events differ "
        f"(Debezium {len(jvm)}, tidemark {len(py)}):\n\n" + "\n\n".join(diffs[:6])
    )


def _diff(a: Any, b: Any) -> str:
    import difflib

    la = json.dumps(a, indent=1, sort_keys=True).splitlines()
    lb = json.dumps(b, indent=1, sort_keys=True).splitlines()
    return "\n".join(difflib.unified_diff(la, lb, "Debezium", "tidemark", n=1, lineterm=""))
