"""Result rows of a snapshot's streaming ``SELECT``, read by the compiled row walk.

PyMySQL reads a text-protocol row in Python (``MySQLResult._read_row_from_packet``: a call
per length-coded field), over 40 % of a MariaDB snapshot's CPU. ``connectors/mysql/
_textrow_c.c`` walks the packet in C and calls the same per-column converters, so rows are
PyMySQL's own; PyMySQL's method is the reference, used when the extension was not built, when
``TIDEMARK_PURE_PYTHON=1`` asks for it, and for any packet the walk does not take. The walk is
installed on one executed cursor's result, never on PyMySQL's classes.

The fetch function :func:`read_rows_compiled` returns also takes PyMySQL's per-packet reading
out of the way: it walks every complete row packet already in the connection's read buffer in
one call, and leaves anything else (a packet cut off by the end of the buffer, the end of the
result, an error, a packet of 16 MB or more, a row whose converter raises) to PyMySQL's own
``fetchmany`` path, one packet at a time.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from cdc.compiled import load

_compiled = load("connectors.mysql._textrow_c")


Fetch = Callable[[int], list[Any]]


def read_rows_compiled(cursor: Any) -> Fetch | None:
    """Make the result of ``cursor`` (an unbuffered cursor, just executed) read its rows with
    the compiled walk, and return the function that fetches up to N rows (``fetchmany``'s
    rows); None when it cannot (not built, or a PyMySQL whose result or connection does not
    look as expected): ``cursor.fetchmany`` is then the way."""
    result: Any = getattr(cursor, "_result", None)
    converters = getattr(result, "converters", None)
    original = getattr(result, "_read_row_from_packet", None)
    if _compiled is None or not isinstance(converters, list) or not callable(original):
        return None
    specs = tuple(_spec(encoding, converter) for encoding, converter in converters)
    walk = _compiled.read_row

    def read(packet: Any) -> Any:
        data = packet._data
        if type(data) is bytes:
            row = walk(data, packet._position, specs)
            if row is not None:
                return row
        return original(packet)

    result._read_row_from_packet = read
    conn = getattr(result, "connection", None)
    rfile = getattr(conn, "_rfile", None)
    if not callable(getattr(rfile, "peek", None)) or not isinstance(
        getattr(conn, "_next_seq_id", None), int
    ):
        return lambda size: list(cursor.fetchmany(size))
    return _buffered_fetch(cursor, result, conn, rfile, specs)


def _spec(encoding: Any, converter: Any) -> tuple[Any, ...]:
    """(encoding, converter), or with a third item, the type the walk makes of a TIMESTAMP's
    canonical text itself (a converter marked by ``snapshot_timestamp_decoder``)."""
    made = getattr(converter, "__tidemark_textrow__", None)
    if isinstance(made, type) and issubclass(made, datetime.datetime):
        return (encoding, converter, made)
    return (encoding, converter)


def _buffered_fetch(
    cursor: Any, result: Any, conn: Any, rfile: Any, specs: tuple[Any, ...]
) -> Fetch:
    take = _compiled.read_packets  # type: ignore[union-attr]

    def fetch(size: int) -> list[Any]:
        rows: list[Any] = []
        while len(rows) < size and result.unbuffered_active:
            try:
                buffered = rfile.peek(1)  # what the reader holds, or one read from the socket
            except OSError:
                buffered = b""  # PyMySQL's read below raises its own error
            consumed = 0
            if buffered:
                consumed, seq = take(buffered, conn._next_seq_id, size - len(rows), specs, rows)
                if consumed:
                    rfile.read(consumed)
                    conn._next_seq_id = seq
            if not consumed:  # not a plain row already here: PyMySQL reads this packet
                row = cursor.read_next()
                if row is None:
                    cursor.warning_count = result.warning_count
                    break
                rows.append(row)
        return rows

    return fetch
