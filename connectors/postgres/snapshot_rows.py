"""Reading a snapshot query's rows as text, a batch at a time, with little Python per row.

The snapshot hands the core every value as PostgreSQL's text form (None for NULL), the same
text the stream carries, so both paths convert it alike. ``COPY ... TO STDOUT`` gives that
text, but libpq returns COPY data one row per call and psycopg runs a few generator steps of
Python around each: ~3 CPU-s per 1M rows of the W4 table, a sixth of the whole snapshot.

A plain ``SELECT`` in libpq's *chunked rows* mode (libpq 17 or later; psycopg's
``stream(size=n)``) returns ``n`` rows per result, and psycopg turns a result into tuples in
C: ~1.1 CPU-s per 1M rows for the same text. Every column gets psycopg's text loader (the
result's types are read first with ``LIMIT 0``), so the values are exactly the text output of
each type, as COPY's are after unescaping (both call the type's output function; NULL is
None). Without chunked rows mode (an older libpq) COPY is used as before.
"""

from __future__ import annotations

import itertools
from collections.abc import Generator, Iterator
from typing import Any

from psycopg import capabilities, sql
from psycopg.types.string import TextLoader

from connectors.postgres import connection as pgconn

#: rows per result of chunked rows mode, and per batch handed on
BATCH_ROWS = 1024


def text_batches(
    conn: Any, query: sql.Composable, ncols: int, size: int = BATCH_ROWS
) -> Generator[list[tuple[Any, ...]], None, None]:
    """The rows of ``query`` in lists of up to ``size``, every value its text form or None."""
    if not capabilities.has_stream_chunked():
        rows = pgconn.copy_rows(conn, query, ncols)
        try:
            while batch := list(itertools.islice(rows, size)):
                yield batch
        finally:
            _close(rows)
        return
    with conn.cursor() as cur:
        # Only the result's description: no row is read.
        cur.execute(sql.SQL("SELECT * FROM ({}) AS snapshot_query LIMIT 0").format(query))
        for column in cur.description or ():
            cur.adapters.register_loader(column.type_code, TextLoader)
        stream = cur.stream(query, size=size)
        try:
            while batch := list(itertools.islice(stream, size)):
                yield batch
        finally:
            _close(stream)  # cancels a query still running (a stop), as closing a COPY does


def text_rows(conn: Any, query: sql.Composable) -> list[tuple[Any, ...]]:
    """All rows of ``query`` (a bounded one: an incremental snapshot's chunk), every value its
    text form or None, from one result: the loaders are switched to text once the result's
    types are known, before any row is converted."""
    with conn.cursor() as cur:
        cur.execute(query)
        for column in cur.description or ():
            cur.adapters.register_loader(column.type_code, TextLoader)
        rows: list[tuple[Any, ...]] = cur.fetchall()
        return rows


def _close(rows: Iterator[Any]) -> None:
    """Finish a row generator now (its query is cancelled if still running)."""
    close = getattr(rows, "close", None)
    if callable(close):
        close()
