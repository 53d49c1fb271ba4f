"""Smoke run of bench/envelope_bench.py: it runs, and its baseline computes the same event."""

from __future__ import annotations

import json

from bench import envelope_bench as b
from cdc.converters import converter_from_config
from cdc.spi import Operation, RowChange


def test_envelope_bench_runs_and_baseline_is_equivalent() -> None:
    assert b.run_tidemark(200) > 0
    assert b.run_stdlib(200) > 0
    d, _, table = b.setup()
    [rec] = d._row_records(
        RowChange(Operation.CREATE, table.id, None, b.ROW, b.source(7), {"lsn": 7}),
        d.schemas[table.id],
        "c",
    )
    payload = json.loads(
        converter_from_config({}, is_key=False).from_connect(rec.topic, rec.value_schema, rec.value)
        or b""
    )["payload"]
    assert payload["after"] == {
        "id": 42,
        "first_name": "Anne",
        "last_name": "Kretchmar",
        "email": "annek@noanswer.org",
        "price": "BNI=",
        "qty": 1000,
        "active": True,
        "created": 1529507596945104,
        "updated": "2018-06-20T15:13:16.945104Z",
        "ratio": 0.25,
    }
    assert payload["source"]["lsn"] == 7
