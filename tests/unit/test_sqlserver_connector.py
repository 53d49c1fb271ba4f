"""The SQL Server connector's registration, configuration and setup errors that need no
server: the plugin names, several databases, a missing ODBC driver naming its Debian
package, the ODBC connection string, the type mapping."""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import pytest

from cdc.errors import ConfigError
from cdc.schema import logical
from cdc.schema.model import BOOLEAN, INT16, STRING
from cdc.spi import Column, Table, TableId
from connectors.sqlserver import SqlServerConnector
from connectors.sqlserver import connection as ssconn
from connectors.sqlserver.config import CONFIG_DEF, database_names, parse_config
from connectors.sqlserver.types import Modes, SqlServerValueConverters
from worker.registry import Registry

BASE = {
    "name": "c",
    "database.server.name": "server1",
    "database.hostname": "db.example",
    "database.user": "debezium",
    "database.password": "p;w{d",
    "database.names": "testDB",
}


def test_registered_under_both_names() -> None:
    registry = Registry()
    for name in ("sqlserver", "io.debezium.connector.sqlserver.SqlServerConnector"):
        plugin = registry.resolve(name)
        assert plugin.cls is SqlServerConnector


def test_several_databases_are_accepted_duplicates_refused_naming_the_key() -> None:
    cfg = parse_config({**BASE, "database.names": "a, b"})
    assert database_names(cfg) == ["a", "b"]
    assert SqlServerConnector({**BASE, "database.names": "a,b"}).topics_include_database
    assert not SqlServerConnector(BASE).topics_include_database
    with pytest.raises(ConfigError, match=r"database\.names: lists database 'A' twice"):
        parse_config({**BASE, "database.names": "a,b,A"})
    with pytest.raises(ConfigError, match=r"database\.names: is required"):
        parse_config({k: v for k, v in BASE.items() if k != "database.names"})
    assert parse_config({**BASE, "database.names": None, "database.dbname": "old"})


def test_missing_odbc_driver_names_the_debian_package(monkeypatch: pytest.MonkeyPatch) -> None:
    import pyodbc  # type: ignore[import-not-found,unused-ignore]

    monkeypatch.setattr(pyodbc, "drivers", lambda: [])
    with pytest.raises(ConfigError) as err:
        ssconn.check_driver(CONFIG_DEF.parse(BASE))
    assert "database.odbc.driver" in str(err.value)
    assert "apt-get install tdsodbc" in str(err.value)
    standin = CONFIG_DEF.parse({**BASE, "sqlserver.dialect": "postgres-standin"})
    with pytest.raises(ConfigError, match=r"apt-get install odbc-postgresql"):
        ssconn.check_driver(standin)


def test_connection_string_escapes_and_passes_tls_options() -> None:
    cfg = CONFIG_DEF.parse(
        {**BASE, "database.encrypt": "true", "database.trustServerCertificate": "true"}
    )
    cs = ssconn.connection_string(cfg, "FreeTDS")
    assert cs.startswith("DRIVER={FreeTDS};SERVER=db.example;PORT=1433;DATABASE=testDB;")
    assert "PWD={p;w{d}" in cs and "TDS_Version=7.4" in cs
    assert "Encrypt=yes" in cs and "TrustServerCertificate=yes" in cs


@pytest.mark.parametrize(
    "key", ["database.names", "database.user", "database.password", "database.tds.version"]
)
def test_a_value_that_could_end_its_braces_is_refused(key: str) -> None:
    """FreeTDS ends a braced value at the first '};': 'd};DumpFile=/path;X={' as a database
    name made the driver overwrite /path with its trace, before any login."""
    raw = {**BASE, key: "d};DumpFile=/tmp/victim;X={"}
    assert key in dict(CONFIG_DEF.validate(raw)[1])
    cfg = CONFIG_DEF.parse(BASE)
    cfg.values[key] = [raw[key]] if key == "database.names" else raw[key]
    with pytest.raises(ConfigError, match="may not contain '}'"):
        ssconn.connection_string(cfg, "FreeTDS")
    with pytest.raises(ConfigError, match="may not contain '}'"):
        ssconn.connection_string(CONFIG_DEF.parse(BASE), "FreeTDS", "x};Port=2;y={")


