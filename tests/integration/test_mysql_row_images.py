"""Row images without every column (issue 22 part 2, MariaDB): a writer's
``SET SESSION binlog_row_image=MINIMAL`` or ``NOBLOB`` while the server's global setting is
FULL. No event may carry a NULL that is not in the row: an absent column is the before
image's value when the UPDATE's before image has it, else the unavailable-value placeholder
(string and bytes columns), else the row is refused naming the columns."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import pytest

from cdc.errors import FatalError
from connectors.mysql import connection as myconn
from connectors.mysql.errors import EventDeserializationFailed
from connectors.mysql.streaming import check_server
from tests.integration.conftest import MySqlInfo
from tests.integration.mysql_harness import MySqlHarness, module_harness

pytestmark = [pytest.mark.mariadb, pytest.mark.kafka]

PH = "__debezium_unavailable_value"
PH_BYTES = base64.b64encode(PH.encode()).decode()  # bytes arrive base64 in JSON


@pytest.fixture(scope="module")
def h(
    mariadb: MySqlInfo, kafka: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MySqlHarness]:
    yield from module_harness(mariadb, kafka, tmp_path_factory, "ri")


def session(image: str, *statements: str) -> list[str]:
    return [f"SET SESSION binlog_row_image = {image}", *statements]


def test_noblob_and_minimal_sessions_never_emit_absent_columns_as_null(h: MySqlHarness) -> None:
    h.sql(
        "CREATE TABLE nb (id int PRIMARY KEY, name varchar(20), body text, bin blob, "
        "note varchar(20))",
        "CREATE TABLE nopk (a int, b int, c varchar(10))",
    )
    cfg = h.config(table_include_list=rf"{h.dbname}\.(nb|nopk)")
    with h.running(cfg) as run:
        h.wait_streaming(run)
        h.sql(
            "INSERT INTO nb VALUES (1, 'one', 'long text', x'0102', NULL)",
            "INSERT INTO nopk VALUES (1, 2, 'x'), (3, 4, NULL)",
        )
        h.sql(*session("NOBLOB", "UPDATE nb SET name = 'uno' WHERE id = 1"))
        h.sql(*session("MINIMAL", "UPDATE nb SET note = 'n' WHERE id = 1"))
        h.sql(*session("MINIMAL", "UPDATE nopk SET b = 20 WHERE a = 1"))
        h.sql(*session("MINIMAL", "DELETE FROM nb WHERE id = 1"))
        h.sql(*session("MINIMAL", "INSERT INTO nb (id, name) VALUES (2, 'two')"))
        events = h.read(cfg, "nb", min_count=6, settle=0.5)
        nopk = h.read(cfg, "nopk", min_count=3, settle=0.5)
        assert not run.errors, run.errors
    ins, noblob, minimal, delete, insert2 = (e.value for e in events if e.value is not None)
    # MINIMAL INSERT: MariaDB logs the columns the statement names; the defaulted ones are
    # unknown to the binlog
    assert insert2["after"] == {"id": 2, "name": "two", "body": PH, "bin": PH_BYTES, "note": PH}
    assert ins["after"] == {
        "id": 1,
        "name": "one",
        "body": "long text",
        "bin": "AQI=",
        "note": None,
    }
    # NOBLOB: the unchanged TEXT/BLOB columns are not in either image
    assert noblob["before"] == {"id": 1, "name": "one", "body": PH, "bin": PH_BYTES, "note": None}
    assert noblob["after"] == {"id": 1, "name": "uno", "body": PH, "bin": PH_BYTES, "note": None}
    # MINIMAL: the before image has the key only, the after image the changed column; the
    # key comes from the before image, nothing else is known
    assert minimal["before"] == {"id": 1, "name": PH, "body": PH, "bin": PH_BYTES, "note": PH}
    assert minimal["after"] == {"id": 1, "name": PH, "body": PH, "bin": PH_BYTES, "note": "n"}
    assert delete["op"] == "d"
    assert delete["before"] == {"id": 1, "name": PH, "body": PH, "bin": PH_BYTES, "note": PH}
    # no primary key: MINIMAL logs the whole before image, so the after image is exact
    update = [e.value for e in nopk if e.value is not None and e.value["op"] == "u"]
    assert [(u["before"], u["after"]) for u in update] == [
        ({"a": 1, "b": 2, "c": "x"}, {"a": 1, "b": 20, "c": "x"})
    ]


def test_minimal_row_lacking_a_number_is_refused_naming_the_columns(h: MySqlHarness) -> None:
    h.sql("CREATE TABLE mn (id int PRIMARY KEY, qty int, name varchar(10))")
    cfg = h.config(table_include_list=rf"{h.dbname}\.mn")
    with pytest.raises(EventDeserializationFailed) as err, h.running(cfg) as run:
        h.wait_streaming(run)
        h.sql("INSERT INTO mn VALUES (1, 5, 'a')")
        h.sql(*session("MINIMAL", "UPDATE mn SET name = 'b' WHERE id = 1"))
        h.wait_for(lambda: bool(run.errors))
    events = h.read(cfg, "mn", min_count=1, settle=0.5)
    message = str(err.value)
    assert "lacks the columns qty" in message and "binlog_row_image=FULL" in message
    assert [e.op for e in events] == ["c"]  # no update with qty = NULL was written
    skip = h.config(
        table_include_list=rf"{h.dbname}\.mn",
        event_deserialization_failure_handling_mode="warn",
        snapshot_mode="schema_only",
    )
    with h.running(skip) as run:
        h.wait_streaming(run)
        h.sql(*session("MINIMAL", "UPDATE mn SET name = 'c' WHERE id = 1"))
        h.sql("UPDATE mn SET name = 'd' WHERE id = 1")
        after = h.read(skip, "mn", min_count=1, settle=0.5)
        assert not run.errors, run.errors
    assert [e.after for e in after] == [{"id": 1, "qty": 5, "name": "d"}]


def test_global_row_image_other_than_full_is_refused_with_the_fix() -> None:
    info = myconn.ServerInfo("10.11", True, 1, True, "ROW", "MINIMAL", "FULL", True, False)
    with pytest.raises(FatalError) as err:
        check_server(info)
    assert "binlog_row_image is MINIMAL" in str(err.value)
    assert "SET GLOBAL binlog_row_image=FULL" in str(err.value)
