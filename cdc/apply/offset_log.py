"""A micro-batch's Kafka offset ranges, read from the query's own write-ahead log.

The direct reader (``direct_reader``) reads exactly the records Spark's Kafka source would have
read for a batch, so it needs that batch's ranges. Spark writes a batch's end offsets to
``<checkpoint>/offsets/<batch id>`` *before* it runs the batch, and its start offsets are the
previous batch's end (or, for the first batch, the initial offsets the Kafka source wrote to
``<checkpoint>/sources/0/0``). These files are Spark's recovery log, which a newer Spark must
keep reading to resume old checkpoints, so their format is as stable as the checkpoint itself;
a file in any other shape than the one parsed here makes :func:`batch_ranges` return ``None``,
and the batch is then read by Spark's Kafka source instead (never with guessed ranges).

A topic-partition in the end offsets without a start (a partition or topic that appeared since
the last batch) starts at :data:`EARLIEST`, as in Spark's source, which reads new partitions
from their earliest offset. A partition or topic gone since the last batch is not read: Spark's
micro-batch planning has reported that as data loss (``kafka.fail.on.data.loss``) before the
batch reaches the job (tests/integration/test_apply_direct_reader.py shows it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import orjson

#: the start of a partition first seen in this batch: its earliest available offset
EARLIEST = -2

Offsets = dict[tuple[str, int], int]


@dataclass(frozen=True, order=True)
class OffsetRange:
    topic: str
    partition: int
    start: int  # first offset to read, or EARLIEST
    end: int  # one past the last offset to read


def parse_kafka_offsets(text: str) -> Offsets | None:
    """``{"topic": {"0": 12, "1": 40}}``, the Kafka source's offset JSON."""
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(doc, dict):
        return None
    out: Offsets = {}
    for topic, parts in doc.items():
        if not isinstance(parts, dict):
            return None
        for partition, offset in parts.items():
            if not (isinstance(offset, int) and partition.isdigit()) or offset < 0:
                return None
            out[(topic, int(partition))] = offset
    return out


def parse_batch_offsets(text: str) -> Offsets | None:
    """The end offsets in ``offsets/<batch id>``: a ``v1`` line, the batch metadata line, then
    one line per source (this query has one)."""
    lines = text.split("\n")
    if len(lines) < 3 or lines[0] != "v1" or not lines[1].startswith("{"):
        return None
    sources = [line for line in lines[2:] if line]
    if len(sources) != 1:
        return None
    return parse_kafka_offsets(sources[0])


def parse_initial_offsets(text: str) -> Offsets | None:
    """``sources/0/0``: an optional NUL byte (written for Spark 2.1's reader), ``v1``, then the
    offset JSON."""
    head, _, body = text.removeprefix("\x00").partition("\n")
    if head != "v1":
        return None
    return parse_kafka_offsets(body.strip())


def batch_ranges(
    read_text: Callable[[str], str | None], checkpoint: str, batch_id: int
) -> list[OffsetRange] | None:
    """The ranges batch ``batch_id`` reads, from the files under ``checkpoint``; ``read_text``
    returns a file's text or ``None`` when it does not exist. ``None``: the log does not say
    (missing file, unknown format), so the caller must let Spark read the batch."""
    base = checkpoint.rstrip("/")
    end_text = read_text(f"{base}/offsets/{batch_id}")
    if end_text is None:
        return None
    end = parse_batch_offsets(end_text)
    if batch_id == 0:
        start_text = read_text(f"{base}/sources/0/0")
        start = None if start_text is None else parse_initial_offsets(start_text)
    else:
        start_text = read_text(f"{base}/offsets/{batch_id - 1}")
        start = None if start_text is None else parse_batch_offsets(start_text)
    if end is None or start is None:
        return None
    ranges = []
    for (topic, partition), until in sorted(end.items()):
        begin = start.get((topic, partition), EARLIEST)
        if begin != EARLIEST and begin > until:
            return None  # offsets went back (a topic re-created): Spark's source reports it
        if begin != until:
            ranges.append(OffsetRange(topic, partition, begin, until))
    return ranges
