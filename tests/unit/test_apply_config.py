"""The apply job's configuration, session settings and jar lookup (no Spark)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc.apply import jars
from cdc.apply.cli import main
from cdc.apply.config import ConfigError, from_mapping, load, parse_override
from cdc.apply.merge import _update_expr
from cdc.apply.session import local_cores, session_conf

BASE = {
    "kafka": {"bootstrap.servers": "k:9092", "topics": ["a.b.c"]},
    "target.path": "/lake",
    "checkpoint.location": "/ckpt",
}


def test_nested_and_dotted_keys_are_the_same(tmp_path: Path) -> None:
    f = tmp_path / "job.yaml"
    f.write_text(
        "kafka:\n  bootstrap.servers: k:9092\n  topics: [a.b.c, d.e.f]\n"
        "target:\n  path: /lake\n  tables: {a.b.c: customers}\n"
        "checkpoint.location: /ckpt\non.error: quarantine\n"
        "spark:\n  master: local[2]\n  conf: {spark.sql.shuffle.partitions: 2}\n"
    )
    cfg = load(f)
    assert cfg.topics == ("a.b.c", "d.e.f") and cfg.tables == {"a.b.c": "customers"}
    assert cfg.on_error == "quarantine" and cfg.master == "local[2]"
    assert cfg.spark_conf == {"spark.sql.shuffle.partitions": "2"}
    assert cfg.table_location("x") == "/lake/x"
    assert cfg.deletes_location("x") == "/lake/_tidemark/deletes/x"
    assert cfg.quarantine_location == "/lake/_tidemark/quarantine"


def test_defaults() -> None:
    cfg = from_mapping(BASE)
    assert cfg.schema_evolution == "evolve" and cfg.on_error == "fail"
    assert cfg.placeholders == ("__debezium_unavailable_value",)
    assert cfg.snapshot_order == "before-stream" and cfg.mysql_order == "binlog"
    assert cfg.trigger == "10 seconds" and cfg.jars == "auto"
    assert cfg.table_type == "copy-on-write" and not cfg.merge_on_read
    assert cfg.compaction_every == 10


def test_merge_on_read_tables_keep_their_change_log_beside_the_deleted_keys() -> None:
    cfg = from_mapping({**BASE, "table.type": "merge-on-read", "compaction.every": "none"})
    assert cfg.merge_on_read and cfg.compaction_every is None
    assert cfg.changes_location("t") == "/lake/_tidemark/changes/t"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"on.eror": "fail"}, "unknown configuration key"),
        ({"on.error": "drop"}, "on.error must be one of fail, quarantine"),
        ({"schema.evolution": "yolo"}, "schema.evolution must be one of"),
        ({"kafka.topic.pattern": "a.*"}, "exactly one of kafka.topics and kafka.topic.pattern"),
        ({"trigger": "sometimes"}, "trigger 'sometimes'"),
        ({"kafka.max.offsets.per.trigger": 0}, "must be positive"),
        ({"target.table.name": "{nope}"}, "unknown placeholder"),
        ({"table.type": "MERGE_ON_READ"}, "table.type must be one of copy-on-write, merge-on"),
        ({"compaction.every": 0}, "compaction.every must be positive"),
        ({"on.eror": "fail"}, r"on\.eror \(did you mean on\.error\?\)"),
        ({"target.path": ""}, r"target\.path is required and may not be blank"),
        ({"checkpoint.location": " "}, r"checkpoint\.location is required and may not be blank"),
        ({"compaction.every": 2.9}, "compaction.every must be a whole number"),
        ({"deletes.compact.every": True}, "deletes.compact.every must be a whole number"),
        ({"kafka.starting.offsets": "bogus"}, "kafka.starting.offsets must be earliest, latest"),
    ],
)
def test_invalid_configs_name_the_key(change: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        from_mapping({**BASE, **change})


def test_starting_offsets_and_whole_numbers_that_pass() -> None:
    cfg = from_mapping(
        {**BASE, "kafka.starting.offsets": '{"t": {"0": 5}}', "compaction.every": "3"}
    )
    assert cfg.compaction_every == 3
    assert from_mapping({**BASE, "kafka.starting.offsets": "latest"}).starting_offsets == "latest"
    assert from_mapping({**BASE, "kafka.starting.offsets": "LATEST"})  # Spark lower-cases it


def test_required_keys() -> None:
    with pytest.raises(ConfigError, match=r"target\.path is required"):
        from_mapping({"kafka.bootstrap.servers": "k", "kafka.topics": "a"})


def test_overrides_from_the_command_line() -> None:
    assert parse_override("on.error=quarantine") == ("on.error", "quarantine")
    assert parse_override("kafka.topics=[x, y]") == ("kafka.topics", ["x", "y"])
    cfg = from_mapping(BASE, {"trigger": "available-now"})
    assert cfg.trigger == "available-now"
    with pytest.raises(ConfigError):
        parse_override("novalue")


def test_cli_reports_config_errors_with_exit_code_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text("kafka.bootstrap.servers: k\n")
    assert main([str(f)]) == 2
    assert "required" in capsys.readouterr().err
    assert main([]) == 2


def test_local_session_settings() -> None:
    cfg = from_mapping({**BASE, "spark.jars": "none", "spark.conf": {"spark.x": "1"}})
    conf = session_conf(cfg, "local[2]")
    assert conf["spark.sql.shuffle.partitions"] == "2"
    assert conf["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
    assert conf["spark.x"] == "1" and "spark.jars" not in conf
    assert "spark.sql.shuffle.partitions" not in session_conf(cfg, "spark://h:7077")
    assert local_cores("local[4]") == 4 and local_cores("local") == 1
    assert local_cores("yarn") is None


def test_jars_come_from_the_shared_maven_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIDEMARK_MAVEN_CACHE", str(tmp_path))
    with pytest.raises(jars.JarsMissing, match="resolve_jars"):
        jars.resolved_jars()
    for pom, version in jars.POMS:
        lib = tmp_path / f"{pom}-{version}" / "lib"
        lib.mkdir(parents=True)
        (lib / f"{pom}.jar").write_text("")
        (lib / ".resolved").write_text(version)
    found = jars.resolved_jars()
    assert [Path(p).name for p in found] == ["spark-kafka.jar", "delta-spark.jar"]
    cfg = from_mapping(BASE)
    assert session_conf(cfg, None)["spark.jars"] == ",".join(found)


def test_update_expressions_keep_stored_values_for_placeholders() -> None:
    assert _update_expr("qty", "integer", None) == "s.`qty`"
    text = _update_expr("doc", "string", None)
    assert "array_contains(s._tm_unavailable, 'doc') THEN t.`doc`" in text
    assert "t.__pos > s._tm_fills['doc'] THEN t.`doc`" in text
    kept = _update_expr("gone", "integer", ["d1"])
    assert kept == "CASE WHEN s._tm_descriptor IN ('d1') THEN t.`gone` ELSE s.`gone` END"


def test_progress_line_reports_rates_and_kafka_lag() -> None:
    from types import SimpleNamespace

    from cdc.apply.progress import progress_line

    src = SimpleNamespace(
        metrics={"maxOffsetsBehindLatest": "42"},
        startOffset='{"t":{"0":10,"1":20}}',
        endOffset='{"t":{"0":15,"1":22,"2":4}}',  # partition 2 is new: not counted
    )
    progress = SimpleNamespace(
        name="q",
        id="x",
        batchId=3,
        numInputRows=10,
        inputRowsPerSecond=5.0,
        processedRowsPerSecond=7.4,
        durationMs={"triggerExecution": 1200},
        sources=[src],
    )
    line = progress_line(progress)
    assert line == (
        "query q batch 3: input_rows=10 input_offsets=7 input_rows_per_s=5 processed_rows_per_s=7 "
        "trigger_ms=1200 kafka_max_offsets_behind=42"
    )


def test_batch_report_line() -> None:
    from cdc.apply.job import BatchReport
    from cdc.apply.merge import MergeCounts

    r = BatchReport(4, events=10, changes=9, rows=5, lag_ms=12, duration_ms=30, reader="direct")
    r.tables["t"] = MergeCounts(inserted=2, updated=1, deleted=1, unchanged=1, filled=1)
    r.timings = {"parse": 10, "merge": 20}
    assert r.line() == (
        "batch 4: events=10 changes=9 keys=5 inserted=2 updated=1 deleted=1 unchanged=1 "
        "held=0 filled=1 tombstones=0 skipped=0 quarantined=0 tables=1 lag_ms=12 reader=direct "
        "took_ms=30 (parse=10 merge=20)"
    )
    r.tables["u"] = MergeCounts(logged=7, compactions=1)
    assert "filled=1 logged=7 compactions=1 tombstones=0" in r.line()
