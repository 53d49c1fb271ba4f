"""MySQL/MariaDB's side of the reselect post-processor.

Rows written by a session with ``binlog_row_image=MINIMAL`` or ``NOBLOB`` lack columns (see
row_images.py); the reselect post-processor (cdc/pipeline/reselect.py) re-reads them by
primary key. The rows are read as the snapshot reads them (the same session settings: UTC
time zone, ``database.initial.statements``; FLOAT widened to DOUBLE so the text protocol
keeps every digit), but in a streaming session, so a TIMESTAMP is written as streamed values
are. Key values go back as query parameters; a row is matched to the event by its key
values as the driver returns them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cdc.pipeline.reselect import SessionReselector
from cdc.spi import Table
from connectors.mysql import connection as myconn
from connectors.mysql.snapshot import _quote, qualified
from connectors.mysql.types import base_type


class MySqlReselector(SessionReselector):
    """:class:`cdc.spi.Reselector` for MySQL/MariaDB: one ``SELECT ... WHERE (key) IN (...)``
    per call."""

    #: an absent number or date that cannot be re-read refuses the event (row_images.py)
    strict_placeholders = True

    def connect(self) -> Any:
        return myconn.connect(self.cfg)

    def rows(
        self,
        conn: Any,
        table: Table,
        key_columns: Sequence[str],
        keys: Sequence[tuple[Any, ...]],
        columns: Sequence[str],
    ) -> list[tuple[Any, ...]]:
        exprs = []
        for name in [*key_columns, *columns]:
            col = table.column(name)
            widen = col is not None and base_type(col)[0] == "FLOAT"
            exprs.append(f"({_quote(name)} + 0e0)" if widen else _quote(name))
        one = "(" + ", ".join(["%s"] * len(key_columns)) + ")"
        query = (
            f"SELECT {', '.join(exprs)} FROM {qualified(table.id)} "
            f"WHERE ({', '.join(_quote(k) for k in key_columns)}) IN "
            f"({', '.join([one] * len(keys))})"
        )
        return myconn.query(conn, query, [v for key in keys for v in key])
