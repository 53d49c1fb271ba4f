"""Legal values that stopped capture or arrived wrong (issue 25, PostgreSQL): wide numerics,
geometric columns, intervals beyond int64, unchanged TOASTed arrays and hstore, money as a
decimal string, empty bit varying, 2-D arrays and tsvector, through a real snapshot and real
streaming."""

from __future__ import annotations

import base64
import decimal
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.conftest import PgInfo
from tests.integration.pg_harness import Event, PgHarness, read_topic

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]

INT64_MAX = 2**63 - 1


@pytest.fixture(scope="module")
def h(postgres: PgInfo, kafka: str) -> Iterator[PgHarness]:
    with PgHarness(postgres, kafka, f"tm_edge_{uuid.uuid4().hex[:8]}") as harness:
        yield harness


def capture(
    h: PgHarness, cfg: dict[str, Any], table: str, stream: list[str], count: int
) -> list[Event]:
    """Snapshot what is there, then run ``stream`` while streaming."""
    with h.running(cfg) as run:
        h.wait_streaming(run)
        h.sql(*stream)
        events = read_topic(h.kafka, h.topic(cfg, table), min_count=count)
    assert run.errors == []
    return events


def unscaled(value: dict[str, Any] | str, scale: int) -> decimal.Decimal:
    """A Connect Decimal as the JSON converter writes it (base64 of the unscaled bytes)."""
    raw = base64.b64decode(value) if isinstance(value, str) else value
    exact = decimal.Context(prec=100)
    return decimal.Decimal(int.from_bytes(raw, "big", signed=True)).scaleb(-scale, exact)


def test_wide_numerics_geometric_columns_and_huge_intervals(h: PgHarness) -> None:
    h.sql(
        "CREATE TABLE wide (id int PRIMARY KEY, n38 numeric(38,0), n30 numeric(30,2), "
        "n40 numeric(40,10), b box, l lseg, iv interval)",
        f"INSERT INTO wide VALUES (1, {'9' * 38}, {'9' * 28}.99, -{'9' * 30}.{'9' * 10}, "
        "'((1,2),(3,4))', '[(0,0),(1,1)]', '178000000 years')",
    )
    cfg = h.config(table_include_list="public.wide")
    events = capture(
        h,
        cfg,
        "wide",
        [
            f"INSERT INTO wide VALUES (2, -{'9' * 38}, 0.01, 1.5, '((0,0),(1,1))', "
            "'[(1,1),(2,2)]', '-178000000 years')",
            "UPDATE wide SET b = '((5,5),(6,6))', n38 = 1 WHERE id = 1",
        ],
        3,
    )
    assert [(e.op, e.key["id"]) for e in events] == [("r", 1), ("c", 2), ("u", 1)]
    read, created, updated = (e.after for e in events)
    for row in (read, created, updated):
        assert "b" not in row and "l" not in row  # as Debezium: an unknown type is omitted
    assert unscaled(read["n38"], 0) == decimal.Decimal("9" * 38)
    assert unscaled(read["n30"], 2) == decimal.Decimal("9" * 28 + ".99")
    assert unscaled(read["n40"], 10) == decimal.Decimal("-" + "9" * 30 + "." + "9" * 10)
    assert unscaled(created["n38"], 0) == decimal.Decimal("-" + "9" * 38)
    assert read["iv"] == INT64_MAX and created["iv"] == -(2**63)
    assert unscaled(updated["n38"], 0) == 1


PLACEHOLDER = "__debezium_unavailable_value"
BIG_INTS = "(SELECT array_agg(g) FROM generate_series(1, 5000) g)"
BIG_DATES = "(SELECT array_agg(DATE '2000-01-01' + g) FROM generate_series(1, 5000) g)"
BIG_HSTORE = (
    "(SELECT hstore(array_agg(md5(g::text)), array_agg(md5(g::text))) "
    "FROM generate_series(1, 400) g)"
)


@pytest.mark.parametrize("hstore_mode", ["map", "json"])
def test_unchanged_toasted_arrays_and_hstore_are_placeholders(
    h: PgHarness, hstore_mode: str
) -> None:
    """REPLICA IDENTITY DEFAULT: an update that leaves TOASTed int[], date[] and hstore alone
    must not look like it set them to NULL."""
    table = f"toasted_{hstore_mode}"
    h.sql(
        "CREATE EXTENSION IF NOT EXISTS hstore",
        f"CREATE TABLE {table} (id int PRIMARY KEY, n int, ia int[], da date[], hs hstore)",
        f"ALTER TABLE {table} ALTER ia SET STORAGE EXTERNAL, ALTER da SET STORAGE EXTERNAL, "
        "ALTER hs SET STORAGE EXTERNAL",
        f"INSERT INTO {table} VALUES (1, 0, {BIG_INTS}, {BIG_DATES}, {BIG_HSTORE})",
    )
    cfg = h.config(table_include_list=f"public.{table}", hstore_handling_mode=hstore_mode)
    events = capture(
        h,
        cfg,
        table,
        [
            f"UPDATE {table} SET n = 1",
            f"UPDATE {table} SET n = 2, ia = NULL, da = NULL, hs = NULL",
        ],
        3,
    )
    read, toasted, nulled = (e.after for e in events)
    assert len(read["ia"]) == 5000 and len(read["da"]) == 5000
    placeholder_bytes = list(PLACEHOLDER.encode())
    assert toasted["n"] == 1
    assert toasted["ia"] == placeholder_bytes  # Debezium's int[] placeholder
    assert toasted["da"] == placeholder_bytes  # as Debezium 3.6 (parity run)
    if hstore_mode == "map":
        assert toasted["hs"] == {PLACEHOLDER: PLACEHOLDER}
    else:
        assert toasted["hs"] == f'{{"{PLACEHOLDER}":"{PLACEHOLDER}"}}'
    assert (nulled["ia"], nulled["da"], nulled["hs"]) == (None, None, None)


