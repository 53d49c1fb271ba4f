"""Hand-built Debezium JSON records (JSON converter, with or without schemas), byte for byte
what a connector writes to Kafka. Used by the apply job's tests and benchmark to play exact
scenarios (out-of-order positions, TOAST placeholders, MySQL binlog/GTID positions) that a live
database cannot produce on demand."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

PG_SOURCE_FIELDS: tuple[tuple[str, str, bool], ...] = (
    ("version", "string", False),
    ("connector", "string", False),
    ("name", "string", False),
    ("ts_ms", "int64", False),
    ("snapshot", "boolean", True),
    ("db", "string", False),
    ("schema", "string", False),
    ("table", "string", False),
    ("txId", "int64", True),
    ("lsn", "int64", True),
    ("xmin", "int64", True),
)
MYSQL_SOURCE_FIELDS: tuple[tuple[str, str, bool], ...] = (
    ("version", "string", False),
    ("connector", "string", False),
    ("name", "string", False),
    ("ts_ms", "int64", False),
    ("snapshot", "boolean", True),
    ("db", "string", False),
    ("table", "string", True),
    ("server_id", "int64", False),
    ("gtid", "string", True),
    ("file", "string", False),
    ("pos", "int64", False),
    ("row", "int32", False),
    ("thread", "int64", True),
    ("query", "string", True),
)


def col(
    ctype: str,
    *,
    optional: bool = True,
    name: str | None = None,
    parameters: Mapping[str, str] | None = None,
    **params: str,
) -> dict[str, Any]:
    """A Connect field schema: ``col("int32")``, ``col("bytes", name=DECIMAL, scale="2")``."""
    out: dict[str, Any] = {"type": ctype, "optional": optional}
    if name:
        out["name"] = name
        out["version"] = 1
    if params or parameters:
        out["parameters"] = {**(parameters or {}), **params}
    return out


DECIMAL = "org.apache.kafka.connect.data.Decimal"


def decimal_col(precision: int, scale: int, *, optional: bool = True) -> dict[str, Any]:
    """A Connect ``Decimal`` field as Debezium writes it (precision as a parameter)."""
    params = {"scale": str(scale), "connect.decimal.precision": str(precision)}
    return col("bytes", optional=optional, name=DECIMAL, parameters=params)


@dataclass
class SyntheticTable:
    """One source table and the records its connector would write."""

    table: str
    columns: Sequence[tuple[str, dict[str, Any]]]
    key: Sequence[str]
    server: str = "srv"
    schema: str = "public"
    db: str = "appdb"
    connector: str = "postgresql"
    with_schemas: bool = True
    _value_schema: bytes = field(default=b"", init=False, repr=False)
    _key_schema: bytes = field(default=b"", init=False, repr=False)

    @property
    def topic(self) -> str:
        if self.connector == "mysql":
            return f"{self.server}.{self.db}.{self.table}"
        return f"{self.server}.{self.schema}.{self.table}"

    def _row_schema(self, field_name: str) -> dict[str, Any]:
        return {
            "type": "struct",
            "fields": [{**s, "field": n} for n, s in self.columns],
            "optional": True,
            "name": f"{self.topic}.Value",
            "field": field_name,
        }

    def _source_fields(self) -> tuple[tuple[str, str, bool], ...]:
        return MYSQL_SOURCE_FIELDS if self.connector == "mysql" else PG_SOURCE_FIELDS

    def value_schema(self) -> dict[str, Any]:
        src = {
            "type": "struct",
            "fields": [{"type": t, "optional": o, "field": n} for n, t, o in self._source_fields()],
            "optional": False,
            "name": f"io.debezium.connector.{self.connector}.Source",
            "field": "source",
        }
        return {
            "type": "struct",
            "fields": [
                self._row_schema("before"),
                self._row_schema("after"),
                src,
                {"type": "string", "optional": False, "field": "op"},
                {"type": "int64", "optional": True, "field": "ts_ms"},
            ],
            "optional": False,
            "name": f"{self.topic}.Envelope",
        }

    def key_schema(self) -> dict[str, Any]:
        types = dict(self.columns)
        return {
            "type": "struct",
            "fields": [{**types[k], "optional": False, "field": k} for k in self.key],
            "optional": False,
            "name": f"{self.topic}.Key",
        }

    def key_bytes(self, row: Mapping[str, Any]) -> bytes:
        payload = {k: row[k] for k in self.key}
        if not self.with_schemas:
            return orjson.dumps(payload)
        if not self._key_schema:
            self._key_schema = orjson.dumps(self.key_schema())
        return b'{"schema":' + self._key_schema + b',"payload":' + orjson.dumps(payload) + b"}"

    def source(self, position: Mapping[str, Any], *, snapshot: bool, ts_ms: int) -> dict[str, Any]:
        base: dict[str, Any] = {
            "version": "0.1.0",
            "connector": self.connector,
            "name": self.server,
            "ts_ms": ts_ms,
            "snapshot": snapshot,
            "db": self.db,
        }
        if self.connector == "mysql":
            base.update(
                {
                    "table": self.table,
                    "server_id": 1,
                    "gtid": None,
                    "file": "mysql-bin.000001",
                    "pos": 0,
                    "row": 0,
                    "thread": None,
                    "query": None,
                }
            )
        else:
            base.update(
                {
                    "schema": self.schema,
                    "table": self.table,
                    "txId": None,
                    "lsn": None,
                    "xmin": None,
                }
            )
        base.update(position)
        return base

    def value_bytes(
        self,
        op: str,
        row: Mapping[str, Any] | None,
        position: Mapping[str, Any],
        *,
        before: Mapping[str, Any] | None = None,
        ts_ms: int = 1_700_000_000_000,
        snapshot: bool | None = None,
    ) -> bytes:
        snap = (op == "r") if snapshot is None else snapshot
        payload = {
            "before": dict(before)
            if before is not None
            else (dict(row) if op == "d" and row else None),
            "after": None if op == "d" else (dict(row) if row is not None else None),
            "source": self.source(position, snapshot=snap, ts_ms=ts_ms),
            "op": op,
            "ts_ms": ts_ms + 1,
        }
        if not self.with_schemas:
            return orjson.dumps(payload)
        if not self._value_schema:
            self._value_schema = orjson.dumps(self.value_schema())
        return b'{"schema":' + self._value_schema + b',"payload":' + orjson.dumps(payload) + b"}"

    def record(
        self, op: str, row: Mapping[str, Any], position: Mapping[str, Any], **kw: Any
    ) -> tuple[bytes, bytes]:
        """(key, value) of one change; for ``d`` the row is the ``before`` image."""
        return self.key_bytes(row), self.value_bytes(op, row, position, **kw)


def pg(lsn: int, tx: int | None = None) -> dict[str, Any]:
    return {"lsn": lsn, "txId": tx}


def mysql(file_index: int, pos: int, row: int = 0, gtid: str | None = None) -> dict[str, Any]:
    return {"file": f"mysql-bin.{file_index:06d}", "pos": pos, "row": row, "gtid": gtid}
