"""Issue 20.2 (MySQL/MariaDB): an include list that matches nothing fails the start with the
patterns and the nearest existing names, unless table.include.list.allow.empty=true."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from cdc.errors import FatalError
from tests.integration.conftest import MySqlInfo
from tests.integration.mysql_harness import MySqlHarness, module_harness

pytestmark = [pytest.mark.mariadb, pytest.mark.kafka]


@pytest.fixture(scope="module")
def h(
    mariadb: MySqlInfo, kafka: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MySqlHarness]:
    yield from module_harness(mariadb, kafka, tmp_path_factory, "ti")


def start_error(h: MySqlHarness, **overrides: str) -> BaseException:
    run = h.start(h.config(**overrides))
    run.thread.join(30)
    assert not run.thread.is_alive()
    assert run.errors, "the start did not fail"
    return run.errors[0]


@pytest.mark.parametrize("mode", ["initial", "never"])
def test_a_table_include_list_matching_nothing_fails_the_start(h: MySqlHarness, mode: str) -> None:
    h.sql("CREATE TABLE IF NOT EXISTS orders (id int PRIMARY KEY)")
    err = start_error(h, table_include_list=rf"{h.dbname}\.order", snapshot_mode=mode)
    assert isinstance(err, FatalError)
    text = str(err)
    assert "table.include.list captures nothing" in text
    assert rf"'{h.dbname}\\.order'" in text  # the pattern, as written
    assert f"nearest: {h.dbname}.orders" in text  # the typo shows
    assert "table.include.list.allow.empty=true" in text


def test_a_database_include_list_matching_nothing_fails_the_start(h: MySqlHarness) -> None:
    cfg_db = h.dbname[:-1] + ("x" if h.dbname[-1] != "x" else "y")
    err = start_error(h, database_include_list=cfg_db)
    assert isinstance(err, FatalError)
    assert "database.include.list captures nothing" in str(err)
    assert h.dbname in str(err)  # the nearest existing database


def test_allow_empty_runs_with_a_warning_and_captures_tables_created_later(
    h: MySqlHarness, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = h.config(
        table_include_list=rf"{h.dbname}\.later",
        snapshot_mode="schema_only",
        table_include_list_allow_empty="true",
    )
    with caplog.at_level(logging.WARNING, logger="tidemark.mysql"), h.running(cfg) as run:
        h.wait_streaming(run)
        # the warning is in the task's status too (its trace), not only in the log
        [notice] = run.engine.metrics.problems()
        assert rf"'{h.dbname}\\.later'" in notice and "allow.empty=true" in notice, notice
        h.sql("CREATE TABLE later (id int PRIMARY KEY)", "INSERT INTO later VALUES (1)")
        events = h.read(cfg, "later", min_count=1, settle=0.3)
    assert [e.after for e in events] == [{"id": 1}]
    assert any("allow.empty=true" in r.getMessage() for r in caplog.records)
