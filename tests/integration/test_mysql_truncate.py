"""TRUNCATE TABLE on the MySQL connector (real MariaDB and Kafka), as Debezium 3.x emits it.

Debezium's binlog connectors (3.6, ``BinlogStreamingChangeEventSource``) turn a TRUNCATE of a
captured table into a truncate event of the table, unless ``skipped.operations`` has ``t``,
and never into a schema change event. tidemark does the same under ``envelope.version=3``;
under ``1.2`` the statement still reaches the schema change topic as well, as every DDL did in
Debezium 1.2. Each run ends with a sentinel row after the TRUNCATE, so its arrival proves the
TRUNCATE was handled (nothing missing is then "not yet")."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.conftest import MySqlInfo
from tests.integration.mysql_harness import MySqlHarness, module_harness, read_topic

pytestmark = [pytest.mark.mariadb, pytest.mark.kafka]


@pytest.fixture(scope="module")
def h(
    mariadb: MySqlInfo, kafka: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MySqlHarness]:
    yield from module_harness(mariadb, kafka, tmp_path_factory, "trunc")


def _run(
    h: MySqlHarness, table: str, **config: str
) -> tuple[list[tuple[str | None, object]], list[str]]:
    """Insert, TRUNCATE, insert the sentinel; the table's
    events as (op, id) and the schema change topic's DDL texts after the snapshot."""
    h.sql(f"CREATE TABLE {table} (id int PRIMARY KEY)")
    cfg = h.config(snapshot_mode="schema_only", table_include_list=rf"{h.dbname}\.{table}")
    cfg.update(config)
    with h.running(cfg) as run:
        h.wait_streaming(run)
        h.sql(f"INSERT INTO {table} VALUES (1)")
        h.sql(f"TRUNCATE TABLE {table}")
        h.sql(f"INSERT INTO {table} VALUES (99)")
        h.wait_for(
            lambda: any(e.after == {"id": 99} for e in h.read(cfg, table, min_count=1, settle=0.2)),
            run=run,
        )
        assert not run.errors
    events = [(e.op, (e.after or e.before or {}).get("id")) for e in h.read(cfg, table)]
    ddl = [
        c.value["ddl"]
        for c in read_topic(h.kafka, cfg["database.server.name"], settle=0.5)
        if not c.value["source"]["snapshot"]
    ]
    return events, ddl


def test_truncate_is_a_t_event_and_no_schema_change_under_debezium_3(h: MySqlHarness) -> None:
    events, ddl = _run(h, "t3", **{"envelope.version": "3", "skipped.operations": "none"})
    assert events == [("c", 1), ("t", None), ("c", 99)]
    assert not any("TRUNCATE" in d.upper() for d in ddl), ddl


def test_truncate_is_skipped_by_default_and_kept_as_ddl_under_1_2(h: MySqlHarness) -> None:
    events, ddl = _run(h, "t12")
    assert events == [("c", 1), ("c", 99)]
    assert [d for d in ddl if "TRUNCATE" in d.upper()] == ["TRUNCATE TABLE t12"]
