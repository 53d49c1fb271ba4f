"""Row images without every column: ``binlog_row_image=MINIMAL`` or ``NOBLOB``.

The connector refuses to stream when the server's *global* ``binlog_row_image`` is not FULL
(``streaming.check_server``), but any session may still ``SET SESSION binlog_row_image`` and
write rows whose images lack columns. The binlog's columns-present bitmaps say which columns
an image carries; the decoder reports the others as None, which would look like a NULL stored
in the row. Instead, an absent column becomes:

* the before image's value, for the after image of an UPDATE when the before image has the
  column (an absent after-column is one the statement did not set, so it kept that value —
  MINIMAL on a table without a primary key logs a full before image);
* otherwise the unavailable-value placeholder (``__debezium_unavailable_value`` as text or
  bytes), as for PostgreSQL's unchanged TOASTed values — possible only for columns whose
  Connect form is a string or plain bytes (:func:`has_placeholder_form`);
* for any other column (numbers, dates, BIT, DECIMAL, spatial, ...) there is no value that a
  consumer could tell from data, so the row is refused under
  ``event.deserialization.failure.handling.mode`` (``fail`` stops with the reason).

With the reselect post-processor configured (``post.processors``, cdc/pipeline/reselect.py)
such rows are not refused here: the absent columns of the *after* image are re-read from the
table by key (:mod:`connectors.mysql.reselect`), and an after image whose number or date
column could still not be filled (the row is gone, or the column is not selected) is refused
then, under ``event.processing.failure.handling.mode``. A *before* image cannot be re-read (the
row has moved on): its absent columns are as the log has them — the placeholder for string
and bytes columns, NULL for the others — as PostgreSQL's before images of ``REPLICA IDENTITY
DEFAULT`` tables carry only the key.
"""

from __future__ import annotations

from collections.abc import Sequence

from cdc.spi import Column, TableId
from connectors.mysql.types import BINARY_TYPES, TEXT_TYPES, base_type

COLS_BITMAP = "cols bitmap"
"""python-mysql-replication's ``none_sources`` reason for a column absent from the image."""

_PLACEHOLDER_TYPES = TEXT_TYPES | BINARY_TYPES | {"JSON", "ENUM", "SET", "UUID", "INET4", "INET6"}


PLACEHOLDERS = "the absent columns carry the unavailable-value placeholder"
RESELECTED = (
    "the absent columns of after images are reselected from the table (reselect post "
    "processor); those of before images are the placeholder, or NULL for other types"
)


def has_placeholder_form(column: Column) -> bool:
    """Whether the column's Connect value is a string or plain bytes in every handling mode,
    so the unavailable-value placeholder can stand for it."""
    return base_type(column)[0] in _PLACEHOLDER_TYPES


def refusal(tid: TableId, columns: Sequence[Column], where: str) -> str | None:
    """Why a row whose image lacks ``columns`` cannot be emitted, or None when every one of
    them can carry the placeholder."""
    bad = [c.name for c in columns if not has_placeholder_form(c)]
    if not bad:
        return None
    return (
        f"the row image of {tid} at {where} lacks the columns {', '.join(bad)} (the writing "
        "session ran with binlog_row_image=MINIMAL or NOBLOB) and their types have no "
        "unavailable-value placeholder, so the event would carry NULLs that are not in the "
        "row. Make every writer use binlog_row_image=FULL (do not SET SESSION "
        "binlog_row_image); set event.deserialization.failure.handling.mode=warn or skip to "
        "skip such rows"
    )
