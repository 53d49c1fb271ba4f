"""Kafka's built-in SMTs in tidemark produce the records the JVM implementations produce.

The same transform chain (Kafka Connect property names, written once in :data:`CHAIN`) runs in
the real Debezium Server 3.6, which ships Apache Kafka's ``connect-transforms-4.3.0.jar``, and
in tidemark, both capturing the same PostgreSQL database (three tables, one publication, a slot
each, topic prefixes ``dbz…`` and ``tm…``): a snapshot, then inserts, updates (some setting a
column to NULL, one transaction spanning all three tables) and deletes. Every topic of each
side is then compared record by record, in order: topic, key and value (JSON with schemas, as
Kafka's ``JsonConverter`` writes them; tombstones as None) and headers.

Normalized, because the tools legitimately differ there and the SMTs do not touch it:

* the topic prefix, in topic names and in every JSON string that starts with it (schema names
  such as ``<prefix>.public.smt_b.Key`` and InsertField's ``topic.field`` value);
* the top-level value fields named ``source*``, ``ts_*`` and ``transaction*``, in the schema
  and the payload: the source block (connector name and version, LSN, txId, timestamps,
  snapshot flags, sequence), the event timestamps and the transaction block; in smt_b's
  flattened value they are the ``source_*``, ``ts_ms``/``ts_us``/``ts_ns`` and
  ``transaction_*`` fields. smt_a and smt_c are unwrapped and have none.

Nothing else is normalized: any other difference fails the test, and the message shows the
first differing record of each side per topic.

Debezium Server is configured so that only the SMTs add headers: ``extended.headers.enabled``
is off (its four ``__debezium.context.*`` headers; tidemark writes none), and headers are
serialized by Kafka Connect's default ``SimpleHeaderConverter`` (``debezium.format.header=
clientprovided`` with ``debezium.format.header.class``) rather than Debezium Server's default
``JsonConverter``, which would write ``{"schema":…,"payload":"data"}`` for a string header.
Headers are compared as (name, UTF-8 text) pairs, a null header value as None. Debezium
Server's engine leaves out a header whose converted value is null (a Connect worker would
write it with a null value), so the data avoids a null in the HeaderFrom column ``label``.

Two settings beyond the plain chain keep the JVM side running (see the comments in
:data:`CHAIN`): MaskField's ``replacement=0.00`` (its default zero for a decimal has scale 0,
which JsonConverter refuses for ``numeric(10,2)``) and unwrapC's
``delete.tombstone.handling.mode=drop`` (Kafka's HeaderFrom fails on the null value that the
default mode makes of a delete).

Never skipped: if Debezium Server or its Java runtime cannot be resolved, the test fails.
"""

from __future__ import annotations

import difflib
import json
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import psycopg
import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from bench.compare import debezium
from bench.compare.common import stop_process
from cdc.transforms import TransformConfigError
from tests.integration.conftest import PgInfo
from tests.integration.debezium_server import debezium_server
from tests.integration.pg_harness import PgHarness, RunningConnector

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]

