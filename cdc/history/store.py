"""Schema history: the log of DDL that lets a connector know a table's shape at any log position.

A binlog row event says "row of table 42" but not which columns the table had then; after a
restart the connector must rebuild the schema as it was at the stored offset, not as it is now.
Debezium keeps an append-only log of every DDL with the position it was read at and replays it
up to the restart offset. The records here use Debezium's JSON layout (``HistoryRecord`` and
``JsonTableChangeSerializer``), so a history written by Debezium can be read and vice versa.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

import orjson

from cdc.errors import SchemaError
from cdc.spi.events import TableId
from cdc.spi.relational import Column, Table


class TableChangeType(StrEnum):
    CREATE = "CREATE"
    ALTER = "ALTER"
    DROP = "DROP"


# -- table ids --------------------------------------------------------------------------------


def _quote(part: str) -> str:
    return '"' + part.replace('"', '""') + '"'


def table_id_to_string(table_id: TableId) -> str:
    """Debezium's ``TableId.toDoubleQuotedString``: ``"db"."table"``, ``"db"."schema"."t"``."""
    parts = [p for p in (table_id.catalog, table_id.schema) if p is not None]
    return ".".join(_quote(p) for p in [*parts, table_id.table])


def _split_id(text: str) -> list[str]:
    parts: list[str] = []
    i, n = 0, len(text)
    while i <= n:
        if i < n and text[i] == '"':
            buf, i = [], i + 1
            while True:
                if i >= n:
                    raise SchemaError(f"unterminated quote in table id {text!r}")
                if text[i] == '"':
                    if i + 1 < n and text[i + 1] == '"':
                        buf.append('"')
                        i += 2
                        continue
                    i += 1
                    break
                buf.append(text[i])
                i += 1
            parts.append("".join(buf))
        else:
            end = text.find(".", i)
            end = n if end < 0 else end
            parts.append(text[i:end])
            i = end
        if i < n and text[i] != ".":
            raise SchemaError(f"unexpected {text[i]!r} in table id {text!r}")
        i += 1
    return parts


def parse_table_id(text: str, use_catalog_before_schema: bool = True) -> TableId:
    """A two-part id is ``db.table`` for catalog-based databases (MySQL, the default) and
    ``schema.table`` otherwise, as in Debezium's ``TableId.parse``."""
    parts = _split_id(text)
    if len(parts) == 1:
        return TableId(None, None, parts[0])
    if len(parts) == 2:
        if use_catalog_before_schema:
            return TableId(parts[0], None, parts[1])
        return TableId(None, parts[0], parts[1])
    if len(parts) == 3:
        return TableId(parts[0], parts[1], parts[2])
    raise SchemaError(f"table id {text!r} has {len(parts)} parts; at most 3 are allowed")


# -- tables -----------------------------------------------------------------------------------

# java.sql.Types codes: Debezium requires ``jdbcType`` when it reads a history, and our Column
# has no JDBC type, so one is derived from the type name. Readers here ignore it.
_JDBC_TYPES: dict[str, int] = {
    "BIT": -7,
    "BOOL": 16,
    "BOOLEAN": 16,
    "TINYINT": -6,
    "SMALLINT": 5,
    "INT2": 5,
    "MEDIUMINT": 4,
    "INT": 4,
    "INTEGER": 4,
    "INT4": 4,
    "SERIAL": 4,
    "YEAR": 4,
    "BIGINT": -5,
    "INT8": -5,
    "BIGSERIAL": -5,
    "FLOAT": 6,
    "REAL": 7,
    "FLOAT4": 7,
    "DOUBLE": 8,
    "DOUBLE PRECISION": 8,
    "FLOAT8": 8,
    "NUMERIC": 2,
    "DECIMAL": 3,
    "MONEY": 2,
    "CHAR": 1,
    "BPCHAR": 1,
    "CHARACTER": 1,
    "ENUM": 1,
    "SET": 1,
    "NCHAR": -15,
    "VARCHAR": 12,
    "CHARACTER VARYING": 12,
    "NVARCHAR": -9,
    "TEXT": 12,
    "TINYTEXT": 12,
    "MEDIUMTEXT": 12,
    "LONGTEXT": 12,
    "BINARY": -2,
    "BYTEA": -2,
    "VARBINARY": -3,
    "BLOB": 2004,
    "TINYBLOB": 2004,
    "MEDIUMBLOB": 2004,
    "LONGBLOB": 2004,
    "DATE": 91,
    "TIME": 92,
    "TIMETZ": 2013,
    "DATETIME": 93,
    "TIMESTAMP": 93,
    "TIMESTAMPTZ": 2014,
}
_JDBC_OTHER = 1111
_JDBC_ARRAY = 2003


