"""`tidemark verify --target jdbc:URL`: a captured PostgreSQL table against the table a JDBC
sink keeps in another database (named as Debezium's JDBC sink names it: the topic with dots
as underscores). No JDBC sink runs here: the sink's table is written by this test, row for
row from the source with the same column types, which is what a sink with
``insert.mode=upsert`` and ``delete.enabled=true`` leaves. Equal first; then hand-made
differences in the sink table are named by key (missing, extra, stale), and the CLI's exit
codes and errors say what a user needs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import psycopg
import pytest
from psycopg.types.json import Jsonb

from cdc.verify.compare import Options
from cdc.verify.jdbc_target import JdbcTarget
from connectors.postgres.verify import verify_side
from tests.integration import pg_cleanup
from tests.integration.conftest import PgInfo
from tests.integration.pg_harness import PgHarness
from tests.integration.test_verify_delta import DDL, ROWS
from tests.integration.test_verify_postgres import pg_harness, worker_yaml
from worker.cli import main
from worker.verify_cli import verify

pytestmark = [pytest.mark.postgres]


@pytest.fixture(scope="module")
def h(postgres: PgInfo, kafka: str) -> Iterator[PgHarness]:
    yield from pg_harness(postgres, kafka, "tvj")


@pytest.fixture(scope="module")
def sink_db(h: PgHarness) -> Iterator[str]:
    name = f"{h.dbname}_sink"
    pg_cleanup.create_database(h.pg.dsn(), name)
    try:
        yield name
    finally:
        pg_cleanup.drop_database(h.pg.dsn(), name)


def sink_copy(h: PgHarness, sink_db: str, table: str) -> None:
    """What the sink leaves: the source's rows, same types, in the sink's table."""
    ddl = DDL.replace("CREATE TABLE dv", f'CREATE TABLE "{table}"')
    with (
        psycopg.connect(h.pg.dsn(h.dbname)) as src,
        psycopg.connect(h.pg.dsn(sink_db), autocommit=True) as dst,
    ):
        dst.execute(ddl)  # type: ignore[arg-type]
        rows = [
            tuple(Jsonb(v) if isinstance(v, dict) else v for v in row)
            for row in src.execute("SELECT * FROM dv").fetchall()
        ]
        marks = ", ".join(["%s"] * len(rows[0]))
        with dst.cursor() as cur:
            cur.executemany(f'INSERT INTO "{table}" VALUES ({marks})', rows)  # type: ignore[arg-type]


def jdbc_url(h: PgHarness, sink_db: str) -> str:
    pg = h.pg
    return f"jdbc:postgresql://{pg.host}:{pg.port}/{sink_db}?user={pg.user}&password={pg.password}"


def run_jdbc(cfg: dict[str, Any], url: str) -> Any:
    source, target = verify_side(cfg), JdbcTarget(url)
    try:
        (result,) = verify(source, target, [], Options(chunk_rows=25, recheck_rounds=0))
    finally:
        source.close()
        target.close()
    return result


def test_verify_jdbc_sink_table_equal_then_differences_named(
    h: PgHarness, sink_db: str, kafka: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    h.sql(DDL, ROWS)
    cfg = h.config(table_include_list="public.dv")
    table = h.topic(cfg, "dv").replace(".", "_")
    sink_copy(h, sink_db, table)
    url = jdbc_url(h, sink_db)

    result = run_jdbc(cfg, url)
    assert result.error is None
    assert result.equal, (result.missing, result.extra, result.stale)
    assert result.source_rows == result.target_rows == 120

    path = worker_yaml(tmp_path, kafka, cfg)
    cli = ["verify", path, "--connector", cfg["name"], "--target", url, "--recheck-rounds", "0"]
    assert main([*cli, "--json"]) == 0
    assert orjson.loads(capsys.readouterr().out)["tables"][0]["target"] == "jdbc"

    with psycopg.connect(h.pg.dsn(sink_db), autocommit=True) as c:
        c.execute(f'DELETE FROM "{table}" WHERE id = 7')  # type: ignore[arg-type]
        c.execute(f"UPDATE \"{table}\" SET tsz = tsz + interval '1 us' WHERE id = 11")  # type: ignore[arg-type]
        c.execute(f"INSERT INTO \"{table}\" (id, name) VALUES (500, 'ghost')")  # type: ignore[arg-type]
    result = run_jdbc(cfg, url)
    assert (result.missing, result.extra, result.stale) == ([("7",)], [("500",)], [("11",)])

    assert main([*cli, "--json"]) == 1
    (out,) = orjson.loads(capsys.readouterr().out)["tables"]
    assert (out["missing"], out["extra"], out["stale"]) == ([["7"]], [["500"]], [["11"]])

    # a wrong password: exit 2, the error names the target, never the password
    wrong = url.replace(f"password={h.pg.password}", "password=Not-the-Secret-42")
    assert main(["verify", path, "--connector", cfg["name"], "--target", wrong]) == 2
    printed = capsys.readouterr()
    assert sink_db in printed.out + printed.err
    assert "Not-the-Secret-42" not in printed.out + printed.err
