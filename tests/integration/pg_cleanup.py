"""Dropping what a test created in the shared PostgreSQL, and noticing what it left behind.

The dev PostgreSQL lives for days and other people run tests against it at the same time. A
logical replication slot left behind pins WAL forever (18 GB after a few days), so every
database and slot a test creates must go in its teardown, also when the test fails.

- :func:`create_database` creates a database and records its name for this run; every slot in
  it then belongs to the test (the name is unique).
- :func:`drop_database` drops the slots in the database first, then the database. A slot can
  still be active when teardown runs (a connector's walsender outlives its stop by a moment, a
  SIGKILLed child's until the server notices), and PostgreSQL refuses to drop an active slot
  or a database with one: the walsender is ended with ``pg_terminate_backend`` first.
- :func:`drop_slot` does the same for one slot a test created by name outside such a database
  (recorded with :func:`own_slot`).
- :func:`leftovers` names the recorded databases and slots still there: the ``postgres``
  session fixture fails the run with them. Only names this run recorded are looked at, so
  other users' databases and slots are never reported, let alone dropped.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg
from psycopg import errors

CREATED_DATABASES: set[str] = set()
CREATED_SLOTS: set[str] = set()

TIMEOUT = 30.0


def create_database(dsn: str, name: str, owner: str | None = None) -> None:
    """``CREATE DATABASE name`` (owned by ``owner``), recorded as this run's."""
    CREATED_DATABASES.add(name)
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{name}"' + (f" OWNER {owner}" if owner else ""))  # type: ignore[arg-type]


def own_slot(name: str) -> str:
    """Record a slot a test creates outside a database of its own; returns ``name``."""
    CREATED_SLOTS.add(name)
    return name


def _drop_slots(c: psycopg.Connection[Any], where: str, arg: str) -> None:
    """Drop the slots ``WHERE <where> = arg``, ending the sessions that hold them."""
    deadline = time.monotonic() + TIMEOUT
    while True:
        rows = c.execute(
            f"SELECT slot_name, active_pid FROM pg_replication_slots WHERE {where} = %s",  # type: ignore[arg-type]
            (arg,),
        ).fetchall()
        if not rows:
            return
        for slot, pid in rows:
            try:
                if pid is not None:
                    c.execute("SELECT pg_terminate_backend(%s)", (pid,))
                else:
                    c.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
            except (errors.ObjectInUse, errors.UndefinedObject):
                pass  # taken again or gone meanwhile: the next round sees
        if time.monotonic() > deadline:
            raise AssertionError(f"replication slots still held after {TIMEOUT:.0f} s: {rows}")
        time.sleep(0.05)


def drop_slot(dsn: str, slot: str) -> None:
    """Drop ``slot`` if it exists, ending the session that streams from it."""
    with psycopg.connect(dsn, autocommit=True) as c:
        _drop_slots(c, "slot_name", slot)


def drop_database(dsn: str, name: str) -> None:
    """Drop database ``name`` and every slot in it (the slots first)."""
    deadline = time.monotonic() + TIMEOUT
    with psycopg.connect(dsn, autocommit=True) as c:
        while True:
            _drop_slots(c, "database", name)
            try:
                c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')  # type: ignore[arg-type]
                return
            except errors.ObjectInUse:  # a connector still retrying took a slot again
                if time.monotonic() > deadline:
                    raise


def leftovers(dsn: str) -> list[str]:
    """The databases and slots this run recorded that are still there."""
    dbs, slots = sorted(CREATED_DATABASES), sorted(CREATED_SLOTS)
    with psycopg.connect(dsn, autocommit=True) as c:
        left = [
            f"database {d}"
            for (d,) in c.execute(
                "SELECT datname FROM pg_database WHERE datname = ANY(%s) ORDER BY 1", (dbs,)
            )
        ]
        left += [
            f"replication slot {s} (database {d}, active={a})"
            for s, d, a in c.execute(
                "SELECT slot_name, database, active FROM pg_replication_slots "
                "WHERE slot_name = ANY(%s) OR database = ANY(%s) ORDER BY 1",
                (slots, dbs),
            )
        ]
    return left