def col(type_name: str, length: int | None = None, scale: int | None = None) -> Column:
    return Column("c", 0, type_name, length=length, scale=scale)


def convert(column: Column, value: Any, **modes: str) -> tuple[Any, Any]:
    conv = SqlServerValueConverters(Modes(**modes))
    table = Table(TableId("db", "dbo", "t"), (column,))
    schema, fn = conv.schema_for(table, column), conv.converter_for(table, column)
    return schema, (fn(value) if fn else value)


def test_type_mapping_follows_debeziums_table() -> None:
    assert convert(col("bit"), True) == (BOOLEAN, True)
    assert convert(col("tinyint"), 200) == (INT16, 200)
    when = dt.datetime(2020, 1, 1, 10, 0, 0, 123456)
    assert convert(col("datetime"), when)[0] == logical.timestamp_millis()
    assert convert(col("datetime2", scale=7), when) == (
        logical.nano_timestamp(),
        1577872800123456000,
    )
    assert convert(col("datetime2", scale=6), when)[0] == logical.micro_timestamp()
    assert convert(col("datetime2", scale=7), when, time_precision="connect")[1] == 1577872800123
    assert convert(col("time", scale=7), dt.time(1, 2, 3, 4))[1] == 3723000004000
    zoned = dt.datetime(2020, 1, 1, 10, 0, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert convert(col("datetimeoffset", scale=7), zoned) == (
        logical.zoned_timestamp(),
        "2020-01-01T10:00:00+02:00",
    )
    money = decimal.Decimal("12.5")
    assert convert(col("money"), money) == (
        logical.connect_decimal(4, 19),
        decimal.Decimal("12.5000"),
    )
    assert convert(col("smallmoney"), money, decimal="string") == (STRING, "12.5")
    # Java's ISO formatter and BigDecimal.toPlainString: no trailing zeros in the fraction,
    # no exponent in a decimal's text
    tenth = dt.datetime(2020, 1, 1, 10, 0, 0, 100000, tzinfo=dt.timezone(dt.timedelta(hours=5.5)))
    assert convert(col("datetimeoffset", scale=7), tenth)[1] == "2020-01-01T10:00:00.1+05:30"
    tiny = decimal.Decimal("1E-10")
    assert convert(col("decimal", length=10, scale=10), tiny, decimal="string")[1] == (
        "0.0000000001"
    )
    assert convert(col("uniqueidentifier"), "ce83f479-0576-467b-9b21-c98dcb2c4f63")[1] == (
        "CE83F479-0576-467B-9B21-C98DCB2C4F63"
    )
    assert convert(col("varbinary"), b"\x01\xff", binary="hex") == (STRING, "01ff")
    assert convert(col("xml"), "<a/>") == (logical.xml(), "<a/>")
    assert convert(col("geography"), b"") == (None, b"")


def odbc_error(state: str, text: str) -> Exception:
    import pyodbc  # type: ignore[import-not-found,unused-ignore]

    return pyodbc.Error(state, text)  # type: ignore[no-any-return,unused-ignore]


def test_driver_errors_are_classified_and_name_what_to_fix() -> None:
    from cdc.errors import ErrorKind
    from connectors.sqlserver.errors import ERRORS

    lost = odbc_error("08S01", "[08S01] [FreeTDS][SQL Server]Communication link failure (20004)")
    assert ERRORS.classify(lost) is ErrorKind.RETRIABLE
    terminated = odbc_error(
        "57P01", "FATAL: terminating connection; The connection has been lost (35)"
    )
    assert ERRORS.classify(terminated) is ErrorKind.RETRIABLE  # the stand-in's lost session
    victim = odbc_error("40001", "Transaction (Process ID 57) was deadlocked ... (1205)")
    assert ERRORS.classify(victim) is ErrorKind.RETRIABLE
    login = odbc_error("28000", "[28000] Login failed for user 'debezium'. (18456)")
    assert ERRORS.classify(login) is ErrorKind.CONFIG
    assert "database.user: login failed" in str(ERRORS.translate(login))
    denied = odbc_error(
        "42000", "The SELECT permission was denied on the object 'change_tables' (229)"
    )
    message = str(ERRORS.translate(denied))
    assert "database.user" in message and "db_owner" in message and "@role_name" in message
    snapshot = odbc_error(
        "HY000", "Snapshot isolation transaction failed accessing database 'testDB' (3952)"
    )
    assert "snapshot.isolation.mode" in str(ERRORS.translate(snapshot))
    assert "ALLOW_SNAPSHOT_ISOLATION ON" in str(ERRORS.translate(snapshot))


def test_source_block_per_envelope_version() -> None:
    v12 = SqlServerConnector(BASE).source_schema()
    assert v12.name == "io.debezium.connector.sqlserver.Source"
    assert v12.field_names()[5:] == [
        "db",
        "schema",
        "table",
        "change_lsn",
        "commit_lsn",
        "event_serial_no",
    ]
    v3 = SqlServerConnector({**BASE, "envelope.version": "3"}).source_schema()
    assert v3.field_names() == [
        "version",
        "connector",
        "name",
        "ts_ms",
        "snapshot",
        "db",
        "sequence",
        "ts_us",
        "ts_ns",
        "schema",
        "table",
        "change_lsn",
        "commit_lsn",
        "event_serial_no",
    ]


class _Cursor:
    def __init__(self, log: list[tuple[str, str, int]], db: str) -> None:
        self.log, self.db = log, db

    def execute(self, sql: str, *params: Any) -> None:
        self.log.append((self.db, sql, len(params)))
        self.keys = [params[i : i + 2] for i in range(0, len(params), 2)]

    def fetchall(self) -> list[tuple[Any, ...]]:
        return [(*k, f"{self.db}:{k[0]}") for k in self.keys]

    def close(self) -> None:
        pass


class _Conn:
    def __init__(self, log: list[tuple[str, str, int]], db: str) -> None:
        self.log, self.db = log, db

    def cursor(self) -> _Cursor:
        return _Cursor(self.log, self.db)

    def close(self) -> None:
        self.log.append((self.db, "closed", 0))


def test_reselector_reads_each_table_in_its_database_within_the_parameter_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two key columns, 1,500 keys: SQL Server takes at most 2,100 parameters, so two
    queries; each database's table on that database's own connection."""
    from connectors.sqlserver import reselect

    log: list[tuple[str, str, int]] = []
    monkeypatch.setattr(reselect, "connect", lambda cfg, database: _Conn(log, database))
    conn = SqlServerConnector({**BASE, "database.names": "sales,hr"})
    r = conn.reselector()
    cols = (Column("a", 0, "int"), Column("b", 1, "int"), Column("note", 2, "nvarchar"))
    keys = [(i, i) for i in range(1500)]
    sales = Table(TableId("sales", "dbo", "t"), cols, ("a", "b"))
    got = r.fetch(sales, ["a", "b"], keys, ["note"])
    assert got[(7, 7)] == ("sales:7",) and len(got) == 1500
    assert [(db, n) for db, _sql, n in log] == [("sales", 2000), ("sales", 1000)]
    assert log[0][1].startswith("SELECT [a], [b], [note] FROM [dbo].[t] WHERE ([a] = ? AND")
    assert r.fetch(Table(TableId("hr", "dbo", "t"), cols, ("a", "b")), ["a"], [(1,)], ["note"])
    assert log[-1][0] == "hr"
    r.close()
    assert [db for db, sql, _n in log if sql == "closed"] == ["sales", "hr"]
