"""Memory and file offset stores: semantics, key canonicalisation, crash safety of the file."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from cdc.errors import OffsetError
from cdc.offsets import FileOffsetStore, MemoryOffsetStore, OffsetStore, offset_key
from cdc.offsets.kafka import murmur2_partition
from cdc.offsets.store import parse_offset_key, parse_offset_value


@pytest.fixture(params=["memory", "file"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OffsetStore]:
    s: OffsetStore = (
        MemoryOffsetStore() if request.param == "memory" else FileOffsetStore(tmp_path / "o.json")
    )
    with s:
        yield s


# -- common semantics ------------------------------------------------------------------------


def test_put_get_delete(store: OffsetStore) -> None:
    assert store.get("c1", {"server": "s"}) is None
    store.put("c1", {"server": "s"}, {"lsn": 10, "txId": 5})
    assert store.get("c1", {"server": "s"}) == {"lsn": 10, "txId": 5}
    store.put("c1", {"server": "s"}, {"lsn": 20})
    assert store.get("c1", {"server": "s"}) == {"lsn": 20}
    store.put("c1", {"server": "s"}, None)
    assert store.get("c1", {"server": "s"}) is None
    store.put("c1", {"server": "s"}, None)  # deleting nothing is fine


def test_connectors_and_partitions_are_separate(store: OffsetStore) -> None:
    store.put_many(
        [
            ("c1", {"server": "a"}, {"pos": 1}),
            ("c1", {"server": "b"}, {"pos": 2}),
            ("c2", {"server": "a"}, {"pos": 3}),
        ]
    )
    assert store.get("c1", {"server": "a"}) == {"pos": 1}
    assert store.get("c2", {"server": "a"}) == {"pos": 3}
    assert sorted(store.all("c1"), key=lambda e: e[0]["server"]) == [
        ({"server": "a"}, {"pos": 1}),
        ({"server": "b"}, {"pos": 2}),
    ]
    assert store.all("c2") == [({"server": "a"}, {"pos": 3})]
    assert store.all("nope") == []


def test_partition_key_order_does_not_matter(store: OffsetStore) -> None:
    store.put("c", {"rs": "rs0", "server_id": "m"}, {"sec": 1})
    store.put("c", {"server_id": "m", "rs": "rs0"}, {"sec": 2})
    assert store.get("c", {"server_id": "m", "rs": "rs0"}) == {"sec": 2}
    assert len(store.all("c")) == 1


def test_values_are_copied(store: OffsetStore) -> None:
    gtids = ["a"]
    offset = {"file": "bin.1", "nested": {"gtids": gtids}}
    store.put("c", {"server": "s"}, offset)
    gtids.append("b")
    got = store.get("c", {"server": "s"})
    assert got == {"file": "bin.1", "nested": {"gtids": ["a"]}}
    assert got is not None
    got["file"] = "changed"
    assert store.get("c", {"server": "s"}) == {"file": "bin.1", "nested": {"gtids": ["a"]}}


def test_bad_item_rejects_the_whole_batch(store: OffsetStore) -> None:
    with pytest.raises(OffsetError, match="JSON"):
        store.put_many(
            [("c", {"server": "a"}, {"pos": 1}), ("c", {"server": "b"}, {"x": object()})]
        )
    assert store.all("c") == []
    with pytest.raises(OffsetError, match="connector name"):
        store.put("", {"server": "a"}, {"pos": 1})


def test_offset_key_is_connects_layout_with_sorted_keys() -> None:
    assert (
        offset_key("inventory", {"server": "db1", "a": 1})
        == b'["inventory",{"a":1,"server":"db1"}]'
    )
    assert parse_offset_key(b'["c", {"z": 1, "a": 2}]') == ("c", {"z": 1, "a": 2})
    with pytest.raises(OffsetError):
        parse_offset_key(b'{"c": 1}')
    assert parse_offset_value(None) is None
    assert parse_offset_value(b'{"lsn": 1}') == {"lsn": 1}
    with pytest.raises(OffsetError):
        parse_offset_value(b"[1]")


def test_murmur2_matches_kafka_reference_values() -> None:
    # Values from Kafka's UtilsTest.testMurmur2 / DefaultPartitionerTest.
    def murmur2(data: bytes) -> int:
        # Recover the signed 32-bit hash from the partition function with a huge modulus.
        return murmur2_partition(data, 2**31)

    assert murmur2(b"21") == -973932308 & 0x7FFFFFFF
    assert murmur2(b"foobar") == -790332482 & 0x7FFFFFFF
    assert murmur2(b"a-little-bit-long-string") == -985981536 & 0x7FFFFFFF
    assert murmur2(b"a-little-bit-longer-string") == -1486304829 & 0x7FFFFFFF
    assert murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") == -58897971 & 0x7FFFFFFF
    assert murmur2(b"abc") == 479470107


# -- the file store --------------------------------------------------------------------------


def _store(path: Path) -> FileOffsetStore:
    s = FileOffsetStore(path)
    s.start()
    return s


def test_file_survives_restart_and_is_readable_json(tmp_path: Path) -> None:
    path = tmp_path / "offsets.json"
    s = _store(path)
    s.put("c", {"server": "s"}, {"lsn": 1})
    s.close()
    doc = orjson.loads(path.read_bytes())
    assert doc == {
        "version": 1,
        "offsets": [{"connector": "c", "partition": {"server": "s"}, "offset": {"lsn": 1}}],
    }
    assert _store(path).get("c", {"server": "s"}) == {"lsn": 1}


def test_file_not_started_is_an_error(tmp_path: Path) -> None:
    s = FileOffsetStore(tmp_path / "o.json")
    with pytest.raises(OffsetError, match="not started"):
        s.get("c", {})
    with pytest.raises(OffsetError, match="not started"):
        s.put("c", {}, {"a": 1})


def test_file_keeps_the_previous_generation(tmp_path: Path) -> None:
    path = tmp_path / "o.json"
    s = _store(path)
    s.put("c", {"p": 1}, {"gen": 1})
    assert not (tmp_path / "o.json.prev").exists()
    s.put("c", {"p": 1}, {"gen": 2})
    s.put("c", {"p": 1}, {"gen": 3})
    prev = orjson.loads((tmp_path / "o.json.prev").read_bytes())
    assert prev["offsets"][0]["offset"] == {"gen": 2}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.json", "o.json.prev"]


def test_leftover_temp_file_is_ignored_and_removed(tmp_path: Path) -> None:
    path = tmp_path / "o.json"
    s = _store(path)
    s.put("c", {"p": 1}, {"gen": 1})
    s.close()
    # A crash after the temp file was written but before the rename.
    leftover = tmp_path / ".o.json.abc123.tmp"
    leftover.write_bytes(b'{"version": 1, "offsets": [{"conn')
    s = _store(path)
    assert s.get("c", {"p": 1}) == {"gen": 1}
    assert not leftover.exists()


def test_failed_rename_leaves_the_committed_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "o.json"
    s = _store(path)
    s.put("c", {"p": 1}, {"gen": 1})
    real_replace = os.replace

    def crash(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        if Path(dst) == path:
            raise OSError(28, "No space left on device")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OffsetError, match="No space left"):
        s.put("c", {"p": 1}, {"gen": 2})
    monkeypatch.undo()
    assert s.get("c", {"p": 1}) == {"gen": 1}  # memory agrees with disk
    assert _store(path).get("c", {"p": 1}) == {"gen": 1}
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize(
    "damage", [b"", b'{"version": 1, "offsets": [{"connector": "c", "par', b"\x00" * 64]
)
def test_damaged_main_file_falls_back_to_prev(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: bytes
) -> None:
    path = tmp_path / "o.json"
    s = _store(path)
    s.put("c", {"p": 1}, {"gen": 1})
    s.put("c", {"p": 1}, {"gen": 2})
    s.close()
    path.write_bytes(damage)
    with caplog.at_level(logging.WARNING, logger="cdc.offsets.file"):
        s = _store(path)
    assert s.get("c", {"p": 1}) == {"gen": 1}
    assert "previous generation" in caplog.text
    # The damaged file must not become the new .prev: the good generation is kept.
    s.put("c", {"p": 1}, {"gen": 3})
    assert orjson.loads((tmp_path / "o.json.prev").read_bytes())["offsets"][0]["offset"] == {
        "gen": 1
    }
    s.put("c", {"p": 1}, {"gen": 4})
    assert orjson.loads((tmp_path / "o.json.prev").read_bytes())["offsets"][0]["offset"] == {
        "gen": 3
    }


def test_wrong_shape_counts_as_damaged(tmp_path: Path) -> None:
    path = tmp_path / "o.json"
    path.write_bytes(b'{"version": 1, "offsets": [{"connector": "c"}]}')
    with pytest.raises(OffsetError, match="entry 0"):
        _store(path)
    path.write_bytes(b'{"version": 7, "offsets": []}')
    with pytest.raises(OffsetError, match="version"):
        _store(path)


def test_missing_main_uses_prev(tmp_path: Path) -> None:
    path = tmp_path / "o.json"
    s = _store(path)
    s.put("c", {"p": 1}, {"gen": 1})
    s.put("c", {"p": 1}, {"gen": 2})
    s.close()
    path.unlink()
    assert _store(path).get("c", {"p": 1}) == {"gen": 1}


def test_both_generations_damaged_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "o.json"
    s = _store(path)
    s.put("c", {"p": 1}, {"gen": 1})
    s.put("c", {"p": 1}, {"gen": 2})
    s.close()
    path.write_bytes(b'{"trunc')
    (tmp_path / "o.json.prev").write_bytes(b"")
    with pytest.raises(OffsetError) as info:
        _store(path)
    message = str(info.value)
    assert "o.json:" in message and "o.json.prev:" in message
    assert "Refusing to start" in message


def test_damaged_main_without_prev_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "o.json"
    path.write_bytes(b"not json")
    with pytest.raises(OffsetError, match="prev: missing"):
        _store(path)


def test_no_files_means_no_offsets(tmp_path: Path) -> None:
    s = _store(tmp_path / "sub" / "dir" / "o.json")
    assert s.all("c") == []
    s.put("c", {"p": 1}, {"gen": 1})
    assert (tmp_path / "sub" / "dir" / "o.json").exists()


def test_leadership_still_settling_after_a_topic_is_created_is_retried() -> None:
    """A worker failed to start on UNKNOWN_LEADER_EPOCH from a status topic created a moment
    before ("Leader epoch is newer than broker epoch"): it settles within moments."""
    from confluent_kafka import KafkaError, KafkaException

    from cdc.offsets.kafka import _worth_retrying

    for code in (KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError.LEADER_NOT_AVAILABLE):
        assert _worth_retrying(KafkaException(KafkaError(code)))
    assert not _worth_retrying(KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)))