def jdbc_type_for(column: Column) -> int:
    if column.dimensions:
        return _JDBC_ARRAY
    base = column.type_name.upper().split("(")[0].replace("UNSIGNED", "").strip()
    return _JDBC_TYPES.get(base, _JDBC_OTHER)


DEFAULT_CHARSET = "default_charset"
"""``Table.extra`` key that holds Debezium's ``defaultCharsetName``."""


def _quoted(value: str) -> str:
    """An ENUM/SET option as Debezium keeps it: the DDL's literal, quotes included."""
    return "'" + value.replace("'", "''") + "'"


def _unquoted(values: list[str]) -> tuple[str, ...]:
    """Options read back: Debezium's quoted literals (and earlier tidemark histories' bare
    values) as the values themselves."""
    if values and all(len(v) >= 2 and v[0] == v[-1] == "'" for v in values):
        return tuple(v[1:-1].replace("''", "'") for v in values)
    return tuple(values)


def column_to_dict(column: Column) -> dict[str, Any]:
    jdbc = column.jdbc_type if column.jdbc_type is not None else jdbc_type_for(column)
    doc: dict[str, Any] = {"name": column.name, "jdbcType": jdbc}
    if column.native_type is not None:
        doc["nativeType"] = column.native_type
    doc["typeName"] = column.type_name
    doc["typeExpression"] = column.type_name
    doc["charsetName"] = column.charset
    if column.length is not None:
        doc["length"] = column.length
    if column.scale is not None:
        doc["scale"] = column.scale
    doc["position"] = column.position + 1  # Debezium's positions start at 1, ours at 0
    doc["optional"] = column.optional
    doc["autoIncremented"] = column.auto_increment
    doc["generated"] = column.generated
    doc["comment"] = column.comment
    doc["hasDefaultValue"] = column.has_default
    if column.default is not None:
        # Debezium keeps the default as the DDL expression text.
        doc["defaultValueExpression"] = (
            column.default if isinstance(column.default, str) else str(column.default)
        )
    if column.enum_values is not None:
        doc["enumValues"] = [_quoted(v) for v in column.enum_values]
    if column.dimensions:
        doc["dimensions"] = column.dimensions  # tidemark extension; Debezium ignores it
    return doc


def column_from_dict(doc: Mapping[str, Any], base: int = 1) -> Column:
    """A column of a ``tableChanges`` entry; ``base`` is the first position of its table
    (Debezium's 1; 0 in the records earlier tidemark versions wrote)."""
    enum_values = doc.get("enumValues")
    default = doc.get("defaultValueExpression")
    column = Column(
        name=doc["name"],
        position=int(doc["position"]) - base,
        type_name=doc["typeName"],
        native_type=doc.get("nativeType"),
        length=doc.get("length"),
        scale=doc.get("scale"),
        optional=bool(doc.get("optional", True)),
        default=default,
        has_default=bool(doc.get("hasDefaultValue", default is not None)),
        auto_increment=bool(doc.get("autoIncremented", False)),
        enum_values=_unquoted(list(enum_values)) if enum_values is not None else None,
        charset=doc.get("charsetName"),
        dimensions=int(doc.get("dimensions", 0)),
        generated=bool(doc.get("generated", False)),
        comment=doc.get("comment"),
    )
    # kept only where it is not what the type name gives, as the connectors set it
    jdbc = doc.get("jdbcType")
    if isinstance(jdbc, int) and jdbc != jdbc_type_for(column):
        column = replace(column, jdbc_type=jdbc)
    return column


def table_to_dict(table: Table) -> dict[str, Any]:
    """The ``table`` document of a Debezium table change."""
    return {
        "defaultCharsetName": table.extra.get(DEFAULT_CHARSET),
        "primaryKeyColumnNames": list(table.primary_key),
        "columns": [column_to_dict(c) for c in table.columns],
        "comment": table.comment,
    }