#: the transform chain, with Kafka Connect's property names; Debezium Server gets each key
#: prefixed with ``debezium.``, tidemark gets it as is
CHAIN: dict[str, str] = {
    "predicates": "onA,onB,onC,tomb",
    "predicates.onA.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
    "predicates.onA.pattern": r".*\.smt_a",
    "predicates.onB.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
    "predicates.onB.pattern": r".*\.smt_b",
    "predicates.onC.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
    "predicates.onC.pattern": r".*\.smt_c",
    "predicates.tomb.type": "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone",
    "transforms": "dropTombstones,unwrapA,replaceA,insertA,maskA,rekeyA,extractKeyA,"
    "flattenB,hoistKeyB,metaB,unwrapC,castC,atC,dayC,headerC,tierC,headerFromC,dropHeaderC",
    "transforms.dropTombstones.type": "org.apache.kafka.connect.transforms.Filter",
    "transforms.dropTombstones.predicate": "tomb",
    "transforms.unwrapA.type": "io.debezium.transforms.ExtractNewRecordState",
    "transforms.unwrapA.predicate": "onA",
    "transforms.unwrapA.delete.tombstone.handling.mode": "rewrite",
    "transforms.replaceA.type": "org.apache.kafka.connect.transforms.ReplaceField$Value",
    "transforms.replaceA.predicate": "onA",
    "transforms.replaceA.exclude": "secret",
    "transforms.replaceA.renames": "name:full_name,email:mail",
    "transforms.insertA.type": "org.apache.kafka.connect.transforms.InsertField$Value",
    "transforms.insertA.predicate": "onA",
    "transforms.insertA.static.field": "origin",
    "transforms.insertA.static.value": "pg",
    "transforms.insertA.topic.field": "src_topic",
    "transforms.maskA.type": "org.apache.kafka.connect.transforms.MaskField$Value",
    "transforms.maskA.predicate": "onA",
    "transforms.maskA.fields": "qty,price",
    # Without it Kafka's MaskField masks price with BigDecimal.ZERO (scale 0), which
    # JsonConverter refuses for a Decimal schema of scale 2 ("Decimal value has mismatching
    # scale"), stopping the connector; "0.00" gives int 0 for qty and 0.00 for price.
    "transforms.maskA.replacement": "0.00",
    "transforms.rekeyA.type": "org.apache.kafka.connect.transforms.ValueToKey",
    "transforms.rekeyA.predicate": "onA",
    "transforms.rekeyA.fields": "id,full_name",
    "transforms.extractKeyA.type": "org.apache.kafka.connect.transforms.ExtractField$Key",
    "transforms.extractKeyA.predicate": "onA",
    "transforms.extractKeyA.field": "full_name",
    "transforms.flattenB.type": "org.apache.kafka.connect.transforms.Flatten$Value",
    "transforms.flattenB.predicate": "onB",
    "transforms.flattenB.delimiter": "_",
    "transforms.hoistKeyB.type": "org.apache.kafka.connect.transforms.HoistField$Key",
    "transforms.hoistKeyB.predicate": "onB",
    "transforms.hoistKeyB.field": "pk",
    "transforms.metaB.type": "org.apache.kafka.connect.transforms.SetSchemaMetadata$Value",
    "transforms.metaB.predicate": "onB",
    "transforms.metaB.schema.name": "smt.b.Flat",
    "transforms.metaB.schema.version": "3",
    "transforms.unwrapC.type": "io.debezium.transforms.ExtractNewRecordState",
    "transforms.unwrapC.predicate": "onC",
    # Without it (default "tombstone") a delete becomes a null-value record, and Kafka's
    # HeaderFrom fails the task on it ("Only Struct objects supported for [header copy],
    # found: null"); "drop" leaves smt_c's deletes out.
    "transforms.unwrapC.delete.tombstone.handling.mode": "drop",
    "transforms.castC.type": "org.apache.kafka.connect.transforms.Cast$Value",
    "transforms.castC.predicate": "onC",
    "transforms.castC.spec": "id:string,amount:int32,ratio:string",
    # Debezium writes a timestamp column as io.debezium.time.MicroTimestamp (int64 micros)
    "transforms.atC.type": "org.apache.kafka.connect.transforms.TimestampConverter$Value",
    "transforms.atC.predicate": "onC",
    "transforms.atC.field": "at",
    "transforms.atC.target.type": "string",
    "transforms.atC.format": "yyyy-MM-dd'T'HH:mm:ss.SSS EEE",
    "transforms.atC.unix.precision": "microseconds",
    "transforms.dayC.type": "org.apache.kafka.connect.transforms.TimestampConverter$Value",
    "transforms.dayC.predicate": "onC",
    "transforms.dayC.field": "day",
    "transforms.dayC.target.type": "Timestamp",
    "transforms.dayC.unix.precision": "microseconds",
    "transforms.headerC.type": "org.apache.kafka.connect.transforms.InsertHeader",
    "transforms.headerC.predicate": "onC",
    "transforms.headerC.header": "team",
    "transforms.headerC.value.literal": "data",
    "transforms.tierC.type": "org.apache.kafka.connect.transforms.InsertHeader",
    "transforms.tierC.predicate": "onC",
    "transforms.tierC.header": "tier",
    "transforms.tierC.value.literal": "gold",
    "transforms.headerFromC.type": "org.apache.kafka.connect.transforms.HeaderFrom$Value",
    "transforms.headerFromC.predicate": "onC",
    "transforms.headerFromC.fields": "label",
    "transforms.headerFromC.headers": "lbl",
    "transforms.headerFromC.operation": "copy",
    "transforms.dropHeaderC.type": "org.apache.kafka.connect.transforms.DropHeaders",
    "transforms.dropHeaderC.predicate": "onC",
    "transforms.dropHeaderC.headers": "tier",
}

