"""SQL Server LSNs and offsets: text form, order, increment, resume rules, REST validation."""

from __future__ import annotations

import pytest

from connectors.sqlserver.offsets import Lsn, SqlServerPosition, validate_offset


def lsn(text: str) -> Lsn:
    return Lsn.parse(text)


def test_lsn_text_round_trip_and_order() -> None:
    a = lsn("00000027:00000758:0003")
    assert str(a) == "00000027:00000758:0003"
    assert a.raw == bytes.fromhex("00000027000007580003")
    assert Lsn.parse("00000027000007580003") == a
    assert a < lsn("00000027:00000758:0004") < lsn("00000027:00000759:0000")
    assert lsn("00000028:00000000:0000") > lsn("00000027:ffffffff:ffff")


def test_increment_carries_into_the_block() -> None:
    assert lsn("00000027:00000758:ffff").increment() == lsn("00000027:00000759:0000")
    assert lsn("00000027:00000758:0003").increment() == lsn("00000027:00000758:0004")


@pytest.mark.parametrize("bad", ["", "27:758:3", "00000027:00000758", "zz000027:00000758:0003"])
def test_bad_lsn_text_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="not an LSN"):
        Lsn.parse(bad)


def test_null_and_zero_lsn_are_no_lsn() -> None:
    assert Lsn.of(None) is None
    assert Lsn.of(b"\0" * 10) is None
    assert Lsn.of(bytearray(b"\0\0\0\x27\0\0\x07\x58\0\x03")) == lsn("00000027:00000758:0003")


def test_offset_round_trip_in_debezium_shape() -> None:
    offset = {
        "commit_lsn": "00000027:00000758:0005",
        "change_lsn": "00000027:00000758:0003",
        "event_serial_no": 2,
    }
    pos = SqlServerPosition.from_offset(offset)
    assert pos.to_offset() == offset
    assert list(pos.to_offset()) == ["commit_lsn", "change_lsn", "event_serial_no"]


def test_resume_mid_commit_skips_exactly_what_was_emitted() -> None:
    commit, c1, c2 = lsn("00000027:00000758:0009"), lsn("0000002700000758000a"), None
    pos = SqlServerPosition(commit, lsn("00000027:00000758:0003"), 1)
    assert pos.from_lsn() == commit  # the rest of that commit is still to come
    assert pos.already_emitted(commit, lsn("00000027:00000758:0003"), 1)
    assert not pos.already_emitted(commit, lsn("00000027:00000758:0003"), 2)
    assert not pos.already_emitted(commit, lsn("00000027:00000758:0004"), 1)
    assert pos.already_emitted(lsn("00000027:00000758:0008"), lsn("00000027:00000758:0007"), 2)
    assert not pos.already_emitted(c1, lsn("00000027:00000758:0001"), 1)
    assert c2 is None


def test_completed_commit_resumes_after_it() -> None:
    commit = lsn("00000027:00000758:0009")
    done = SqlServerPosition(commit)
    assert done.completed and done.from_lsn() == lsn("00000027:00000758:000a")
    assert done.already_emitted(commit, lsn("00000027:00000758:0008"), 2)
    assert done.to_offset() == {
        "commit_lsn": str(commit),
        "change_lsn": None,
        "event_serial_no": None,
    }


def test_validate_offset_names_the_problem() -> None:
    ok = {"commit_lsn": "00000027:00000758:0009", "change_lsn": None, "snapshot": True}
    assert validate_offset({"server": "s"}, ok) == (ok, [])
    _, problems = validate_offset({"server": "s"}, {"commit_lsn": "nope", "lsn": 1})
    assert any("not an LSN" in p for p in problems)
    assert any("unknown offset key(s) lsn" in p for p in problems)
    _, problems = validate_offset({}, {"change_lsn": "00000027:00000758:0009"})
    assert 'partition must be {"server": ...}' in problems
    assert "offset.change_lsn needs offset.commit_lsn" in problems
