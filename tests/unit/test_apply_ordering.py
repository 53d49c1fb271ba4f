"""Ordering keys of the apply job: one rule per connector, comparable across batches."""

from __future__ import annotations

import pytest

from cdc.apply.ordering import (
    OrderingError,
    OrderingRules,
    compare,
    detect_connector,
    is_snapshot,
    native_position,
    native_position_text,
    ordering_key,
)

PG = {"connector": "postgresql", "lsn": 1000, "snapshot": False, "txId": 7}


def pg(lsn: int, snapshot: object = False) -> dict[str, object]:
    return {**PG, "lsn": lsn, "snapshot": snapshot}


def test_postgres_key_is_phase_lsn_offset() -> None:
    assert ordering_key(pg(1000), "u", 5) == (1, 1000, 5)
    assert ordering_key(pg(900, True), "r", 2) == (0, 900, 2)


def test_postgres_later_lsn_wins_and_offset_breaks_ties_inside_a_transaction() -> None:
    a = ordering_key(pg(100), "c", 10)
    b = ordering_key(pg(200), "u", 3)  # offset lower (another batch/partition) but LSN higher
    assert a < b
    same_lsn = [ordering_key(pg(300), "u", off) for off in (7, 8)]
    assert same_lsn[0] < same_lsn[1]


def test_streamed_change_beats_snapshot_read_even_with_a_lower_lsn() -> None:
    """A transaction in flight while the slot was created is not in the exported snapshot but
    may carry LSNs below the consistent point: before-stream lets it win."""
    snap = ordering_key(pg(5000, True), "r", 1)
    late_tx = ordering_key(pg(4990), "u", 9)
    assert late_tx > snap
    by_pos = OrderingRules(snapshot_order="by-position")
    assert ordering_key(pg(4990), "u", 9, by_pos) < ordering_key(pg(5000, True), "r", 1, by_pos)


def test_by_position_lets_a_later_resnapshot_overwrite_streamed_rows() -> None:
    rules = OrderingRules(snapshot_order="by-position")
    streamed = ordering_key(pg(100), "u", 4, rules)
    resnapshot = ordering_key(pg(900, True), "r", 0, rules)
    assert resnapshot > streamed


def test_an_incremental_read_orders_by_position_with_streamed_changes() -> None:
    """The DBLog window drops an incremental read whenever its key was streamed meanwhile, so
    the read is newer than every change below its position: in the snapshot phase it could
    never repair a stored row (a placeholder stored as null), whatever its position."""
    streamed = ordering_key(pg(100), "u", 4)
    incremental = ordering_key(pg(500, "incremental"), "r", 0)
    assert incremental > streamed
    assert ordering_key(pg(600), "u", 1) > incremental
    # an initial snapshot's read keeps the snapshot phase (the slot-creation edge case)
    assert ordering_key(pg(5000, True), "r", 1) < ordering_key(pg(4990), "u", 9)


@pytest.mark.parametrize(
    ("flag", "expected"),
    [
        (True, True),
        (False, False),
        (None, False),
        ("true", True),
        ("TRUE", True),
        ("last", True),
        ("first", True),
        ("first_in_data_collection", True),
        ("last_in_data_collection", True),
        ("incremental", True),
        ("false", False),
    ],
)
def test_snapshot_flag_accepts_booleans_and_debezium_strings(flag: object, expected: bool) -> None:
    assert is_snapshot({"snapshot": flag}, "c") is expected


def test_op_r_is_always_a_snapshot_read() -> None:
    assert is_snapshot({"snapshot": None}, "r")


def test_unknown_snapshot_string_is_an_error() -> None:
    with pytest.raises(OrderingError):
        is_snapshot({"snapshot": "maybe"}, "u")


def my(file: str, pos: int, row: int = 0, gtid: str | None = None) -> dict[str, object]:
    return {"connector": "mysql", "file": file, "pos": pos, "row": row, "gtid": gtid}


def test_mysql_binlog_order_is_file_index_then_pos_then_row() -> None:
    events = [
        my("mysql-bin.000002", 4000, 1),
        my("mysql-bin.000001", 9000, 0),
        my("mysql-bin.000002", 4000, 0),
        my("mysql-bin.000010", 120, 0),  # numeric, not lexicographic, file order
        my("mysql-bin.000002", 150, 3),
    ]
    keys = [native_position(e) for e in events]
    assert sorted(keys) == [(1, 9000, 0), (2, 150, 3), (2, 4000, 0), (2, 4000, 1), (10, 120, 0)]


def test_mysql_gtid_order_uses_the_transaction_number() -> None:
    rules = OrderingRules(mysql="gtid")
    uuid = "3E11FA47-71CA-11E1-9E33-C80AA9429562"
    a = native_position(my("mysql-bin.000009", 50, 0, f"{uuid}:23"), rules)
    b = native_position(my("mysql-bin.000001", 900, 0, f"{uuid}:24"), rules)  # after a rotation
    assert a < b
    assert native_position(my("f.000001", 5, 1, "0-1-42"), rules) == (42, 5, 1)  # MariaDB
    assert native_position(my("f.000001", 5, 1, f"{uuid}:1-77"), rules)[0] == 77


