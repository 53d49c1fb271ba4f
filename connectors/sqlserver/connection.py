"""Connecting to SQL Server (or the stand-in) through pyodbc, with errors that say what to do.

pyodbc needs unixODBC and a driver registered in ``/etc/odbcinst.ini``. For SQL Server that
is FreeTDS (Debian package ``tdsodbc``, TDS 7.4 so ``datetime2``/``datetimeoffset`` arrive as
such); Microsoft's ``msodbcsql18`` works too where installed. The stand-in is reached with
the PostgreSQL ODBC driver (Debian package ``odbc-postgresql``).
"""

from __future__ import annotations

import datetime as dt
import struct
from typing import Any

from cdc.common_config import AMBIENT_CREDENTIALS
from cdc.config import Config
from cdc.errors import ConfigError, FatalError
from connectors.sqlserver.config import database_name, odbc_safe
from connectors.sqlserver.dialect import DIALECTS, Dialect

#: the Debian package that registers each known ODBC driver name
DRIVER_PACKAGES = {
    "FreeTDS": "tdsodbc",
    "PostgreSQL Unicode": "odbc-postgresql",
    "PostgreSQL ANSI": "odbc-postgresql",
}
#: ODBC's SQL type code of datetimeoffset (SQL_SS_TIMESTAMPOFFSET), which pyodbc leaves raw
SQL_SS_TIMESTAMPOFFSET = -155


def dialect_of(cfg: Config) -> Dialect:
    return DIALECTS[cfg["sqlserver.dialect"]]


def driver_name(cfg: Config) -> str:
    if cfg["sqlserver.dialect"] == "postgres-standin" and cfg["database.odbc.driver"] == "FreeTDS":
        return "PostgreSQL Unicode"
    return str(cfg["database.odbc.driver"])


def _pyodbc() -> Any:
    try:
        import pyodbc  # type: ignore[import-not-found,unused-ignore]
    except ImportError as exc:
        if "libodbc" in str(exc):
            raise FatalError(
                "pyodbc cannot load unixODBC (libodbc.so.2): install it with "
                "`apt-get install unixodbc` and the SQL Server driver with "
                "`apt-get install tdsodbc` (FreeTDS)"
            ) from exc
        raise FatalError(
            "the SQL Server connector needs pyodbc: pip install 'tidemark[sqlserver]'"
        ) from exc
    return pyodbc


def check_driver(cfg: Config) -> str:
    """The configured ODBC driver, or a :class:`ConfigError` naming the Debian package."""
    pyodbc = _pyodbc()
    name = driver_name(cfg)
    installed = pyodbc.drivers()
    if name in installed:
        return name
    package = DRIVER_PACKAGES.get(name)
    fix = (
        f"install the Debian package {package} (apt-get install {package})"
        if package
        else "install it, or name one of the installed drivers"
    )
    raise ConfigError(
        [
            (
                "database.odbc.driver",
                f"ODBC driver {name!r} is not registered with unixODBC "
                f"(installed: {', '.join(installed) or 'none'}); {fix}",
            )
        ]
    )


def _value(text: Any) -> str:
    """An ODBC connection-string value: braces around anything with ; or braces inside (a
    '}' never gets here: see ``config.odbc_safe``)."""
    s = "" if text is None else str(text)
    if any(c in s for c in ";{}=") or s != s.strip():
        return "{" + s.replace("}", "}}") + "}"
    return s


