"""The reselect post-processor on MariaDB (issue 22 part 2): rows written by a session with
``binlog_row_image=MINIMAL`` or ``NOBLOB`` get the columns their after image lacks from the
table, numbers included, instead of being refused; a row deleted before the reselect keeps
the placeholder in its text columns, and one whose number cannot be filled any more is
refused under ``event.processing.failure.handling.mode``, never emitted with a NULL.

The changes are written while the connector is stopped, so the reselect runs after all of
them (that is how a row is gone when it is re-read)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cdc.offsets.memory import MemoryOffsetStore
from tests.integration.conftest import MySqlInfo
from tests.integration.mysql_harness import MySqlHarness, module_harness

pytestmark = [pytest.mark.mariadb, pytest.mark.kafka]

PH = "__debezium_unavailable_value"
RESELECT = "io.debezium.processors.reselect.ReselectColumnsPostProcessor"


@pytest.fixture(scope="module")
def h(
    mariadb: MySqlInfo, kafka: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MySqlHarness]:
    yield from module_harness(mariadb, kafka, tmp_path_factory, "rsm")


def session(image: str, *statements: str) -> list[str]:
    return [f"SET SESSION binlog_row_image = {image}", *statements]


def test_minimal_and_noblob_rows_are_completed_by_the_reselect(h: MySqlHarness) -> None:
    h.sql(
        "CREATE TABLE mr (id int PRIMARY KEY, qty int, name varchar(20), body text)",
        "INSERT INTO mr VALUES (1, 5, 'a', 'body1'), (2, 6, 'b', 'body2'), "
        "(3, 7, 'c', 'body3'), (4, 8, 'd', 'body4')",
    )
    cfg = h.config(
        table_include_list=rf"{h.dbname}\.mr",
        event_processing_failure_handling_mode="warn",
    )
    cfg.update({"post.processors": "reselector", "reselector.type": RESELECT})
    store = MemoryOffsetStore()
    with h.running(cfg, store) as run:
        h.wait_streaming(run)
        h.read(cfg, "mr", min_count=4, settle=0.5)
    h.sql(*session("MINIMAL", "UPDATE mr SET name = 'a2' WHERE id = 1"))
    h.sql(*session("NOBLOB", "UPDATE mr SET qty = 60 WHERE id = 2"))
    h.sql(*session("NOBLOB", "UPDATE mr SET qty = 80 WHERE id = 4"))
    h.sql(*session("MINIMAL", "UPDATE mr SET name = 'c2' WHERE id = 3"))
    h.sql("DELETE FROM mr WHERE id IN (3, 4)")  # gone before the reselect runs
    with h.running(cfg, store) as run:
        h.wait_streaming(run)
        events = h.read(cfg, "mr", min_count=4 + 3 + 4, settle=1.0)
        assert not run.errors, run.errors
    updates = [e.value for e in events if e.op == "u"]
    # MINIMAL: the after image had id and name; qty (a number) and body come from the table
    assert updates[0]["after"] == {"id": 1, "qty": 5, "name": "a2", "body": "body1"}
    # its before image cannot be re-read: the key, the placeholder, NULL for the number
    assert updates[0]["before"] == {"id": 1, "qty": None, "name": PH, "body": PH}
    # NOBLOB: the unchanged TEXT column is re-read
    assert updates[1]["after"] == {"id": 2, "qty": 60, "name": "b", "body": "body2"}
    # deleted before the reselect: the text column keeps its placeholder, nothing fails
    assert updates[2]["after"] == {"id": 4, "qty": 80, "name": "d", "body": PH}
    # row 3's number could not be filled any more: refused (warn), not emitted with a NULL
    assert len(updates) == 3
    assert [e.key["id"] for e in events if e.op == "d"] == [3, 4]