def test_money_strings_empty_varbit_and_two_dimensional_arrays(h: PgHarness) -> None:
    h.sql(
        "CREATE TABLE misc (id int PRIMARY KEY, m money, vb varbit, grid int[][], flat int[])",
        "INSERT INTO misc VALUES (1, '92233720368547758.07', '', '{{1,2},{3,4}}', '{{5,6},{7,8}}')",
    )
    cfg = h.config(table_include_list="public.misc", decimal_handling_mode="string")
    events = capture(
        h,
        cfg,
        "misc",
        [
            "INSERT INTO misc VALUES (2, '-92233720368547758.08', B'', '{9,10}', '{{1},{2}}')",
            "UPDATE misc SET vb = B'101' WHERE id = 1",
        ],
        3,
    )
    read, created, updated = (e.after for e in events)
    assert read["m"] == "92233720368547758.07" and created["m"] == "-92233720368547758.08"
    assert read["vb"] == "" and created["vb"] == ""  # base64 of no bytes
    assert updated["vb"] == base64.b64encode(b"\x05").decode()
    assert read["grid"] == [[1, 2], [3, 4]] and created["grid"] == [[9, 10]]
    assert read["flat"] == [5, 6, 7, 8] and created["flat"] == [1, 2]


@pytest.mark.parametrize("envelope", ["3", "1.2"])
def test_tsvector_per_envelope_version(h: PgHarness, envelope: str) -> None:
    table = "tsv_" + envelope.replace(".", "")
    h.sql(
        f"CREATE TABLE {table} (id int PRIMARY KEY, doc tsvector)",
        f"INSERT INTO {table} VALUES (1, to_tsvector('english', 'The fat cats ate rats'))",
    )
    cfg = h.config(table_include_list=f"public.{table}", envelope_version=envelope)
    events = capture(h, cfg, table, [f"INSERT INTO {table} VALUES (2, 'a:1 b:2,3 c'::tsvector)"], 2)
    read, created = (e.after for e in events)
    if envelope == "3":  # Debezium 3.6: io.debezium.data.Tsvector, the server's text
        assert read["doc"] == "'ate':4 'cat':3 'fat':2 'rat':5"
        assert created["doc"] == "'a':1 'b':2,3 'c'"
    else:  # Debezium 1.2 does not know the type and leaves the column out
        assert "doc" not in read and "doc" not in created


@pytest.mark.parametrize("include", ["false", "true"])
def test_a_type_with_no_mapping_never_stops_capture(h: PgHarness, include: str) -> None:
    """A column whose type the connector has no mapping for (a composite type) with
    ``include.unknown.datatypes``: false (Debezium's default) leaves the column out of the
    value and its schema, true carries its text form as bytes; the row's other columns arrive
    either way (a range, which Debezium maps to its text, beside it), from the snapshot and
    from streaming."""
    table = f"unmapped_{include}"
    h.sql(
        "DO $$ BEGIN CREATE TYPE pair AS (a int, b text); "
        "EXCEPTION WHEN duplicate_object THEN NULL; END $$",
        f"CREATE TABLE {table} (id int PRIMARY KEY, p pair, r int4range, v text)",
        f"INSERT INTO {table} VALUES (1, ROW(1, 'one'), '[1,5)', 'snap')",
    )
    cfg = h.config(table_include_list=f"public.{table}", include_unknown_datatypes=include)
    events = capture(
        h, cfg, table, [f"INSERT INTO {table} VALUES (2, ROW(2, 'two'), '[2,9)', 'live')"], 2
    )
    assert [(e.op, e.after["id"], e.after["r"], e.after["v"]) for e in events] == [
        ("r", 1, "[1,5)", "snap"),
        ("c", 2, "[2,9)", "live"),
    ]
    for e, text in zip(events, ("(1,one)", "(2,two)"), strict=True):
        if include == "false":
            assert "p" not in e.after, e.after
        else:
            assert base64.b64decode(e.after["p"]).decode() == text, e.after
