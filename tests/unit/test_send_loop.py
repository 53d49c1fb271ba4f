"""The send loop: the compiled loop for JSON-converted records (``send_json``) must hand the
producer exactly what the Python loop hands it, in the same order, for every kind of record
a batch can hold, and leave everything unusual to the Python path.

The sink here is a stand-in (``RecordingSink``): it records what ``produce`` and ``send``
were given instead of talking to Kafka, and makes ``produce`` refuse one record with a full
buffer, as librdkafka does. The real producer is exercised by every integration test, all of
which send through this loop."""

from __future__ import annotations

from typing import Any

import pytest

from cdc.converters import converter_from_config
from cdc.converters.json import compiled_send
from cdc.metrics import TaskMetrics
from cdc.offsets.memory import MemoryOffsetStore
from cdc.offsets.writer import OffsetWriter
from cdc.pipeline.delivery import AtLeastOnceDelivery
from cdc.pipeline.failures import FailureHandler
from cdc.record import SourceRecord, offset_marker
from cdc.schema.model import Type, primitive, struct
from cdc.transforms import build_chain

PARTITION = {"server": "srv"}
KEY = struct([("id", primitive(Type.INT64))], name="srv.t.Key")
VALUE = struct(
    [
        ("id", primitive(Type.INT64)),
        ("name", primitive(Type.STRING, optional=True)),
        ("score", primitive(Type.FLOAT64, optional=True)),
    ],
    name="srv.t.Value",
)


class RecordingProducer:
    """Stand-in for confluent-kafka's Producer: records each produce call; the call whose
    number is in ``full_at`` raises BufferError once (librdkafka's full queue)."""

    def __init__(self, full_at: set[int]) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.full_at = set(full_at)
        self.attempts = 0

    def produce(self, topic: str, value: Any = None, key: Any = None, **kw: Any) -> None:
        self.attempts += 1
        if self.attempts in self.full_at:
            self.full_at.discard(self.attempts)
            raise BufferError("Local: Queue full")
        self.calls.append((topic, key, value, kw.get("headers"), kw.get("partition")))

    def poll(self, timeout: float = 0.0) -> int:
        return 0


class RecordingSink:
    """Stand-in for KafkaSink (the parts the send loop uses)."""

    def __init__(self, producer: RecordingProducer) -> None:
        self.producer = producer
        self.known_topics: set[str] = set()
        self.fast_topics: set[str] = set()
        self.topic_limits: dict[str, int] = {}

    def ensure_topics(self, topics: Any) -> None:
        self.known_topics.update(topics)
        self.fast_topics.update(topics)

    def send(
        self, topic: str, key: Any, value: Any, headers: Any, partition: int | None = None
    ) -> None:
        while True:
            try:
                if partition is not None:
                    self.producer.produce(topic, value, key, partition=partition, headers=headers)
                elif headers:
                    self.producer.produce(topic, value, key, headers=headers)
                else:
                    self.producer.produce(topic, value, key)
                return
            except BufferError:
                self.producer.poll(0.1)


def rec(topic: str, i: int | None, **kw: Any) -> SourceRecord:
    key = None if i is None else {"id": i}
    value = None if i is None else {"id": i, "name": f"n{i}", "score": i / 7}
    return SourceRecord(
        topic,
        kw.pop("key_schema", KEY if key is not None else None),
        kw.pop("key", key),
        kw.pop("value_schema", VALUE if value is not None else None),
        kw.pop("value", value),
        PARTITION,
        {"pos": i},
        **kw,
    )


def batch() -> list[SourceRecord]:
    """Every kind of record the loop meets, with runs of ordinary ones between them."""
    out = [rec("t", i) for i in range(5)]
    out.append(offset_marker(PARTITION, {"pos": "m"}))
    out += [rec("t", i) for i in range(5, 9)]
    out.append(rec("new", 9))  # first record for a topic: ensured, then sent
    out += [rec("new", i) for i in range(10, 12)]
    out.append(SourceRecord("t", KEY, {"id": 12}, None, None, PARTITION, {"pos": 12}))  # tombstone
    out.append(rec("t", 13, headers=[("h", b"v")]))
    out.append(rec("t", 14, kafka_partition=0))
    out.append(SourceRecord("dlq", None, b"k", None, b"raw", PARTITION, {"pos": 15}, raw=True))
    out.append(rec("t", 16, value={"id": 16, "name": object(), "score": None}))  # no JSON
    out.append(rec("t", 17, key_schema=None, key=None))  # a table without a key
    out.append(rec("t", 18, value={"id": 18, "name": None, "score": float("nan")}))
    other = struct([("id", primitive(Type.INT64))], name="srv.t.Value")
    out.append(rec("t", 19, value_schema=other, value={"id": 19}))  # a schema not seen yet
    out += [rec("t", i) for i in range(20, 30)]
    out.append(offset_marker(PARTITION, {"pos": "end"}))
    return out


def run(compiled: bool, full_at: set[int]) -> tuple[list[tuple[Any, ...]], int, int]:
    producer = RecordingProducer(full_at)
    sink = RecordingSink(producer)
    metrics = TaskMetrics("memory", "srv", "t")
    store = MemoryOffsetStore()
    delivery = AtLeastOnceDelivery(
        sink=sink,  # type: ignore[arg-type]
        store=store,
        writer=OffsetWriter(store, "t", PARTITION),
        transforms=build_chain({}),
        key_converter=converter_from_config({}, is_key=True),
        value_converter=converter_from_config({}, is_key=False),
        failures=FailureHandler("warn", metrics),
        metrics=metrics,
        partition=PARTITION,
        stopping=lambda: False,
        flush_timeout_s=1.0,
    )
    sink.ensure_topics(["t"])
    if not compiled:
        delivery._compiled_send = None
    else:
        assert delivery._compiled_send is not None, "the compiled writer is not built"
    records = batch()
    delivery.process(records[:3])  # compiles the schemas in the Python path first
    delivery.process(records[3:])
    return producer.calls, metrics.records_sent, metrics.streaming.total_events_seen


@pytest.mark.parametrize("full_at", [set(), {2, 7, 14, 30}])
def test_compiled_loop_produces_what_the_python_loop_does(full_at: set[int]) -> None:
    want, want_sent, _ = run(False, full_at)
    got, sent, _ = run(True, full_at)
    assert got == want and sent == want_sent
    # every record but the two markers and the one that cannot be encoded
    assert sent == 32 - 2 - 1 and len(got) == sent
    topics = [c[0] for c in got]
    assert topics.count("new") == 3 and topics.count("dlq") == 1
    tombstone = next(c for c in got if c[2] is None)
    assert tombstone[1].endswith(b'"name":"srv.t.Key"},"payload":{"id":12}}')
    with_headers = next(c for c in got if c[3])
    assert with_headers[1].endswith(b'"payload":{"id":13}}') and with_headers[3] == [("h", b"v")]
    fixed = next(c for c in got if c[4] is not None)
    assert fixed[1].endswith(b'"payload":{"id":14}}') and fixed[4] == 0


def test_compiled_loop_is_offered_only_for_json_converters() -> None:
    json_key = converter_from_config({}, is_key=True)
    json_value = converter_from_config({}, is_key=False)
    assert compiled_send(json_key, json_value) is not None
    avro = converter_from_config(
        {
            "value.converter": "avro",
            "value.converter.schema.registry.url": "http://127.0.0.1:9",
        },
        is_key=False,
    )
    assert compiled_send(json_key, avro) is None
    assert compiled_send(avro, json_value) is None