TABLES: dict[str, str] = {
    "smt_a": "id int PRIMARY KEY, name text, email text, secret text, qty int, price numeric(10,2)",
    "smt_b": "id int PRIMARY KEY, code text, n bigint, flag boolean",
    "smt_c": "id int PRIMARY KEY, label text, amount double precision, at timestamp, "
    "day timestamp, ratio double precision",
}

SNAPSHOT_ROWS = 9  # three per table, inserted before the connectors start

BEFORE_START = [
    "INSERT INTO smt_a VALUES (1, 'alice', 'alice@example.com', 's1', 5, 10.50), "
    "(2, 'bob', 'bob@example.com', 's2', 7, 3.25), "
    "(3, 'carol', 'carol@example.com', 's3', 1, 99.99)",
    "INSERT INTO smt_b VALUES (1, 'x1', 100, true), (2, 'x2', -5, false), "
    "(3, 'x3', 9000000000, NULL)",
    "INSERT INTO smt_c VALUES "
    "(1, 'one', 1.5, '2024-01-05 10:20:30.123456', '2024-01-05', 1e10), "
    "(2, 'two', 2.75, '1969-12-31 23:59:59.9995', '1960-02-29 12:00', 0.0001), "
    "(3, 'three', -3.9, NULL, NULL, 2.5)",
]

#: the streamed changes, one transaction per inner list
CHANGES: list[list[str]] = [
    ["INSERT INTO smt_a VALUES (4, 'dave', 'dave@example.com', 's4', 2, 0.01)"],
    ["UPDATE smt_a SET email = NULL, qty = 8 WHERE id = 1"],
    ["UPDATE smt_a SET name = 'bobby', price = 1234.5 WHERE id = 2"],
    ["DELETE FROM smt_a WHERE id = 3"],
    ["INSERT INTO smt_b VALUES (4, 'x4', 4, true)"],
    ["UPDATE smt_b SET code = NULL WHERE id = 1"],
    ["UPDATE smt_b SET n = n + 1, flag = true WHERE id = 2"],
    ["DELETE FROM smt_b WHERE id = 3"],
    [
        "INSERT INTO smt_c VALUES "
        "(4, 'four', 4.4, '2000-02-29 00:00:00.5', '2000-02-29 23:59:59', -123456789.0)"
    ],
    ["UPDATE smt_c SET at = NULL, ratio = 100.0 WHERE id = 4"],
    ["UPDATE smt_c SET amount = NULL WHERE id = 1"],
    ["UPDATE smt_c SET label = 'deux', amount = 22.5 WHERE id = 2"],
    ["DELETE FROM smt_c WHERE id = 3"],
    [
        "UPDATE smt_a SET secret = 'changed', qty = NULL WHERE id = 4",
        "UPDATE smt_b SET flag = NULL WHERE id = 4",
        "UPDATE smt_c SET amount = -7.75 WHERE id = 4",
    ],
    # last in every table: the record each side's reader waits for (smt_a's key is the name)
    ["INSERT INTO smt_a VALUES (1000, 'sentinel', 'sentinel@example.com', 's', 0, 0)"],
    ["INSERT INTO smt_b VALUES (1000, 'sentinel', 0, false)"],
    ["INSERT INTO smt_c VALUES (1000, 'sentinel', 0)"],
]
SENTINELS = 3
SENTINEL = b'"sentinel"'

#: top-level value fields whose content is the tool's own (see the module docstring)
TOOL_FIELD_PREFIXES = ("source", "ts_", "transaction")

#: Debezium Server: headers through Connect's default header converter, as plain strings
HEADER_FORMAT = {
    "debezium.format.header": "clientprovided",
    "debezium.format.header.class": "org.apache.kafka.connect.storage.SimpleHeaderConverter",
}


