"""The PostgreSQL connector's non-default value and column options against Debezium 3.6's.

Debezium's PostgreSQL connector in a real Kafka Connect worker and tidemark
(``envelope.version=3``) capture the same tables with the same options (``smt_parity.py``):
``decimal.handling.mode=string``, ``time.precision.mode=connect``,
``binary.handling.mode=hex``, ``interval.handling.mode=string``,
``column.propagate.source.type`` and
``datatype.propagate.source.type`` (the ``__debezium.source.column.*`` schema parameters
JDBC sinks read), ``column.mask.with.N.chars``, ``column.truncate.to.N.chars``,
``column.mask.hash.SHA-256.with.salt.S``, ``message.key.columns`` and
``tombstones.on.delete=false``. Every record of every topic must match, schemas included,
after a snapshot, inserts, updates, a key change and deletes. Two differences are
deliberate and normalized or avoided: a NULL in a masked column stays null in tidemark
(Debezium writes the mask), and a column matching several rules gets all of them in
tidemark (Debezium only the first: a propagated column is never hashed there).

Never skipped: if Kafka Connect or its Java runtime cannot be resolved, the test fails.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import PgInfo
from tests.integration.smt_parity import Scenario, run_parity

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]

TABLES = {
    "opt_a": "id int PRIMARY KEY, name varchar(20), price numeric(10,3), big numeric, "
    "secret text, note varchar(50), raw bytea, at timestamp(3), atz timestamptz, d date, "
    "t time, span interval, code char(4)",
    "opt_b": "id int PRIMARY KEY, code varchar(10) NOT NULL, qty smallint",
    # every column's type, length and scale propagated (not an unconstrained numeric:
    # Debezium itself reports it as length 0 without scale in snapshot events and as
    # 131089, 0 in streamed ones; see docs/postgres.md)
    "opt_t": "id int PRIMARY KEY, c_int2 int2, c_int8 int8, c_f4 real, c_f8 double precision, "
    "c_num2 numeric(12,4), c_bool boolean, c_char char(3), c_char1 char, "
    "c_vc varchar(7), c_vcn varchar, c_text text, c_bytea bytea, c_date date, c_time time, "
    "c_time3 time(3), c_timetz timetz, c_ts timestamp, c_ts3 timestamp(3), "
    "c_tstz timestamptz, c_tstz0 timestamptz(0), c_iv interval, c_uuid uuid, c_json json, "
    "c_jsonb jsonb, c_xml xml, c_money money, c_bit bit(3), c_vbit varbit(5), c_inet inet, "
    "c_cidr cidr, c_mac macaddr, c_ai int4[], c_at text[], c_point point, c_oid oid, "
    "c_int4r int4range, c_tsv tsvector",
}

BEFORE = [
    "INSERT INTO opt_a VALUES (1, 'alice', 12.345, 1e20, 'topsecret', 'a long note here', "
    "'\\x00ff', '2024-01-05 10:20:30.123', '2024-01-05 10:20:30+02', '2024-01-05', "
    "'10:20:30', '1 year 2 months 3 days 04:05:06.5', 'ab')",
    "INSERT INTO opt_b VALUES (1, 'K1', 5), (2, 'K2', NULL)",
    "INSERT INTO opt_t (id, c_int2, c_num2, c_tstz0, c_ai) VALUES "
    "(1, 7, 1.5, '2024-01-05 10:20:30+00', '{1,2}')",
]

CHANGES = [
    ["UPDATE opt_a SET price = -0.001, big = 0.5, span = '-3 days' WHERE id = 1"],
    [
        "INSERT INTO opt_a VALUES (2, NULL, NULL, NULL, 'x', 'ab', '', '1969-12-31 23:59:59.999', "
        "NULL, '1960-02-29', '23:59:59.999', NULL, NULL)"
    ],
    ["UPDATE opt_b SET qty = 6 WHERE id = 1"],
    ["UPDATE opt_b SET code = 'K9' WHERE id = 2"],
    ["UPDATE opt_a SET id = 20 WHERE id = 2"],
    ["DELETE FROM opt_b WHERE id = 1"],
    ["DELETE FROM opt_a WHERE id = 1"],
    ["INSERT INTO opt_a (id, name) VALUES (9999, 'sentinel')"],
    ["INSERT INTO opt_b VALUES (9999, 'sentinel', 0)"],
    ["INSERT INTO opt_t (id, c_text) VALUES (9999, 'sentinel')"],
]

OPTIONS = {
    "decimal.handling.mode": "string",
    "time.precision.mode": "connect",
    "binary.handling.mode": "hex",
    "interval.handling.mode": "string",
    # not opt_a.code: Debezium applies only the first rule that matches a column (truncate,
    # mask, propagate, hash, in that order), so a propagated column is never hashed there;
    # tidemark applies every matching rule (docs/transforms.md)
    "column.propagate.source.type": r".*\.opt_a\.(name|price),.*\.opt_t\..*",
    "datatype.propagate.source.type": r".+\.INT2",
    "column.mask.with.4.chars": r"public\.opt_a\.secret",
    "column.truncate.to.3.chars": r"public\.opt_a\.note",
    "column.mask.hash.SHA-256.with.salt.pepper": r"public\.opt_a\.code",
    "message.key.columns": "public.opt_b:code",
    "tombstones.on.delete": "false",
}


def _masked_nulls(topic: str, doc: Any) -> Any:
    """Debezium's mask replaces a NULL too (its converter ignores the value); tidemark keeps
    a NULL null (docs/postgres.md). Read tidemark's null ``secret`` as the mask."""
    if topic != "<prefix>.public.opt_a" or not isinstance(doc, dict):
        return doc
    payload = doc.get("payload")
    if not isinstance(payload, dict):
        return doc
    out = dict(payload)
    for side in ("before", "after"):
        row = out.get(side)
        if isinstance(row, dict) and row.get("secret") is None:
            out[side] = {**row, "secret": "****"}
    return {**doc, "payload": out}


