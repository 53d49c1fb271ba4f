"""`tidemark verify` against real MariaDB and Kafka: a captured table of many types compares
equal, then a hand-made extra event, a stale re-sent version and a tombstone are named by key
(composite text + int key, so chunks are ordered by code point on both sides)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc.verify.compare import Options
from cdc.verify.kafka_target import KafkaTarget
from connectors.mysql.verify import verify_side
from tests.integration.conftest import MySqlInfo
from tests.integration.mysql_harness import MySqlHarness, module_harness
from tests.integration.test_verify_postgres import produce, run_cli, worker_yaml
from worker.verify_cli import verify

pytestmark = [pytest.mark.mariadb, pytest.mark.kafka]

DDL = """CREATE TABLE vt (
    region VARCHAR(10) CHARACTER SET latin1, id INT, name VARCHAR(40), price DECIMAL(10,2),
    flag BIT(1), small TINYINT, big BIGINT UNSIGNED, ts TIMESTAMP(6) NULL, dt DATETIME,
    dt6 DATETIME(6), d DATE, t TIME(3), b VARBINARY(16), f FLOAT, g DOUBLE, e ENUM('a','b'),
    y YEAR, PRIMARY KEY (region, id))"""


@pytest.fixture(scope="module")
def h(mariadb: MySqlInfo, kafka: str, tmp_path_factory: Any) -> Iterator[MySqlHarness]:
    yield from module_harness(mariadb, kafka, tmp_path_factory, "tmv")


def test_verify_mariadb_equal_then_faults_named_by_key(
    h: MySqlHarness, kafka: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = ", ".join(
        f"('{r}', {i}, 'name {i} é', {i}.25, {i % 2}, {i % 100 - 50}, "
        f"{18446744073709551615 - i}, '2024-01-01 10:00:{i % 60:02d}.123456', "
        f"'2024-02-01 00:00:{i % 60:02d}', '2024-03-01 00:00:00.{i:06d}', "
        f"'2024-01-{i % 28 + 1:02d}', '-01:02:{i % 60:02d}.5', UNHEX(MD5('{i}')), {i} / 3, "
        f"{i} / 7, '{'ab'[i % 2]}', {1990 + i % 30})"
        for r in ("Zürich", "alpha", "Beta")
        for i in range(1, 61)
    )
    h.sql(DDL, f"INSERT INTO vt VALUES {rows}", "INSERT INTO vt (region, id) VALUES ('null', 1)")
    cfg = h.config(table_include_list=f"{h.dbname}.vt", snapshot_mode="initial")
    table = f"{h.dbname}.vt"
    with h.running(cfg) as run:
        h.wait_streaming(run)
        h.sql(
            "UPDATE vt SET name = 'renamed', price = 0.01 WHERE id = 5",
            "DELETE FROM vt WHERE region = 'alpha' AND id = 3",
        )
        source = verify_side(h.new_server_id(dict(cfg)))
        target = KafkaTarget({"bootstrap.servers": kafka})
        try:
            (result,) = verify(
                source, target, [table], Options(chunk_rows=25, recheck_rounds=20, recheck_wait=0.5)
            )
        finally:
            target.close()
            source.close()
        assert result.error is None
        assert result.equal, (result.missing, result.extra, result.stale)
        assert result.source_rows == result.target_rows == 180
        assert result.chunks == 8

    topic = h.topic(cfg, "vt")
    stale = next(
        e.value for e in h.read(cfg, "vt") if e.key == {"region": "Beta", "id": 5} and e.op == "r"
    )
    produce(kafka, topic, {"region": "Beta", "id": 5}, stale)
    produce(
        kafka, topic, {"region": "zz", "id": 1}, {"op": "c", "after": {"region": "zz", "id": 1}}
    )
    produce(kafka, topic, {"region": "alpha", "id": 7}, None)
    h.sql("DELETE FROM vt WHERE region = 'Zürich' AND id = 60")

    path = worker_yaml(tmp_path, kafka, cfg)
    code, doc = run_cli(capsys, path, "--connector", cfg["name"], "--chunk-rows", "40")
    assert code == 1, doc["tables"][0]["error"]
    (t,) = doc["tables"]
    assert t["missing"] == [["alpha", "7"]]
    assert t["extra"] == [["Zürich", "60"], ["zz", "1"]]
    assert t["stale"] == [["Beta", "5"]]
