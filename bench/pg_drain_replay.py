"""The per-event Python cost of a PostgreSQL drain, replayed on one thread.

    .venv/bin/tidemark dev up postgres
    .venv/bin/python -m bench.pg_drain_replay [--rows 200000] [--per-tx 100] [--repeat 3]

``bench.pg_drain`` measures the whole process (two threads, librdkafka, the walsender's
pace), and on a shared box its CPU-seconds move by ±10 % between runs. This replays the
same work without those: the CopyData messages of a drain are recorded once from a real slot
(the ``items`` table of ``bench.pg_drain``), then fed again and again through the connector's
stream state, the dispatcher, the queue and the send loop (transforms, JSON converters) on
one thread, with a producer that only counts. It prints CPU-µs per event (process time,
minimum and median of ``--repeat``): what a change to the decoding, envelope, JSON or send
path saves, alternated with the code before it. On a loaded box count instructions instead,
which the load does not move: ``valgrind --tool=callgrind --toggle-collect=_operator_call
python -m bench.pg_drain_replay --rows 10000 --repeat 1`` collects the replay alone (its
"Collected" total divided by the rows is instructions per event).
"""

from __future__ import annotations

import argparse
import gc
import operator
import statistics
import time
import uuid
from typing import Any

import psycopg
from psycopg import pq

from bench.pg_drain import cleanup, dsn, pg_env, prepare


class _CountingProducer:
    """The part of confluent_kafka.Producer the send loop calls, keeping only a count."""

    def __init__(self) -> None:
        self.produced = 0

    def produce(self, topic: str, value: Any = None, key: Any = None, **_: Any) -> None:
        self.produced += 1

    def __len__(self) -> int:
        return 0


class _NullSink:
    """A KafkaSink stand-in: every topic known, nothing over a limit, nothing to flush."""

    def __init__(self) -> None:
        self.producer = _CountingProducer()
        self.fast_topics: set[str] = set()
        self.known_topics = self.fast_topics
        self.topic_limits: dict[str, int] = {}
        self.error = None
        self.max_message_bytes = 1_000_000

    def ensure_topics(self, topics: Any, overrides: Any = None) -> None:
        self.fast_topics.update(topics)

    def send(self, topic: str, key: Any, value: Any, headers: Any, partition: Any = None) -> None:
        self.producer.produce(topic, value, key)

    def delivery_lag(self) -> tuple[int, float]:
        return 0, 0.0

    def poll(self, timeout: float = 0.0) -> int:
        return 0

    def flush(self, timeout: float) -> int:
        return 0

    def close(self, timeout: float = 30.0) -> int:
        return 0


def record(env: dict[str, str], db: str, slot: str, rows: int) -> list[bytes]:
    """The CopyData payloads of the slot up to the commit of its ``rows``-th insert, as the
    stream loop gets them."""
    conn = psycopg.connect(dsn(env, db) + " replication=database", autocommit=True)
    try:
        pgc = conn.pgconn
        pgc.send_query(
            f"START_REPLICATION SLOT \"{slot}\" LOGICAL 0/0 (proto_version '1', "
            f"publication_names '\"bench_pub\"', messages 'true')".encode()
        )
        res = pgc.get_result()
        assert res is not None and res.status == pq.ExecStatus.COPY_BOTH
        out: list[bytes] = []
        inserts = 0
        while True:
            n, buf = pgc.get_copy_data(0)
            if n < 0:
                raise RuntimeError("replication stream ended early")
            data = bytes(buf)
            if data[:1] != b"w":
                continue  # keepalives carry nothing to replay
            out.append(data)
            kind = data[25]
            inserts += kind == 0x49  # 'I'
            if kind == 0x43 and inserts >= rows:  # 'C'
                return out
    finally:
        conn.close()


def replay(
    env: dict[str, str], db: str, messages: list[bytes], rows: int, envelope: str = "1.2"
) -> float:
    """Feeds ``messages`` through the whole per-event path once; CPU-µs per event."""
    from cdc.assembly import assemble
    from cdc.engine import EngineSettings
    from cdc.offsets.memory import MemoryOffsetStore
    from connectors.postgres import PostgresConnector
    from connectors.postgres import connection as pgconn
    from connectors.postgres.schema import PgSchema
    from connectors.postgres.streaming import PostgresStreaming, _Resume, _StreamState

    cfg = {
        "name": f"replay-{db}",
        "database.server.name": f"replay{uuid.uuid4().hex[:6]}",
        "database.hostname": env["TIDEMARK_PG_HOST"],
        "database.port": env["TIDEMARK_PG_PORT"],
        "database.user": env["TIDEMARK_PG_USER"],
        "database.password": env["TIDEMARK_PG_PASSWORD"],
        "database.dbname": db,
        "slot.name": "unused",
        "publication.name": "bench_pub",
        "snapshot.mode": "never",
        "envelope.version": envelope,
    }
    connector = PostgresConnector(cfg)
    sink: Any = _NullSink()
    parts = assemble(
        connector, connector.config, MemoryOffsetStore(), EngineSettings(producer={}), sink=sink
    )
    source = connector.streaming_source()
    assert isinstance(source, PostgresStreaming)
    dispatcher, queue, delivery = parts.dispatcher, parts.queue, parts.delivery
    meta = pgconn.connect(connector.config)
    try:
        schema = PgSchema(meta, db, source.registry)
        state = _StreamState(source, dispatcher, schema, _Resume(0, 0, True))  # type: ignore[arg-type]
        handle, process, poll = state.handle, delivery.process, queue.poll

        def run() -> None:
            with dispatcher.batched(512) as flush:
                for i, msg in enumerate(messages):
                    handle(msg)
                    if not i & 1023:
                        flush()
                        while batch := poll(0):
                            process(batch)
            while batch := poll(0):
                process(batch)

        gc.freeze()  # as the engine's coordinator does while streaming
        t0 = time.process_time()
        # operator.call: a C function called nowhere else, so callgrind's
        # --toggle-collect=_operator_call counts the instructions of the replay alone
        operator.call(run)
        spent = time.process_time() - t0
    finally:
        gc.unfreeze()
        meta.close()
    produced = sink.producer.produced
    if produced != rows:
        raise RuntimeError(f"replay produced {produced} records, expected {rows}")
    return spent / rows * 1e6


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--per-tx", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument(
        "--envelope-version",
        default="1.2",
        help="the connector's envelope.version (bench.compare's side-by-side runs 3)",
    )
    args = parser.parse_args(argv)
    env = pg_env()
    db = f"bench_{uuid.uuid4().hex[:6]}"
    slot, other, _ = prepare(env, db, args.rows, args.per_tx)
    try:
        messages = record(env, db, slot, args.rows)
        runs = [
            replay(env, db, messages, args.rows, args.envelope_version) for _ in range(args.repeat)
        ]
    finally:
        cleanup(env, db, (slot, other))
    runs_text = ", ".join(f"{r:.2f}" for r in runs)
    print(
        f"replay of {args.rows} rows, {args.per_tx} per transaction: CPU-µs per event "
        f"min {min(runs):.2f}, median {statistics.median(runs):.2f} (runs: {runs_text})"
    )


if __name__ == "__main__":
    main()