def table_from_dict(
    doc: Mapping[str, Any],
    table_id: TableId | None = None,
    use_catalog_before_schema: bool = True,
) -> Table:
    """Accepts a ``table`` document plus its id, or a whole ``tableChanges`` entry (which carries
    the id; Debezium's table document does not)."""
    entry_comment = None
    if table_id is None:
        if "id" not in doc or "table" not in doc:
            raise SchemaError("table_from_dict needs a table id, or a tableChanges entry")
        table_id = parse_table_id(doc["id"], use_catalog_before_schema)
        entry_comment = doc.get("comment")  # where Debezium writes it
        doc = doc["table"] or {}
    try:
        docs = doc.get("columns") or ()
        # Debezium numbers columns from 1; tidemark versions before 2026-11-28 wrote 0-based
        # positions, which a table's first column at 0 gives away
        base = 0 if any(int(c["position"]) == 0 for c in docs) else 1
        columns = tuple(column_from_dict(c, base) for c in docs)
    except (KeyError, TypeError, ValueError) as exc:
        raise SchemaError(f"bad column in the history's table {table_id}: {exc!r}") from exc
    extra: dict[str, Any] = {}
    if doc.get("defaultCharsetName") is not None:
        extra[DEFAULT_CHARSET] = doc["defaultCharsetName"]
    return Table(
        id=table_id,
        columns=columns,
        primary_key=tuple(doc.get("primaryKeyColumnNames") or ()),
        comment=doc.get("comment") or entry_comment,
        extra=extra,
    )


@dataclass(frozen=True)
class TableChange:
    type: TableChangeType
    table: Table

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type.value,
            "id": table_id_to_string(self.table.id),
            "table": table_to_dict(self.table),
            "comment": self.table.comment,
        }

    @classmethod
    def from_dict(
        cls, doc: Mapping[str, Any], use_catalog_before_schema: bool = True
    ) -> TableChange:
        try:
            change_type = TableChangeType(doc["type"])
        except (KeyError, ValueError) as exc:
            raise SchemaError(f"bad table change type in {dict(doc)!r}") from exc
        table_id = parse_table_id(doc["id"], use_catalog_before_schema)
        if change_type is TableChangeType.DROP:
            return cls(change_type, Table(id=table_id, columns=()))
        return cls(change_type, table_from_dict(doc, None, use_catalog_before_schema))


# -- records ----------------------------------------------------------------------------------


def _canonical(value: Mapping[str, Any]) -> bytes:
    return orjson.dumps(dict(value), option=orjson.OPT_SORT_KEYS)


def _json_kind(value: Any) -> str:
    """The JSON type of a parsed value, for messages that must not quote it."""
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool) or value is None:
        return "literal"
    return "number"


@dataclass(frozen=True)
class HistoryRecord:
    """One DDL with where it was read. ``table_changes`` stay in their JSON form; parse them
    with :meth:`changes` (the id form depends on the connector's catalog/schema convention)."""

    source: dict[str, Any]
    position: dict[str, Any]
    database_name: str | None
    schema_name: str | None
    ddl: str
    table_changes: list[dict[str, Any]] = field(default_factory=list)
    ts_ms: int | None = None

    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"source": self.source, "position": self.position}
        if self.ts_ms is not None:
            doc["ts_ms"] = self.ts_ms
        doc.update(
            databaseName=self.database_name,
            schemaName=self.schema_name,
            ddl=self.ddl,
            tableChanges=self.table_changes,
        )
        return doc

    def to_json(self) -> bytes:
        return orjson.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, doc: Any) -> HistoryRecord:
        if (
            not isinstance(doc, dict)
            or not isinstance(doc.get("source"), dict)
            or not isinstance(doc.get("position"), dict)
        ):
            # the record's content is not quoted: a file that is not a history (or a damaged
            # one) may hold anything, and this message reaches failure traces and the log
            raise SchemaError(
                f"not a schema history record (a JSON {_json_kind(doc)}, needs the objects "
                f"source and position)"
            )
        changes = doc.get("tableChanges") or []
        if not isinstance(changes, list):
            raise SchemaError(
                f"tableChanges is a JSON {_json_kind(changes)}, not a list, in a history record"
            )
        return cls(
            source=doc["source"],
            position=doc["position"],
            database_name=doc.get("databaseName"),
            schema_name=doc.get("schemaName"),
            ddl=doc.get("ddl") or "",
            table_changes=changes,
            ts_ms=doc.get("ts_ms"),
        )

    @classmethod
    def from_json(cls, data: bytes | str) -> HistoryRecord:
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise SchemaError(
                f"schema history record is not JSON ({len(data)} bytes; {exc.msg} at "
                f"character {exc.pos})"
            ) from exc
        return cls.from_dict(doc)

    def changes(self, use_catalog_before_schema: bool = True) -> list[TableChange]:
        return [TableChange.from_dict(c, use_catalog_before_schema) for c in self.table_changes]


