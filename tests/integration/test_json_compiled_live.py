"""The compiled JSON writer against its reference on a live stream: the messages of a real
pgoutput slot (wide types, NaN/±Infinity, big and negative numerics, unicode and control
characters, arrays, NULLs) replayed through the connector's whole per-event path
(``bench.pg_drain_replay``), every key and value record written by both paths."""

from __future__ import annotations

import functools
import uuid
from decimal import Decimal as D
from typing import Any

import orjson
import psycopg
import pytest

from bench.pg_drain_replay import record, replay
from cdc.converters import _json_c as writer  # built by the install
from cdc.converters import json as jc
from cdc.pipeline import delivery
from tests.integration import pg_cleanup
from tests.integration.conftest import PgInfo

pytestmark = pytest.mark.postgres

TABLE = """
CREATE TABLE items (
  id bigint PRIMARY KEY, t text, uni varchar(40), n numeric(12,3), nv numeric,
  big numeric(38,0), f float8, r float4, b boolean, ts timestamptz, tsn timestamp, d date,
  tm time, j jsonb, arr int[], tarr text[], narr numeric(6,2)[], by bytea, u uuid,
  iv interval, m money, nulls text
)"""

INSERTS = [
    "INSERT INTO items VALUES (1, E'tab\\tnew\\nline\\\\ \"q\" \\x01', 'héllo 日本 🦀', 12.5, "
    "'NaN', 99999999999999999999999999999999999999, 'Infinity', '-Infinity', true, "
    "'2024-02-29 23:59:59.123456+00', '0001-01-01 00:00:00', '0001-01-01 BC', '23:59:59.999999', "
    "'{\"k\": [1, \"é\", 2.5]}', '{1,NULL,3}', '{\"a,b\",\"\"}', '{1.50,NULL,-2.25}', "
    "'\\x00ff10', gen_random_uuid(), '1 year 2 mons 3 days 04:05:06.7', '-$1,234.56', NULL)",
    "INSERT INTO items (id, t, n, nv, big, f, r, ts) SELECT g, repeat('x✓', g), -g / 7.0, "
    "g * 1e-9, -(10::numeric ^ 37) + g, -g * 1.5e300, g * 1e-7, now() "
    "FROM generate_series(2, 150) g",
    "INSERT INTO items (id, f, r, nv) VALUES (151, 'NaN', 'NaN', 0), (152, 0.1, -0.0, -0.000)",
]
ROWS = 152


@pytest.fixture
def live(postgres: PgInfo) -> Any:
    db = f"tm_jsonc_{uuid.uuid4().hex[:8]}"
    env = {
        "TIDEMARK_PG_HOST": postgres.host,
        "TIDEMARK_PG_PORT": str(postgres.port),
        "TIDEMARK_PG_USER": postgres.user,
        "TIDEMARK_PG_PASSWORD": postgres.password,
    }
    pg_cleanup.create_database(postgres.dsn("postgres"), db)
    try:
        with psycopg.connect(postgres.dsn("postgres"), autocommit=True) as c:
            # the connector asks its walsender for this; the recording session gets it here
            c.execute(f'ALTER DATABASE "{db}" SET IntervalStyle = iso_8601')
        with psycopg.connect(postgres.dsn(db), autocommit=True) as c:
            c.execute(TABLE)
            c.execute("CREATE PUBLICATION bench_pub FOR TABLE items")
            c.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (db,))
            for sql in INSERTS:
                c.execute(sql.encode())
        yield env, db, record(env, db, db, ROWS)
    finally:
        pg_cleanup.drop_database(postgres.dsn("postgres"), db)


def test_a_live_stream_gives_the_reference_bytes(
    live: tuple[dict[str, str], str, list[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    env, db, messages = live
    # the writer also under TIDEMARK_PURE_PYTHON=1, as in tests/unit/test_json_compiled.py
    writer.configure(functools.partial(orjson.dumps, default=jc._default), orjson.dumps, D)
    monkeypatch.setattr(jc, "_c", writer)
    monkeypatch.setattr(jc, "_encode", writer.encode)
    compiled_from_connect = jc.JsonConverter.from_connect
    seen = {"records": 0, "written": 0, "non_finite": 0}

    def both(self: jc.JsonConverter, topic: str, schema: Any, value: Any, **kw: Any) -> Any:
        got = compiled_from_connect(self, topic, schema, value, **kw)
        reference = jc.JsonConverter(
            {
                "schemas.enable": str(self.schemas_enable).lower(),
                "decimal.format": self.decimal_format,
                "replace.null.with.default": str(self._rewriter.replace_null_with_default),
            }
        )
        with monkeypatch.context() as m:
            m.setattr(jc, "_c", None)
            want = compiled_from_connect(reference, topic, schema, value, **kw)
        assert got == want
        seen["records"] += 1
        seen["written"] += self._by_id[id(schema)][4] is not None
        seen["non_finite"] += b'"NaN"' in got or b'Infinity"' in got
        return got

    monkeypatch.setattr(jc.JsonConverter, "from_connect", both)
    # every record through from_connect: the send loop's compiled run (send_json) would
    # write the cached schemas' records with the same plans without calling it
    # (tests/unit/test_send_loop.py holds that run to from_connect's bytes)
    monkeypatch.setattr(delivery, "compiled_send", lambda key, value: None)
    replay(env, db, messages, ROWS)
    # a key and a value per row, each by the compiled writer; the NaN/Infinity rows were there
    assert seen == {"records": 2 * ROWS, "written": 2 * ROWS, "non_finite": 2}