def test_connector_options_match_debezium(
    postgres: PgInfo, kafka: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    scenario = Scenario(
        TABLES,
        BEFORE,
        CHANGES,
        4,
        3,
        tidemark_config={"envelope.version": "3"},
        normalize=_masked_nulls,
    )
    diffs = run_parity(postgres, kafka, tmp_path, request, OPTIONS, scenario, jvm="kafka-connect")
    assert not diffs, "records differ:\n\n" + "\n\n".join(diffs)


TABLES_2 = {
    "opt_c": 'id int PRIMARY KEY, "weird-col" text, price numeric(10,3), m money, '
    "raw bytea, t time(6), tt timetz, hidden text",
    "opt_d": "id int PRIMARY KEY, v text",
}

BEFORE_2 = [
    "INSERT INTO opt_c VALUES (1, 'w', 12.345, 9.99, '\\xfbff', '10:20:30.123456', "
    "'10:20:30+02', 'h'), (2, 'skip me', 0, 0, '', '00:00', '00:00+00', 'h')",
    "INSERT INTO opt_d VALUES (1, 'a'), (2, 'b')",
]

CHANGES_2 = [
    ["UPDATE opt_c SET price = 1.5, m = -1.25 WHERE id = 1"],
    ["INSERT INTO opt_c (id, \"weird-col\", t) VALUES (3, 'x', '23:59:59.999999')"],
    ["UPDATE opt_d SET v = 'changed' WHERE id = 1"],
    ["DELETE FROM opt_d WHERE id = 2"],
    ["INSERT INTO opt_c (id, \"weird-col\") VALUES (9999, 'sentinel')"],
    ["INSERT INTO opt_d VALUES (9999, 'sentinel')"],
]

OPTIONS_2 = {
    "decimal.handling.mode": "double",
    "binary.handling.mode": "base64-url-safe",
    "time.precision.mode": "adaptive_time_microseconds",
    "column.exclude.list": r"public\.opt_c\.hidden",
    "skipped.operations": "u",
    "field.name.adjustment.mode": "avro",
    "schema.name.adjustment.mode": "avro",
    "snapshot.select.statement.overrides": "public.opt_c",
    "snapshot.select.statement.overrides.public.opt_c": "SELECT * FROM public.opt_c WHERE id <> 2",
    "money.fraction.digits": "2",
}


def test_more_connector_options_match_debezium(
    postgres: PgInfo, kafka: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """decimal as double, url-safe base64, adaptive_time_microseconds, an excluded column,
    skipped updates, avro name adjustment of a field named ``weird-col``, a snapshot select
    override that leaves a row out. (Not ``include.unknown.datatypes``: Debezium writes an
    unknown type's snapshot value as the JDBC driver's object prints it, ``(1.0,1.0),...``
    for a box, and its streamed value as the server's text, ``(1,1),...``; tidemark writes
    the server's text in both.)"""
    scenario = Scenario(
        TABLES_2, BEFORE_2, CHANGES_2, 3, 2, tidemark_config={"envelope.version": "3"}
    )
    diffs = run_parity(postgres, kafka, tmp_path, request, OPTIONS_2, scenario, jvm="kafka-connect")
    assert not diffs, "records differ:\n\n" + "\n\n".join(diffs)


def test_unicode_name_adjustment_matches_debezium(
    postgres: PgInfo, kafka: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """``avro_unicode`` for schema and field names: Debezium escapes ``_`` too
    (``opt_u`` → ``opt_u005fu``), a leading ``_`` or digit, ``-`` and non-ASCII letters."""
    scenario = Scenario(
        {"opt_u": 'id int PRIMARY KEY, "weird-col" text, "größe" int, "_lead" text, "x_1" text'},
        ["INSERT INTO opt_u VALUES (1, 'w', 3, 'l', 'x')"],
        [
            ['UPDATE opt_u SET "größe" = 4 WHERE id = 1'],
            ["INSERT INTO opt_u (id, x_1) VALUES (9999, 'sentinel')"],
        ],
        1,
        1,
        tidemark_config={"envelope.version": "3"},
    )
    options = {
        "field.name.adjustment.mode": "avro_unicode",
        "schema.name.adjustment.mode": "avro_unicode",
    }
    diffs = run_parity(postgres, kafka, tmp_path, request, options, scenario, jvm="kafka-connect")
    assert not diffs, "records differ:\n\n" + "\n\n".join(diffs)


def test_extension_types_match_debezium(
    postgres: PgInfo, kafka: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """hstore as a map, citext, ltree, an enum, an array of it and a domain, with every
    column's source type propagated (a domain is named after itself, sized by its base)."""
    scenario = Scenario(
        {
            "ex": "id int PRIMARY KEY, h hstore, c citext, l ltree, m mood, p posint, "
            "ma mood[], v text"
        },
        [
            "INSERT INTO ex VALUES (1, 'a=>1, b=>NULL', 'MiXed', 'top.mid.leaf', 'ok', 5, "
            "'{ok,sad}', 'x')"
        ],
        [
            ["UPDATE ex SET h = '', m = 'sad', p = 7 WHERE id = 1"],
            ["INSERT INTO ex (id, v) VALUES (9999, 'sentinel')"],
        ],
        1,
        1,
        tidemark_config={"envelope.version": "3"},
        setup=[
            "CREATE EXTENSION IF NOT EXISTS hstore",
            "CREATE EXTENSION IF NOT EXISTS citext",
            "CREATE EXTENSION IF NOT EXISTS ltree",
            "CREATE TYPE mood AS ENUM ('sad', 'ok')",
            "CREATE DOMAIN posint AS int CHECK (VALUE > 0)",
        ],
    )
    options = {"hstore.handling.mode": "map", "column.propagate.source.type": r".*\.ex\..*"}
    diffs = run_parity(postgres, kafka, tmp_path, request, options, scenario, jvm="kafka-connect")
    assert not diffs, "records differ:\n\n" + "\n\n".join(diffs)
