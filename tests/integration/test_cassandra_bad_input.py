"""Damaged or foreign commit logs in cdc_raw stop the task naming the file and the position,
and the offset never moves past them; mutations of tables the node does not know follow
inconsistent.schema.handling.mode. The segment is a real one (tests/fixtures/cassandra) whose
keyspace ``golden`` does not exist on the node the test runs against."""

from __future__ import annotations

import gzip
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cdc.offsets.memory import MemoryOffsetStore
from tests.integration.cassandra_harness import CassandraHarness, RunningConnector, module_harness
from tests.integration.conftest import CassandraInfo

pytestmark = [pytest.mark.cassandra, pytest.mark.kafka]

FIXTURES = Path(__file__).parents[1] / "fixtures" / "cassandra"


@pytest.fixture(scope="module")
def h(
    cassandra: CassandraInfo, kafka: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CassandraHarness]:
    yield from module_harness(cassandra, kafka, tmp_path_factory, "csbad")


def _cdc_raw(h: CassandraHarness, name: str, corrupt_at: int | None = None) -> tuple[Path, Path]:
    h.cql("DROP KEYSPACE IF EXISTS golden")  # the fixture's tables must be unknown here
    raw = h.tmp / f"raw_{name}_{time.monotonic_ns()}"
    raw.mkdir()
    data = bytearray(gzip.decompress((FIXTURES / "plain.log.gz").read_bytes()))
    if corrupt_at is not None:
        data[corrupt_at] ^= 0xFF
    segment = raw / (FIXTURES / "plain.segment").read_text().strip()
    segment.write_bytes(bytes(data))
    limit = (FIXTURES / "plain.idx").read_text().strip()
    segment.with_name(segment.name[:-4] + "_cdc.idx").write_text(f"{limit}\nCOMPLETED")
    return raw, segment


def _wait_failed(run: RunningConnector, timeout: float = 30.0) -> BaseException:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not run.errors:
        time.sleep(0.1)
    run.stop()
    assert run.errors, "the task did not fail"
    return run.errors[0]


def test_unknown_table_fails_naming_file_and_position(h: CassandraHarness) -> None:
    raw, segment = _cdc_raw(h, "unknown")
    cfg = h.config(
        **{
            "snapshot.mode": "never",
            "cassandra.cdc.raw.dir": str(raw),
            "inconsistent.schema.handling.mode": "fail",
        }
    )
    store = MemoryOffsetStore()
    err = _wait_failed(h.start(cfg, store))
    assert f"commit log {segment.name} at position " in str(err)
    assert "unknown table id" in str(err)
    assert "inconsistent.schema.handling.mode" in str(err)
    assert segment.exists()  # not handed to the transfer: never delivered


def test_unknown_table_warn_passes_over_it(h: CassandraHarness) -> None:
    raw, segment = _cdc_raw(h, "warn")
    cfg = h.config(**{"snapshot.mode": "never", "cassandra.cdc.raw.dir": str(raw)})
    with h.running(cfg) as run:
        h.wait_streaming(run)
        # the whole COMPLETED segment is read, acknowledged and deleted
        h.wait_for(lambda: not segment.exists(), run=run)


def test_crc_mismatch_stops_at_the_damaged_mutation(h: CassandraHarness) -> None:
    # a byte inside the first entry's payload (after the 20-byte descriptor and 8-byte marker)
    raw, segment = _cdc_raw(h, "crc", corrupt_at=20 + 8 + 8 + 5)
    cfg = h.config(**{"snapshot.mode": "never", "cassandra.cdc.raw.dir": str(raw)})
    store = MemoryOffsetStore()
    err = _wait_failed(h.start(cfg, store))
    assert str(err).startswith(f"commit log {segment.name} at position 28: mutation CRC mismatch")
    assert segment.exists()
    assert store.all(cfg["name"]) == []  # the offset never moved past it


def test_crc_mismatch_with_warn_skips_the_damaged_section(
    h: CassandraHarness, caplog: pytest.LogCaptureFixture
) -> None:
    raw, segment = _cdc_raw(h, "crcwarn", corrupt_at=20 + 8 + 8 + 5)
    cfg = h.config(
        **{
            "snapshot.mode": "never",
            "cassandra.cdc.raw.dir": str(raw),
            "event.processing.failure.handling.mode": "warn",
        }
    )
    with h.running(cfg) as run:
        h.wait_streaming(run)
        h.wait_for(lambda: not segment.exists(), run=run)  # read to its end and delivered
        assert run.engine.metrics.extra["number-of-unrecoverable-errors"]() == 1
    assert f"commit log {segment.name} at position 28: mutation CRC mismatch" in caplog.text
