"""Result rows of a snapshot's streaming ``SELECT``, read by the compiled row walk.

PyMySQL reads a text-protocol row in Python (``MySQLResult._read_row_from_packet``: a call
per length-coded field), over 40 % of a MariaDB snapshot's CPU. ``connectors/mysql/
_textrow_c.c`` walks the packet in C and calls the same per-column converters, so rows are
PyMySQL's own; PyMySQL's method is the reference, used when the extension was not built, when
``TIDEMARK_PURE_PYTHON=1`` asks for it, and for any packet the walk does not take. The walk is
installed on one executed cursor's result, never on PyMySQL's classes.
"""

from __future__ import annotations

from typing import Any

from cdc.compiled import load

_compiled = load("connectors.mysql._textrow_c")


def read_rows_compiled(cursor: Any) -> bool:
    """Make the result of ``cursor`` (just executed) read its rows with the compiled walk;
    False when it cannot (not built, or a PyMySQL whose result does not look as expected)."""
    result: Any = getattr(cursor, "_result", None)
    converters = getattr(result, "converters", None)
    original = getattr(result, "_read_row_from_packet", None)
    if _compiled is None or not isinstance(converters, list) or not callable(original):
        return False
    specs = tuple((encoding, converter) for encoding, converter in converters)
    walk = _compiled.read_row

    def read(packet: Any) -> Any:
        data = packet._data
        if type(data) is bytes:
            row = walk(data, packet._position, specs)
            if row is not None:
                return row
        return original(packet)

    result._read_row_from_packet = read
    return True