def test_mysql_gtid_rule_without_gtid_fails_for_streamed_events() -> None:
    with pytest.raises(OrderingError, match="gtid"):
        native_position(my("mysql-bin.000001", 5), OrderingRules(mysql="gtid"))


def test_mysql_gtid_and_binlog_orders_agree_with_commit_order() -> None:
    """AC-80 in miniature: the same commit sequence, ordered either way."""
    uuid = "3E11FA47-71CA-11E1-9E33-C80AA9429562"
    commits = [
        my("mysql-bin.000001", 400, 0, f"{uuid}:5"),
        my("mysql-bin.000001", 400, 1, f"{uuid}:5"),
        my("mysql-bin.000001", 900, 0, f"{uuid}:6"),
        my("mysql-bin.000002", 154, 0, f"{uuid}:7"),
    ]
    shuffled = [commits[i] for i in (3, 1, 0, 2)]
    for rules in (OrderingRules(mysql="binlog"), OrderingRules(mysql="gtid")):
        ordered = sorted(shuffled, key=lambda e: native_position(e, rules))
        assert ordered == commits


def test_sqlserver_commit_lsn_change_lsn_serial() -> None:
    def ss(commit: str, change: str | None, serial: int) -> dict[str, object]:
        return {
            "connector": "sqlserver",
            "commit_lsn": commit,
            "change_lsn": change,
            "event_serial_no": serial,
        }

    a = native_position(ss("00000027:00000758:0003", "00000027:00000758:0002", 1))
    b = native_position(ss("00000027:00000758:0003", "00000027:00000758:0002", 2))
    c = native_position(ss("00000027:00000760:0001", "00000027:00000758:0005", 1))
    snap = native_position(ss("00000027:00000700:0001", None, 0))
    assert snap < a < b < c
    assert a[:3] == (0x27, 0x758, 3)


def test_sqlserver_string_serial_from_the_seed_example_is_accepted() -> None:
    src = {"connector": "sqlserver", "commit_lsn": "0:1:2", "event_serial_no": "1"}
    assert native_position(src)[-1] == 1


def test_mongodb_and_cassandra_and_oracle() -> None:
    assert native_position({"connector": "mongodb", "sec": 10, "ord": 3}) == (10, 3)
    assert native_position({"connector": "mongodb", "ts_ms": 10_500, "ord": 2}) == (10, 2)
    cass = {"connector": "cassandra", "ts_micro": 1_000_001, "file": "CommitLog-7-1654.log"}
    assert native_position({**cass, "pos": 88}) == (1_000_001, 1654, 88)
    ora = {"connector": "oracle", "scn": "1000", "commit_scn": "1005"}
    assert native_position(ora) == (1005, 1000)


def test_custom_fields_override_the_connector_rule() -> None:
    rules = OrderingRules(custom_fields=("source.seq", "ts_ms"))
    src = {"connector": "db2", "seq": "17"}
    assert native_position(src, rules, envelope={"ts_ms": 5, "source": src}) == (17, 5)
    with pytest.raises(OrderingError):
        native_position({"connector": "db2"})


def test_connector_is_guessed_from_position_fields_when_missing() -> None:
    assert detect_connector({"lsn": 5}) == "postgresql"
    assert detect_connector({"file": "f.1", "pos": 4}) == "mysql"
    assert detect_connector({"commit_lsn": "0:0:1"}) == "sqlserver"
    with pytest.raises(OrderingError):
        detect_connector({"db": "x"})


def test_missing_position_is_an_error_naming_the_field() -> None:
    with pytest.raises(OrderingError, match=r"source\.lsn"):
        native_position({"connector": "postgresql", "lsn": None})
    with pytest.raises(OrderingError, match="not an integer"):
        native_position({"connector": "postgresql", "lsn": "0/16B3748"})


def test_layout_names_the_rule_so_tables_detect_a_change() -> None:
    assert OrderingRules().layout("postgresql") == "v1:postgresql:before-stream:offset"
    assert OrderingRules(mysql="gtid").layout("mariadb") == "v1:mysql/gtid:before-stream:offset"
    assert OrderingRules().layout("mysql") != OrderingRules(mysql="gtid").layout("mysql")


def test_compare_matches_spark_array_ordering() -> None:
    assert compare([1, 2], [1, 3]) == -1
    assert compare([1, 2, 0], [1, 2]) == 1  # a longer array with an equal prefix is greater
    assert compare((0, 5), [0, 5]) == 0


def test_position_text_for_people() -> None:
    assert native_position_text({"connector": "postgresql", "lsn": 42}) == "lsn=42"
    text = native_position_text(my("mysql-bin.000003", 154, 2, "u:9"))
    assert text == "mysql-bin.000003:154:2 gtid=u:9"