def connection_string(cfg: Config, driver: str, database: str | None = None) -> str:
    parts: dict[str, Any] = {
        "DRIVER": "{" + driver + "}",
        "SERVER": cfg["database.hostname"],
        "PORT": cfg["database.port"],
        "DATABASE": database or database_name(cfg),
        "UID": cfg["database.user"],
        "PWD": cfg["database.password"] or "",
    }
    if cfg["sqlserver.dialect"] == "postgres-standin":
        # bit as bool, bytea as bytes, one time zone: the stand-in answers like SQL Server
        parts.update(
            BoolsAsChar=0,
            ByteaAsLongVarBinary=1,
            UseServerSidePrepare=1,
            # rows in batches through a cursor, not the whole result in memory first
            UseDeclareFetch=1,
            Fetch=cfg["snapshot.fetch.size"],
            ConnSettings="SET TimeZone TO 'UTC'; SET application_name TO 'tidemark'",
            SSLmode="require" if cfg["database.encrypt"] else "disable",
        )
    else:
        parts.update(TDS_Version=cfg["database.tds.version"], ClientCharset="UTF-8", APP="tidemark")
        if cfg["database.encrypt"]:
            parts["Encrypt"] = "yes"
        if cfg["database.trustServerCertificate"]:
            parts["TrustServerCertificate"] = "yes"
    given = {"database.names": [database]} if database else {}
    unsafe = odbc_safe({**cfg.values, **given}, cfg.raw)
    if unsafe:
        raise ConfigError(unsafe)
    return ";".join(f"{k}={v if k == 'DRIVER' else _value(v)}" for k, v in parts.items())


def datetimeoffset(raw: bytes) -> dt.datetime:
    """SQL Server's ``datetimeoffset`` as ODBC hands it over (SQL_SS_TIMESTAMPOFFSET_STRUCT:
    year, month, day, hour, minute, second, nanoseconds, offset hours and minutes)."""
    year, month, day, hour, minute, second, nanos, oh, om = struct.unpack("<6hI2h", raw)
    zone = dt.timezone(dt.timedelta(hours=oh, minutes=om))
    return dt.datetime(year, month, day, hour, minute, second, nanos // 1000, tzinfo=zone)


#: what the server says when the database does not exist: SQL Server's error 4060 (or 911),
#: PostgreSQL's (the stand-in's) "database ... does not exist"
_NO_DATABASE = ("(4060)", "(911)")


def _no_database(text: str) -> bool:
    return any(m in text for m in _NO_DATABASE) or (
        'database "' in text and "does not exist" in text
    )


#: ODBC drivers that speak to SQL Server itself and, given a login, use nothing else
SQLSERVER_DRIVERS = ("FreeTDS", "ODBC Driver 17 for SQL Server", "ODBC Driver 18 for SQL Server")


def check_no_ambient_credentials(cfg: Config, driver: str) -> None:
    """Without ambient credentials (a config written over REST): a SQL Server driver and a
    password. Another driver (psqlODBC, the stand-in's) or an empty password would let the
    driver fall back on the worker's own credentials (libpq's PGPASSWORD, ~/.pgpass and
    client certificates; Kerberos tickets)."""
    problems = []
    if driver not in SQLSERVER_DRIVERS:
        problems.append(
            (
                "database.odbc.driver",
                f"{driver!r} is not one of the SQL Server drivers "
                f"({', '.join(SQLSERVER_DRIVERS)}); connectors configured over REST use one "
                "of them",
            )
        )
    if not cfg.get("database.password"):
        problems.append(
            (
                "database.password",
                "is required for connectors configured over REST (without it the driver "
                "would try the worker's own credentials)",
            )
        )
    if problems:
        raise ConfigError(problems)


def connect(cfg: Config, *, autocommit: bool = True, database: str | None = None) -> Any:
    """A pyodbc connection to ``database`` (default: the first captured one)."""
    pyodbc = _pyodbc()
    driver = check_driver(cfg)
    if not cfg.get(AMBIENT_CREDENTIALS, True):
        check_no_ambient_credentials(cfg, driver)
    timeout = max(1, int(cfg["database.connect.timeout.ms"]) // 1000)
    name = database or database_name(cfg)
    try:
        conn = pyodbc.connect(
            connection_string(cfg, driver, name), autocommit=autocommit, timeout=timeout
        )
    except pyodbc.Error as exc:
        from connectors.sqlserver.errors import ERRORS

        if _no_database(str(exc)):
            raise ConfigError(
                [
                    (
                        "database.names",
                        f"database {name!r} cannot be opened (it does not exist, or this "
                        f"login has no access to it): {exc}",
                    )
                ]
            ) from exc
        raise ERRORS.translate(exc) from exc
    if cfg["sqlserver.dialect"] == "tsql":
        conn.add_output_converter(SQL_SS_TIMESTAMPOFFSET, datetimeoffset)
    return conn
