"""The Kafka ceiling: a confluent-kafka producer loop of pre-serialised payloads.

The cheapest way any Python CDC process could put the same records into the same broker:
the drain's own bench_rows records (keys and values exactly as tidemark wrote them, read back
from its topic) produced again, cycling through the sample, with the producer settings every
contender uses. No decoding, no envelope, no serialisation: what remains is librdkafka and the
broker. Run as its own process so its CPU and peak RSS are its own.

    python -m bench.compare.kafka_ceiling SAMPLE.json TOPIC EVENTS  (with KAFKA_BOOTSTRAP set)
"""

from __future__ import annotations

import base64
import json
import os
import sys
from pathlib import Path
from typing import Any


def produce(
    sample: list[tuple[bytes, bytes]], topic: str, events: int, conf: dict[str, Any]
) -> None:
    from confluent_kafka import Producer

    producer = Producer(conf)
    put = producer.produce
    n = len(sample)
    for i in range(events):
        key, value = sample[i % n]
        while True:
            try:
                put(topic, value, key)
                break
            except BufferError:
                producer.poll(0.1)
    if producer.flush(300) != 0:
        raise SystemExit("not every record was acknowledged")


def main(argv: list[str]) -> None:
    spec = json.loads(Path(argv[0]).read_text())
    sample = [(base64.b64decode(k), base64.b64decode(v)) for k, v in spec["sample"]]
    conf = {"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP"], **spec["producer"]}
    produce(sample, argv[1], int(argv[2]), conf)


if __name__ == "__main__":
    main(sys.argv[1:])
