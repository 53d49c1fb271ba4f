"""PostgreSQL offsets around a restarted snapshot (issue 12.1)."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from cdc.envelope import source_shaper
from cdc.spi import TableId
from connectors.postgres.connector import SOURCE_SCHEMA_V3, source_derive_v3
from connectors.postgres.offsets import WalPosition, handover_offset, validate_offset
from connectors.postgres.streaming import _StreamState

PARTITION = {"server": "s"}


def test_an_older_release_snapshot_row_offset_resumes_after_its_lsn() -> None:
    legacy = {"lsn": 1000, "snapshot": True, "txId": 7, "ts_usec": 5}
    assert handover_offset(legacy) == {
        "lsn": 1000,
        "lsn_commit": 1000,
        "seq": 0,
        "complete": False,
        "flush_lsn": 1000,
        "txId": 7,
        "ts_usec": 5,
    }


def test_a_streaming_offset_is_handed_over_unchanged() -> None:
    stored = {
        "lsn": 900,
        "lsn_commit": 950,
        "seq": 2,
        "complete": False,
        "flush_lsn": 800,
        "txId": 3,
        "ts_usec": 1,
    }
    assert handover_offset(stored) == stored


def test_a_mid_snapshot_offset_can_be_stored_back() -> None:
    origin = handover_offset({"lsn": 1000})
    offset = {"lsn": 1200, "snapshot": True, "txId": 8, "ts_usec": 1, "snapshot_origin": origin}
    assert validate_offset(PARTITION, offset) == (offset, [])
    _, problems = validate_offset(PARTITION, {**offset, "snapshot_origin": {"lsn": "x"}})
    assert len(problems) == 1 and "snapshot_origin" in problems[0]


# -- WalPosition: the typed offset, and the stored JSON it must keep ---------------------------
# Stored by earlier releases (the file/Kafka offset stores write the map as JSON in this order).
STORED_STREAMING = (
    '{"lsn":24023128,"txId":771,"ts_usec":1732540000123456,"lsn_commit":24023200,'
    '"seq":3,"complete":false,"flush_lsn":24022000}'
)
STORED_AFTER_SNAPSHOT = (
    '{"lsn":24023128,"ts_usec":1732540000123456,"lsn_commit":24023128,"seq":0,'
    '"complete":false,"flush_lsn":24023128,"txId":null}'
)


def _dumps(offset: dict[str, Any]) -> str:
    return json.dumps(offset, separators=(",", ":"))


def test_a_stored_streaming_offset_loads_and_writes_back_byte_identical() -> None:
    position = WalPosition.from_offset(json.loads(STORED_STREAMING))
    assert position == WalPosition(24023128, 771, 1732540000123456, 24023200, 3, False, 24022000)
    assert _dumps(position.to_offset()) == STORED_STREAMING
    assert WalPosition.from_offset(position.to_offset()) == position


def test_an_offset_stored_after_a_snapshot_loads_and_hands_over_byte_identical() -> None:
    stored = json.loads(STORED_AFTER_SNAPSHOT)
    position = WalPosition.from_offset(stored)
    assert (position.lsn_commit, position.seq, position.complete) == (24023128, 0, False)
    assert position.flush_lsn == 24023128 and position.tx_id is None
    assert _dumps(handover_offset(stored)) == STORED_AFTER_SNAPSHOT
    # the snapshot writes its position in that same form
    fresh = handover_offset({"lsn": 24023128, "ts_usec": 1732540000123456})
    assert _dumps(fresh) == STORED_AFTER_SNAPSHOT


def test_keys_walposition_does_not_model_survive_the_handover() -> None:
    stored = {**json.loads(STORED_STREAMING), "lsn_proc": 24023000, "xmin": None}
    assert _dumps(handover_offset(stored)) == _dumps(stored)


def test_a_malformed_offset_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="not a PostgreSQL connector offset"):
        WalPosition.from_offset({"lsn": "zero"})


def test_an_lsn_only_offset_is_completed_as_delivered_through_that_lsn() -> None:
    checked, problems = validate_offset(PARTITION, {"lsn": 500})
    assert problems == []
    assert _dumps(checked or {}) == (
        '{"lsn":500,"lsn_commit":500,"seq":0,"complete":true,"flush_lsn":500}'
    )
    assert WalPosition.from_offset(checked or {}) == WalPosition.delivered_through(500)


def test_the_streaming_loops_inline_offsets_are_walposition_offsets() -> None:
    """The hot path builds offset maps directly; they must be exactly ``to_offset``'s."""
    state = SimpleNamespace(xid=771, commit_ts_us=1732540000123456)
    built = _StreamState._offset(state, 24023128, 24023200, 3, False, 24022000)  # type: ignore[arg-type]
    assert _dumps(built) == STORED_STREAMING

    table = SimpleNamespace(id=TableId(None, "public", "t"))
    row_state = SimpleNamespace(
        seq=2,
        skip_tx=False,
        skip_through=0,
        commit_lsn=24023200,
        resume=SimpleNamespace(lsn_commit=0, seq=0),
        relations={16384: (table, True, ())},
        commit_ts_ms=1732540000123,
        commit_ts_us=1732540000123456,
        dbname="db",
        xid=771,
        flush_lsn=24022000,
        row_sources={},
        source_prefix={},
        shape=None,
    )
    row_state._row_source = lambda oid, lsn: _StreamState._row_source(row_state, oid, lsn)  # type: ignore[arg-type]
    position = _StreamState._row_position(row_state, 16384, 24023128)  # type: ignore[arg-type]
    assert position is not None
    assert _dumps(position[2]) == STORED_STREAMING
    # the next rows are built from the table's cached source: the same maps again
    row_state.seq = 2
    position = _StreamState._row_position(row_state, 16384, 24023128)  # type: ignore[arg-type]
    assert position is not None
    assert _dumps(position[2]) == STORED_STREAMING
    row_state.seq = 2
    position = _StreamState._row_position(row_state, 16384, 24023128)  # type: ignore[arg-type]
    assert position is not None
    assert _dumps(position[2]) == STORED_STREAMING
    assert position[1] == {
        "ts_ms": 1732540000123,
        "snapshot": False,
        "db": "db",
        "schema": "public",
        "table": "t",
        "txId": 771,
        "lsn": 24023128,
        "xmin": None,
    }


