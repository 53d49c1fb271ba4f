"""PostgreSQL offsets around a restarted snapshot (issue 12.1)."""

from __future__ import annotations

from connectors.postgres.offsets import handover_offset, validate_offset

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
