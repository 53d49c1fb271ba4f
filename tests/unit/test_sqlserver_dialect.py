"""Every statement the SQL Server connector sends is T-SQL: parsed with sqlglot's ``tsql``
dialect, and the stand-in's dialect differs from it only where the seam says."""

from __future__ import annotations

import inspect
import re
from typing import Any

import pytest
import sqlglot
from sqlglot import exp

from connectors.sqlserver.dialect import STANDIN, TSQL, Dialect

#: arguments for the statement builders that take some
SAMPLE_ARGS: dict[str, tuple[Any, ...]] = {
    "changes": ("dbo_customers",),
    "snapshot_select": ("dbo", "customers", ["id", "first name"], ["id"]),
    "snapshot_select_after": ("dbo", "customers", ["id", "region", "v"], ["id", "region"]),
    "set_isolation": ("snapshot",),
    "lock_exclusive": ("dbo", "customers"),
    "reselect": ("dbo", "customers", ["id", "region"], ["notes"], 2),
}
#: sqlglot 30 has no grammar for SET TRANSACTION ISOLATION LEVEL (it falls back to a
#: Command); these are checked against T-SQL's documented syntax instead
SET_ISOLATION = re.compile(
    r"SET TRANSACTION ISOLATION LEVEL "
    r"(READ UNCOMMITTED|READ COMMITTED|REPEATABLE READ|SNAPSHOT|SERIALIZABLE)"
)
NOT_STATEMENTS = {"quote", "table"}


def statements(d: Dialect) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name, fn in inspect.getmembers(d, inspect.ismethod):
        if name.startswith("_") or name in NOT_STATEMENTS:
            continue
        if name == "set_isolation":
            out[name] = [fn(m) for m in d.isolation_levels]
        else:
            out[name] = [fn(*SAMPLE_ARGS.get(name, ()))]
    return out


def test_every_statement_builder_is_checked() -> None:
    found = set(statements(TSQL))
    assert {"max_lsn", "changes", "capture_instances", "snapshot_select", "transactions"} <= found
    assert len(found) >= 13


@pytest.mark.parametrize("name", sorted(statements(TSQL)))
def test_statement_is_tsql(name: str) -> None:
    for sql in statements(TSQL)[name]:
        if name == "set_isolation":
            assert SET_ISOLATION.fullmatch(sql), sql
            continue
        tree = sqlglot.parse_one(sql, read="tsql", error_level=sqlglot.ErrorLevel.RAISE)
        assert not isinstance(tree, exp.Command), f"sqlglot could not parse {sql!r}"
        assert isinstance(tree, exp.Select)


def test_changes_query_calls_the_instance_function_in_change_order() -> None:
    tree = sqlglot.parse_one(TSQL.changes("dbo_customers"), read="tsql")
    assert "fn_cdc_get_all_changes_dbo_customers" in tree.sql("tsql").lower()
    order = [o.this.name for o in tree.args["order"].expressions]
    assert order == ["__$start_lsn", "__$seqval", "__$operation"]
    assert "N'all update old'" in TSQL.changes("x")


def test_brackets_are_escaped() -> None:
    tree = sqlglot.parse_one(TSQL.snapshot_select("dbo", "a]b", ["c"]), read="tsql")
    table = tree.find(exp.Table)
    assert table is not None and (table.db, table.name) == ("dbo", "a]b")


def test_standin_differs_only_at_the_seam() -> None:
    """Same text for every statement but quoting, isolation level and the table lock."""
    tsql, standin = statements(TSQL), statements(STANDIN)
    differ = {
        n for n in tsql if [s.replace("[", '"').replace("]", '"') for s in tsql[n]] != standin[n]
    }
    assert differ == {"set_isolation", "lock_exclusive"}
    assert STANDIN.lock_exclusive("dbo", "t") == 'LOCK TABLE "dbo"."t" IN EXCLUSIVE MODE'


def test_resumed_snapshot_reads_after_the_key_in_key_order() -> None:
    """A composite key ``(a, b) > (1, 'x')`` as T-SQL can say it, parameters in order."""
    from connectors.sqlserver.dialect import after_key_args

    sql = TSQL.snapshot_select_after("dbo", "t", ["a", "b", "v"], ["a", "b"])
    assert sql == (
        "SELECT [a], [b], [v] FROM [dbo].[t] WHERE ([a] > ?) OR ([a] = ? AND [b] > ?) "
        "ORDER BY [a], [b]"
    )
    assert after_key_args([1, "x"]) == [1, 1, "x"]
    # a varchar key: the nvarchar parameter cast back, so the column's collation compares
    narrow = TSQL.snapshot_select_after("dbo", "t", ["a", "b", "v"], ["a", "b"], ["b"])
    assert narrow == (
        "SELECT [a], [b], [v] FROM [dbo].[t] WHERE ([a] > ?) OR ([a] = ? AND "
        "[b] > CAST(? AS varchar(8000))) ORDER BY [a], [b]"
    )
    assert (
        TSQL.snapshot_select("dbo", "t", ["a"], ["a"]) == "SELECT [a] FROM [dbo].[t] ORDER BY [a]"
    )
