"""Each connector's table of driver errors (retriable / fatal / config), checked with the
drivers' own exception instances, as the reconnect loops receive them."""

from __future__ import annotations

import psycopg
import psycopg.errors
import pymysql.err  # type: ignore[import-untyped]
import pytest

from cdc.errors import ConfigError, ErrorKind, FatalError, RetriableError
from connectors.mysql.connection import ReconnectRefused
from connectors.mysql.errors import ERRORS as MYSQL
from connectors.mysql.errors import BinlogPositionLost, ConnectionLost
from connectors.postgres.errors import ERRORS as POSTGRES
from connectors.postgres.errors import SlotInUse

RETRIABLE, FATAL, CONFIG = ErrorKind.RETRIABLE, ErrorKind.FATAL, ErrorKind.CONFIG


def pg_error(sqlstate: str, message: str = "server said no") -> psycopg.Error:
    """The exception class psycopg raises for a server error with this SQLSTATE."""
    error = psycopg.errors.lookup(sqlstate)(message)
    assert error.sqlstate == sqlstate
    return error


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        # what psycopg raises for any failed connection attempt: no SQLSTATE
        (psycopg.OperationalError("connection failed: Connection refused"), RETRIABLE),
        (pg_error("08006"), RETRIABLE),  # connection_failure
        (pg_error("57P01"), RETRIABLE),  # admin_shutdown (pg_terminate_backend)
        (pg_error("57P03"), RETRIABLE),  # cannot_connect_now: starting up
        (pg_error("53300"), RETRIABLE),  # too_many_connections
        (pg_error("40P01"), RETRIABLE),  # deadlock_detected
        (pg_error("55006"), RETRIABLE),  # object_in_use: slot active for another PID
        (pg_error("55P03"), RETRIABLE),  # lock_not_available
        (pg_error("57P04"), FATAL),  # database_dropped: also an OperationalError
        (pg_error("42P01"), FATAL),  # undefined_table
        (pg_error("XX000"), FATAL),  # internal_error
        (pg_error("28P01"), CONFIG),  # invalid_password
        (pg_error("28000"), CONFIG),  # invalid_authorization_specification
        (pg_error("3D000"), CONFIG),  # invalid_catalog_name
        (pg_error("42501"), CONFIG),  # insufficient_privilege
        (psycopg.InterfaceError("the connection is closed"), FATAL),
        (ConnectionResetError(104, "Connection reset by peer"), RETRIABLE),
        (SlotInUse("replication slot is in use"), RETRIABLE),
        (FatalError("slot was invalidated"), FATAL),
        (ConfigError([("slot.name", "bad")]), CONFIG),
        (ValueError("a bug"), FATAL),
    ],
    ids=repr,
)
def test_postgres_errors(error: BaseException, kind: ErrorKind) -> None:
    assert POSTGRES.classify(error) is kind


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (pymysql.err.OperationalError(2013, "Lost connection to server during query"), RETRIABLE),
        (pymysql.err.OperationalError(2003, "Can't connect to MySQL server"), RETRIABLE),
        (pymysql.err.OperationalError(2006, "MySQL server has gone away"), RETRIABLE),
        (pymysql.err.OperationalError(1053, "Server shutdown in progress"), RETRIABLE),
        (pymysql.err.OperationalError(1927, "Connection was killed"), RETRIABLE),
        (pymysql.err.OperationalError(1040, "Too many connections"), RETRIABLE),
        (pymysql.err.OperationalError(1205, "Lock wait timeout exceeded"), RETRIABLE),
        (pymysql.err.OperationalError(1213, "Deadlock found"), RETRIABLE),
        (pymysql.err.InterfaceError(0, ""), RETRIABLE),
        (ReconnectRefused("binlog connection lost"), RETRIABLE),
        (BrokenPipeError(32, "Broken pipe"), RETRIABLE),
        (pymysql.err.OperationalError(1236, "Could not find first log file"), FATAL),
        (pymysql.err.ProgrammingError(1064, "You have an error in your SQL syntax"), FATAL),
        (pymysql.err.OperationalError(1045, "Access denied for user 'u'@'h'"), CONFIG),
        (pymysql.err.OperationalError(1227, "Access denied; you need REPLICATION SLAVE"), CONFIG),
        (pymysql.err.OperationalError(1044, "Access denied for user to database"), CONFIG),
        (ConnectionLost("gave up"), RETRIABLE),
        (BinlogPositionLost("purged"), FATAL),
        (KeyError("bug"), FATAL),
    ],
    ids=repr,
)
def test_mysql_errors(error: BaseException, kind: ErrorKind) -> None:
    assert MYSQL.classify(error) is kind


def test_a_config_error_names_the_key_to_fix_and_keeps_the_servers_words() -> None:
    denied = POSTGRES.translate(pg_error("42501", "permission denied for table t"))
    assert isinstance(denied, ConfigError)
    assert denied.problems[0][0] == "database.user"
    assert "permission denied for table t" in denied.problems[0][1]
    password = POSTGRES.translate(pg_error("28P01", "password authentication failed"))
    assert isinstance(password, ConfigError) and password.problems[0][0] == "database.user"

    refused = MYSQL.translate(pymysql.err.OperationalError(1045, "Access denied for user 'u'"))
    assert isinstance(refused, ConfigError)
    assert refused.problems[0][0] == "database.password"
    grant = MYSQL.translate(pymysql.err.OperationalError(1227, "need REPLICATION SLAVE"))
    assert isinstance(grant, ConfigError)
    assert grant.problems[0][0] == "database.user" and "REPLICATION SLAVE" in grant.problems[0][1]


def test_other_errors_are_not_translated() -> None:
    for table, error in (
        (POSTGRES, pg_error("XX000")),
        (POSTGRES, psycopg.OperationalError("connection refused")),
        (MYSQL, pymysql.err.OperationalError(2013, "Lost connection")),
        (MYSQL, RetriableError("x")),
    ):
        assert table.translate(error) is error