def make_record(
    source_partition: Mapping[str, Any],
    position: Mapping[str, Any],
    database: str | None,
    schema: str | None,
    ddl: str,
    table_changes: Iterable[TableChange | Mapping[str, Any]] = (),
) -> HistoryRecord:
    changes = [c.to_dict() if isinstance(c, TableChange) else dict(c) for c in table_changes]
    record = HistoryRecord(
        source=dict(source_partition),
        position=dict(position),
        database_name=database,
        schema_name=schema,
        ddl=ddl,
        table_changes=changes,
        ts_ms=int(time.time() * 1000),
    )
    try:
        # Round trip: the stored record must not share mutable state with the caller and must
        # fail here, not at recovery, if something in it is not JSON.
        return HistoryRecord.from_json(record.to_json())
    except TypeError as exc:
        raise SchemaError(f"schema history record is not JSON-serialisable: {exc}") from exc


# -- stores -----------------------------------------------------------------------------------


class SchemaHistory(ABC):
    """Append-only, totally ordered. ``start`` before use, ``stop`` after.

    ``store_only_captured_tables_ddl`` and ``skip_unparseable_ddl`` are the connector's to act on
    (``*.store.only.captured.tables.ddl``, ``*.skip.unparseable.ddl``); the store only carries
    them so every connector reads them from one place."""

    def __init__(
        self, *, store_only_captured_tables_ddl: bool = False, skip_unparseable_ddl: bool = False
    ) -> None:
        self.store_only_captured_tables_ddl = store_only_captured_tables_ddl
        self.skip_unparseable_ddl = skip_unparseable_ddl

    def start(self) -> None:  # noqa: B027 - stores without resources need nothing
        """Prepare storage (create the file or topic, check it). Idempotent."""

    def stop(self) -> None:  # noqa: B027
        """Release resources. Idempotent."""

    @abstractmethod
    def exists(self) -> bool:
        """True when the history holds at least one record. A connector with stored offsets but
        no history must not stream: it cannot know the schema at its offset."""

    @abstractmethod
    def store_record(self, record: HistoryRecord) -> None:
        """Append durably; raise ``SchemaError`` if the record may not be stored."""

    @abstractmethod
    def all_records(self) -> Iterator[HistoryRecord]:
        """Every record in the order it was written."""

    def record(
        self,
        source_partition: Mapping[str, Any],
        position: Mapping[str, Any],
        database: str | None,
        schema: str | None,
        ddl: str,
        table_changes: Iterable[TableChange | Mapping[str, Any]] = (),
    ) -> HistoryRecord:
        record = make_record(source_partition, position, database, schema, ddl, table_changes)
        self.store_record(record)
        return record

    def recover(
        self,
        source_partition: Mapping[str, Any],
        stop_at: Callable[[dict[str, Any]], bool],
    ) -> Iterator[HistoryRecord]:
        """Replay, in order, this source's records that are not after the restart offset.

        ``stop_at(position)`` is True for a position after the offset (only the connector can
        compare its positions). Such records are skipped, not a reason to stop reading: like
        Debezium, the whole log is scanned, because a connector whose offsets were reset writes
        earlier positions after later ones. Records of other source partitions are ignored."""
        wanted = _canonical(source_partition)
        for record in self.all_records():
            if _canonical(record.source) != wanted:
                continue
            if stop_at(record.position):
                continue
            yield record

    def __enter__(self) -> SchemaHistory:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class MemorySchemaHistory(SchemaHistory):
    """Debezium's ``MemorySchemaHistory``: for tests; lost on restart."""

    def __init__(self, **flags: bool) -> None:
        super().__init__(**flags)
        self._lock = threading.Lock()
        self._records: list[HistoryRecord] = []

    def exists(self) -> bool:
        with self._lock:
            return bool(self._records)

    def store_record(self, record: HistoryRecord) -> None:
        with self._lock:
            self._records.append(record)

    def all_records(self) -> Iterator[HistoryRecord]:
        with self._lock:
            snapshot = list(self._records)
        return iter(snapshot)
