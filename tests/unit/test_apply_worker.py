"""The per-partition processing of the apply job, driven without Arrow or Spark."""

from __future__ import annotations

from typing import Any

import orjson

from cdc.apply.events import ParseSettings
from cdc.apply.policy import RESERVED, TableState
from cdc.apply.synthetic import SyntheticTable, col, pg
from cdc.apply.worker import OUTPUT_DDL, PartitionProcessor, WorkerSettings

T = SyntheticTable(
    "items",
    [("id", col("int32", optional=False)), ("name", col("string"))],
    ["id"],
)
LAYOUT = "v1:postgresql:before-stream:offset"


def run(records: list[tuple[bytes | None, bytes | None]], **kw: Any) -> list[dict[str, Any]]:
    settings = WorkerSettings(ParseSettings(), "evolve", reserved=RESERVED, **kw)
    proc = PartitionProcessor(settings)
    for offset, (key, value) in enumerate(records):
        proc.record(T.topic, 0, offset, key, value)
    proc.finish()
    data = proc.take()
    n = len(data["kind"])
    return [{k: v[i] for k, v in data.items()} for i in range(n)]


def kinds(rows: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [r for r in rows if r["kind"] == kind]


def test_one_row_per_key_plus_schema_and_stats() -> None:
    rows = run(
        [
            T.record("c", {"id": 1, "name": "a"}, pg(10)),
            T.record("u", {"id": 1, "name": "b"}, pg(20)),
            T.record("c", {"id": 2, "name": "x"}, pg(30)),
            T.record("d", {"id": 2, "name": "x"}, pg(40)),
            (T.key_bytes({"id": 2}), None),
        ]
    )
    data = sorted(kinds(rows, "row"), key=lambda r: r["key_json"])
    assert [(r["key_json"], r["op"], r["pos"]) for r in data] == [
        ('{"id":1}', "u", [1, 20, 1]),
        ('{"id":2}', "d", [1, 40, 3]),
    ]
    assert orjson.loads(data[0]["row_json"]) == {"id": 1, "name": "b"}
    (schema,) = kinds(rows, "schema")
    info = orjson.loads(schema["info"])
    assert info["columns"] == [["id", "integer"], ["name", "string"]]
    assert info["key"] == ["id"] and info["layout"] == LAYOUT and info["verdict"] is None
    (stats,) = kinds(rows, "stats")
    s = orjson.loads(stats["info"])
    assert s["counts"] == {
        "events": 5,
        "tombstones": 1,
        "skipped": 0,
        "errors": 0,
        "changes": 4,
        "rows": 2,
    }
    assert s["tables"] == {
        "srv_public_items": {
            "sources": [[T.topic, 0]],
            "deletes": 1,
            "rows": 2,
            "handover": 0,
            "patches": 0,
        }
    }


def test_bad_events_become_error_rows_with_the_raw_record() -> None:
    rows = run([(b'{"id":1}', b"garbage"), T.record("c", {"id": 1, "name": "a"}, pg(1))])
    (err,) = kinds(rows, "error")
    assert err["offset"] == 0 and "not valid JSON" in err["info"]
    assert err["raw_key"] == b'{"id":1}' and err["raw_value"] == b"garbage"
    assert len(kinds(rows, "row")) == 1


def test_events_of_a_rejected_schema_are_kept_out_of_the_fold() -> None:
    """A key that does not match the existing table's key: error rows, not folded."""
    state = TableState((("id", "integer"), ("name", "string")), ("name",), LAYOUT)
    rows = run(
        [T.record("c", {"id": 1, "name": "a"}, pg(1))],
        tables=(("srv_public_items", state),),
    )
    (err,) = kinds(rows, "error")
    assert "does not match the table's key (name)" in err["info"]
    assert kinds(rows, "row") == []
    (schema,) = kinds(rows, "schema")
    assert "does not match" in orjson.loads(schema["info"])["verdict"]


def test_driver_verdicts_override_the_workers_own_checks() -> None:
    first = run([T.record("c", {"id": 1, "name": "a"}, pg(1))])
    did = kinds(first, "schema")[0]["descriptor"]
    rows = run(
        [T.record("c", {"id": 1, "name": "a"}, pg(1))],
        verdicts=((did, "rejected by the driver"),),
    )
    assert kinds(rows, "error")[0]["info"] == "rejected by the driver"


def test_truncate_is_emitted_separately() -> None:
    value = orjson.dumps(
        {"op": "t", "source": {"connector": "postgresql", "lsn": 99, "table": "items"}}
    )
    rows = run([(None, value)])
    (t,) = kinds(rows, "truncate")
    assert t["pos"] == [1, 99, 0] and t["tbl"] == "srv_public_items"


def test_output_columns_match_the_declared_spark_schema() -> None:
    rows = run([T.record("c", {"id": 1, "name": "a"}, pg(1))])
    declared = [c.split()[0] for c in OUTPUT_DDL.split(", ")]
    assert list(rows[0]) == declared


def test_second_pass_with_driver_verdicts_handles_schemaless_rows() -> None:
    t = SyntheticTable("loose", [("id", col("int32", optional=False))], ["id"], with_schemas=False)
    key, value = t.record("c", {"id": 1, "v": 2}, pg(1))
    settings = WorkerSettings(ParseSettings(), "evolve", reserved=RESERVED)
    first = PartitionProcessor(settings)
    first.record(t.topic, 0, 0, key, value)
    first.finish()
    (did,) = first.descriptors
    second = PartitionProcessor(
        WorkerSettings(ParseSettings(), "evolve", verdicts=((did, None),), reserved=RESERVED)
    )
    second.record(t.topic, 0, 0, key, value)
    second.finish()
    data = second.take()
    assert data["kind"].count("row") == 1 and data["kind"].count("schema") == 1


def test_the_collector_is_off_while_a_partition_is_processed_and_restored_after() -> None:
    import gc

    import pyarrow as pa

    from cdc.apply.worker import process

    key, value = T.record("c", {"id": 1, "name": "a"}, pg(10))
    seen: list[bool] = []

    def batches() -> Any:
        seen.append(gc.isenabled())
        yield pa.RecordBatch.from_pydict(
            {
                "key": pa.array([key], pa.binary()),
                "value": pa.array([value], pa.binary()),
                "topic": [T.topic],
                "partition": pa.array([0], pa.int32()),
                "offset": pa.array([0], pa.int64()),
            }
        )

    settings = WorkerSettings(ParseSettings(), "evolve", reserved=RESERVED)
    for before in (True, False):
        (gc.enable if before else gc.disable)()
        try:
            out = pa.Table.from_batches(list(process(settings, batches())))
            assert gc.isenabled() is before
        finally:
            gc.enable()
        assert out.column("kind").to_pylist().count("row") == 1
    assert seen == [False, False]