# -- reading and normalizing -------------------------------------------------------------------


@dataclass
class Rec:
    """One Kafka record, normalized for the comparison."""

    offset: int
    key: Any
    value: Any
    headers: list[tuple[str, str | None]]

    def comparable(self) -> dict[str, Any]:
        return {"key": self.key, "value": self.value, "headers": self.headers}


def _json(raw: bytes | None) -> Any:
    return None if raw is None else orjson.loads(raw)


def _header(raw: bytes | None) -> str | None:
    return None if raw is None else raw.decode("utf-8", errors="backslashreplace")


def read_all(kafka: str, topic: str) -> list[tuple[int, bytes | None, bytes | None, Any]]:
    """Every record of partition 0 of ``topic``, up to its current end."""
    consumer = Consumer(
        {
            "bootstrap.servers": kafka,
            "group.id": uuid.uuid4().hex,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        out: list[tuple[int, bytes | None, bytes | None, Any]] = []
        if high <= low:
            return out
        consumer.assign([TopicPartition(topic, 0, low)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for msg in consumer.consume(500, 0.5):
                if msg.error() is not None:
                    continue
                offset = msg.offset() or 0
                out.append((offset, msg.key(), msg.value(), msg.headers() or []))
                if offset >= high - 1:
                    return out
        raise AssertionError(f"could not read {topic} up to offset {high - 1}")
    finally:
        consumer.close()


def strip_prefix(doc: Any, prefix: str) -> Any:
    """``doc`` with ``prefix`` replaced by ``<prefix>`` in every string ``<prefix>.…``."""
    if isinstance(doc, str):
        return "<prefix>" + doc[len(prefix) :] if doc.startswith(prefix + ".") else doc
    if isinstance(doc, list):
        return [strip_prefix(d, prefix) for d in doc]
    if isinstance(doc, dict):
        return {k: strip_prefix(v, prefix) for k, v in doc.items()}
    return doc


def _tool_field(name: Any) -> bool:
    return isinstance(name, str) and name.startswith(TOOL_FIELD_PREFIXES)


def strip_tool_fields(value: Any) -> Any:
    """A JsonConverter value without the top-level fields in :data:`TOOL_FIELD_PREFIXES`."""
    if not isinstance(value, dict) or set(value) != {"schema", "payload"}:
        return value
    schema, payload = value["schema"], value["payload"]
    if isinstance(schema, dict) and isinstance(schema.get("fields"), list):
        schema = {
            **schema,
            "fields": [f for f in schema["fields"] if not _tool_field(f.get("field"))],
        }
    if isinstance(payload, dict):
        payload = {k: v for k, v in payload.items() if not _tool_field(k)}
    return {"schema": schema, "payload": payload}


def collect(kafka: str, prefix: str) -> dict[str, list[Rec]]:
    """Every topic of ``prefix``, named ``<prefix>.…``, with its normalized records."""
    admin = AdminClient({"bootstrap.servers": kafka})
    topics = sorted(t for t in admin.list_topics(timeout=10).topics if t.startswith(prefix + "."))
    out: dict[str, list[Rec]] = {}
    for topic in topics:
        recs = []
        for offset, key, value, headers in read_all(kafka, topic):
            recs.append(
                Rec(
                    offset,
                    strip_prefix(_json(key), prefix),
                    strip_tool_fields(strip_prefix(_json(value), prefix)),
                    [(str(k), _header(v)) for k, v in headers],
                )
            )
        out[strip_prefix(topic, prefix)] = recs
    return out


def has_records(
    kafka: str, prefix: str, at_least: int, match: Callable[[bytes | None], bool]
) -> bool:
    """Whether the topics ``<prefix>.…`` hold ``at_least`` records whose value matches."""
    admin = AdminClient({"bootstrap.servers": kafka})
    topics = [t for t in admin.list_topics(timeout=10).topics if t.startswith(prefix + ".")]
    found = sum(1 for t in topics for _, _, value, _ in read_all(kafka, t) if match(value))
    return found >= at_least


def is_any(_value: bytes | None) -> bool:
    return True


def is_sentinel(value: bytes | None) -> bool:
    return value is not None and SENTINEL in value


# -- the comparison ----------------------------------------------------------------------------


def _parts(rec: Rec | None) -> dict[str, Any]:
    """The record as the five parts the diff shows separately."""
    if rec is None:
        return {}

    def split(doc: Any) -> tuple[Any, Any]:
        if isinstance(doc, dict) and set(doc) == {"schema", "payload"}:
            return doc["schema"], doc["payload"]
        return None, doc

    (key_schema, key), (value_schema, value) = split(rec.key), split(rec.value)
    return {
        "key schema": key_schema,
        "key payload": key,
        "value schema": value_schema,
        "value payload": value,
        "headers": rec.headers,
    }


def _lines(doc: Any) -> list[str]:
    return json.dumps(doc, indent=1, ensure_ascii=False).splitlines()


def _record_diff(ra: Rec | None, rb: Rec | None) -> str:
    """A unified diff of each part that differs, and each side's payloads on one line."""
    pa, pb = _parts(ra), _parts(rb)
    out = [f"  Debezium: {_payloads(ra)}", f"  tidemark: {_payloads(rb)}"]
    for part in pa or pb:
        if part in pa and part in pb and pa[part] == pb[part]:
            continue
        a = _lines(pa[part]) if part in pa else ["(no record)"]
        b = _lines(pb[part]) if part in pb else ["(no record)"]
        out.append(f"  {part} differs:")
        out.extend(
            "    " + line
            for line in difflib.unified_diff(a, b, "Debezium", "tidemark", n=2, lineterm="")
        )
    return "\n".join(out)


def _payloads(rec: Rec | None) -> str:
    if rec is None:
        return "(no record)"
    parts = _parts(rec)
    return json.dumps(
        {k: parts[k] for k in ("key payload", "value payload", "headers")}, ensure_ascii=False
    )


def differences(jvm: dict[str, list[Rec]], py: dict[str, list[Rec]]) -> list[str]:
    """One report per topic that differs, with the first differing record of each side."""
    reports = []
    for topic in sorted(set(jvm) | set(py)):
        a, b = jvm.get(topic), py.get(topic)
        if a is None or b is None:
            only = "Debezium" if b is None else "tidemark"
            recs = a if b is None else b
            reports.append(
                f"{topic}: only {only} wrote this topic ({len(recs or [])} records), e.g.\n  "
                + (_payloads(recs[0]) if recs else "(empty)")
            )
            continue
        first = next(
            (
                i
                for i in range(max(len(a), len(b)))
                if i >= len(a) or i >= len(b) or a[i].comparable() != b[i].comparable()
            ),
            None,
        )
        if first is None:
            continue
        ra = a[first] if first < len(a) else None
        rb = b[first] if first < len(b) else None
        reports.append(
            f"{topic}: {len(a)} records from Debezium, {len(b)} from tidemark; record "
            f"#{first} is the first that differs (Debezium offset "
            f"{ra.offset if ra else '-'}, tidemark offset {rb.offset if rb else '-'}):\n"
            + _record_diff(ra, rb)
        )
    return reports


# -- running both sides ------------------------------------------------------------------------


def _java_property(value: str) -> str:
    """A value as ``java.util.Properties`` reads it back (``\\`` is its escape character)."""
    return value.replace("\\", "\\\\")


def _transaction(h: PgHarness, statements: list[str]) -> None:
    with psycopg.connect(h.pg.dsn(h.dbname), autocommit=True) as c, c.transaction():
        for s in statements:
            c.execute(s)


def _wait(
    what: str,
    done: Callable[[], bool],
    alive: Callable[[], None],
    timeout: float,
) -> None:
    deadline = time.monotonic() + timeout
    while True:
        alive()
        if done():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.5)


def run_parity(
    pg: PgInfo,
    kafka: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    chain: Mapping[str, str],
) -> list[str]:
    """Run ``chain`` in Debezium Server and in tidemark over the same changes; return the
    differences (empty when the topics agree)."""
    home, java = debezium_server()
    h = PgHarness(pg, kafka, f"smtp_{uuid.uuid4().hex[:8]}")
    request.addfinalizer(h.dispose)  # the database and both slots, also on a failure
    tag = uuid.uuid4().hex[:6]
    dbz_prefix, tm_prefix = f"dbzsmt{tag}", f"tmsmt{tag}"
    publication = f"{h.dbname}_pub"
    include = ",".join(f"public.{t}" for t in TABLES)
    h.sql(
        *(f"CREATE TABLE {t} ({cols})" for t, cols in TABLES.items()),
        *BEFORE_START,
        f"CREATE PUBLICATION {publication} FOR TABLE {', '.join(TABLES)}",
    )
    admin = AdminClient({"bootstrap.servers": kafka})
    new = [NewTopic(f"{p}.public.{t}", 1, 1) for p in (dbz_prefix, tm_prefix) for t in TABLES]
    for fut in admin.create_topics(new).values():
        fut.result(30)

    cfg = h.config()
    cfg.update(
        {
            "database.server.name": tm_prefix,
            "slot.name": f"{h.dbname}_tm",
            "publication.name": publication,
            "publication.autocreate.mode": "disabled",
            "table.include.list": include,
            "snapshot.mode": "initial",
            **chain,
        }
    )
    workdir = tmp_path / "debezium"
    props = debezium.properties(
        env={
            "TIDEMARK_KAFKA_BOOTSTRAP": kafka,
            "TIDEMARK_PG_HOST": pg.host,
            "TIDEMARK_PG_PORT": str(pg.port),
            "TIDEMARK_PG_USER": pg.user,
            "TIDEMARK_PG_PASSWORD": pg.password,
        },
        db=h.dbname,
        slot=f"{h.dbname}_dbz",
        publication=publication,
        topic_prefix=dbz_prefix,
        snapshot_mode="initial",
        queue={"poll.interval.ms": 100},
        producer={"acks": "all", "linger.ms": 5},
        offsets_file=workdir / "offsets.dat",
        offset_flush_ms=1000,
        http_port=debezium.new_http_port(),
        table_include=include,
    )
    props.update(HEADER_FORMAT)
    props.update({f"debezium.{k}": _java_property(v) for k, v in chain.items()})

    tm: RunningConnector | None = None
    try:
        tm = h.start(cfg)
    except TransformConfigError as exc:
        pytest.fail(f"tidemark rejects the transform chain: {exc}", pytrace=False)
    run = debezium.start(home, java, workdir, props)
    try:

        def alive() -> None:
            if tm is not None and tm.errors:
                raise AssertionError(f"the tidemark connector failed: {tm.errors[0]!r}")
            if run.proc.poll() is not None:
                raise AssertionError(
                    f"Debezium Server exited ({run.proc.returncode}):\n{run.log_tail(60)}"
                )

        for prefix in (dbz_prefix, tm_prefix):  # both slots exist, both snapshots are done
            snapshot = partial(has_records, kafka, prefix, SNAPSHOT_ROWS, is_any)
            _wait(f"the snapshot on {prefix}.*", snapshot, alive, timeout=120)
        for statements in CHANGES:
            _transaction(h, statements)
        for prefix in (dbz_prefix, tm_prefix):
            sentinels = partial(has_records, kafka, prefix, SENTINELS, is_sentinel)
            _wait(f"the sentinels on {prefix}.*", sentinels, alive, timeout=120)
        time.sleep(1)  # anything a side wrongly writes after its sentinels shows up too
        jvm, py = collect(kafka, dbz_prefix), collect(kafka, tm_prefix)
    except BaseException:
        print(run.log_tail(60))
        raise
    finally:
        stop_process(run.proc, timeout=60)
        run.log.close()
        if tm is not None:
            tm.stop()
    for side, topics in (("Debezium", jvm), ("tidemark", py)):
        print(f"{side}: " + ", ".join(f"{t} {len(r)}" for t, r in topics.items()))
    assert sum(len(r) for r in jvm.values()) > SNAPSHOT_ROWS, "Debezium wrote no changes"
    return differences(jvm, py)


def test_kafka_smts_match_the_jvm_implementations(
    postgres: PgInfo, kafka: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    diffs = run_parity(postgres, kafka, tmp_path, request, CHAIN)
    assert not diffs, (
        "tidemark's records differ from Kafka Connect's SMTs in Debezium Server:\n\n"
        + "\n\n".join(diffs)
    )
