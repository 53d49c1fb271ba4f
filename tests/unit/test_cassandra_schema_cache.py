"""The schema cache keeps an unchanged table definition across refreshes (the same object,
so the commit log readers compiled for it are kept), and replaces a changed one."""

from __future__ import annotations

import gzip
import json
import uuid
from pathlib import Path
from typing import Any

from connectors.cassandra.commitlog import iter_entries
from connectors.cassandra.mutation import decode_mutation
from connectors.cassandra.schema import SchemaCache

FIXTURES = Path(__file__).parents[1] / "fixtures" / "cassandra"


class _Row:
    def __init__(self, **values: Any) -> None:
        self.__dict__.update(values)
        self._values = values

    def _asdict(self) -> dict[str, Any]:
        return dict(self._values)


class _Result(list[_Row]):
    def one(self) -> _Row:
        return self[0]


class _Session:
    """system_schema as the fixture's schema file describes it (``columns`` editable)."""

    def __init__(self, docs: list[dict[str, Any]]) -> None:
        self.docs = docs

    def execute(self, query: str) -> _Result:
        if "system.local" in query:
            return _Result([_Row(cluster_name="test")])
        if "dropped_columns" in query or "system_schema.types" in query:
            return _Result()
        if "system_schema.columns" in query:
            return _Result(
                _Row(
                    keyspace_name=d["keyspace"],
                    table_name=d["table"],
                    column_name=c["name"],
                    kind=c["kind"],
                    position=c["position"],
                    type=c["type"],
                    clustering_order=c["clustering_order"],
                )
                for d in self.docs
                for c in d["columns"]
            )
        return _Result(
            _Row(keyspace_name=d["keyspace"], table_name=d["table"], id=d["id"], cdc=d["cdc"])
            for d in self.docs
        )


def test_an_unchanged_table_keeps_its_definition_and_compiled_readers() -> None:
    docs = json.loads((FIXTURES / "plain.schema.json").read_text())
    cache = SchemaCache(_Session(docs))
    data = gzip.decompress((FIXTURES / "plain.log.gz").read_bytes())
    file = (FIXTURES / "plain.segment").read_text().strip()
    limit = int((FIXTURES / "plain.idx").read_text())
    for e in iter_entries(data, file, limit=limit):
        decode_mutation(e.data, cache.lookup)
    golden = next(t for t in cache.by_id.values() if t.qualified == "golden.t")
    assert "partition" in golden.compiled

    assert cache.refresh() == []
    assert cache.by_id[golden.id] is golden and "partition" in golden.compiled

    doc = next(d for d in docs if d["keyspace"] == "golden" and d["table"] == "t")
    col = next(c for c in doc["columns"] if c["kind"] == "regular")
    col["type"] = "blob"  # an ALTER (a different definition)
    changed = cache.refresh()
    assert [t.id for t in changed] == [uuid.UUID(doc["id"])]
    fresh = cache.by_id[golden.id]
    assert fresh is not golden and fresh.compiled == {}
    assert fresh.by_name[col["name"]].type_text == "blob"