@pytest.mark.parametrize("flush_lsn", [0, 24022000])
def test_a_source_shaped_once_per_table_is_what_the_3x_shaper_gives_per_row(
    flush_lsn: int,
) -> None:
    """With envelope.version=3 the stream shapes a table's source once and sets the per-row
    fields itself: the result must be exactly the dispatcher's shaper output for the row's
    1.2 source and offset (values and key order)."""
    shaper = source_shaper(SOURCE_SCHEMA_V3, {"version": "v", "connector": "postgresql",
                                               "name": "srv"}, source_derive_v3)  # fmt: skip
    table = SimpleNamespace(id=TableId(None, "public", "t"))

    def state(shape: Any) -> Any:
        st = SimpleNamespace(
            seq=0, skip_tx=False, skip_through=0, commit_lsn=24023200,
            resume=SimpleNamespace(lsn_commit=0, seq=0),
            relations={16384: (table, True, ())}, commit_ts_ms=1732540000123,
            commit_ts_us=1732540000123456, dbname="db", xid=771, flush_lsn=flush_lsn,
            row_sources={}, source_prefix={}, shape=shape,
        )  # fmt: skip
        st._row_source = lambda oid, lsn: _StreamState._row_source(st, oid, lsn)  # type: ignore[arg-type]
        return st

    plain, shaped = state(None), state(shaper)
    for lsn in (24023128, 24023136):
        want = _StreamState._row_position(plain, 16384, lsn)  # type: ignore[arg-type]
        got = _StreamState._row_position(shaped, 16384, lsn)  # type: ignore[arg-type]
        assert want is not None and got is not None
        expected = shaper(want[1], want[2])
        assert list(got[1].items()) == list(expected.items())
        assert got[2] == want[2]
    assert got[1]["sequence"] == (
        f'["{flush_lsn}","24023136"]' if flush_lsn else '[null,"24023136"]'
    )
