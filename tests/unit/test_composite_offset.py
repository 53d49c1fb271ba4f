"""The composite offset several logs of one task share (MongoDB shards, SQL Server databases)."""

import pytest

from cdc.errors import OffsetError
from cdc.offsets.composite import POSITIONS, CompositePosition


def test_each_offset_carries_every_log_as_of_its_emission() -> None:
    p = CompositePosition()
    first = p.advance("rs0", {"ts": 1})
    second = p.advance("rs1", {"ts": 7})
    third = p.advance("rs0", {"ts": 2})
    assert first == {POSITIONS: {"rs0": {"ts": 1}}}
    assert second == {POSITIONS: {"rs0": {"ts": 1}, "rs1": {"ts": 7}}}
    assert third == {POSITIONS: {"rs0": {"ts": 2}, "rs1": {"ts": 7}}}
    assert p.logs == ["rs0", "rs1"]


def test_resumes_from_a_stored_offset_and_forgets_a_removed_log() -> None:
    p = CompositePosition({POSITIONS: {"a": {"lsn": "x"}, "b": {"lsn": "y"}}})
    assert p.get("a") == {"lsn": "x"}
    assert p.get("c") is None
    assert p.forget("a") == {POSITIONS: {"b": {"lsn": "y"}}}


@pytest.mark.parametrize(
    "stored, message",
    [({"lsn": 5}, "has no 'positions' object"), ({POSITIONS: {"a": 3}}, "of 'a' is not an object")],
)
def test_a_malformed_stored_offset_is_named(stored: dict[str, object], message: str) -> None:
    with pytest.raises(OffsetError, match=message):
        CompositePosition(stored)
