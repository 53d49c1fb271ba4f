"""Runs one SMT chain in the real Debezium Server 3.6 and in tidemark and compares the topics.

Both capture the same PostgreSQL tables (one publication, a slot each, topic prefixes
``dbz…`` and ``tm…``): a snapshot of the rows a :class:`Scenario` inserts first, then its
changes, one transaction per inner list; each side is read until the scenario's sentinel rows
(values containing ``"sentinel"``) arrived. Every topic, and every partition of a topic with
several, is then compared record by record, in order: key and value (JSON with schemas, as
Kafka's ``JsonConverter`` writes them; tombstones as None) and headers.

Normalized, because the tools legitimately differ there and the SMTs do not touch it: the
topic prefix (in topic names and in every JSON string that starts with it), and the top-level
value fields named ``source*``, ``ts_*`` and ``transaction*`` (schema and payload). Debezium
Server's headers go through Kafka Connect's ``SimpleHeaderConverter`` and its extended
headers are off, so only the SMTs add headers. Used by ``test_kafka_smt_parity.py`` (Kafka's
transforms) and ``test_debezium_smt_parity.py`` (Debezium's).

Never skipped: if Debezium Server or its Java runtime cannot be resolved, the test fails.
"""

from __future__ import annotations

import difflib
import json
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Protocol

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
from tests.integration.kafka_connect import KafkaConnectWorker
from tests.integration.pg_harness import PgHarness, RunningConnector
from worker.rest.client import Client

#: the text that marks a scenario's last rows, which each side's reader waits for, in JSON
SENTINEL = b'"sentinel"'


@dataclass(frozen=True)
class Scenario:
    """The tables both sides capture and what happens to them."""

    #: table name -> column definitions
    tables: Mapping[str, str]
    #: statements run before the connectors start (the snapshot's rows)
    before_start: Sequence[str]
    #: the streamed changes, one transaction per inner list; the last ones insert the
    #: sentinel rows
    changes: Sequence[Sequence[str]]
    #: how many records the snapshot writes (per side, all topics)
    snapshot_rows: int
    #: how many records carry :data:`SENTINEL` once every change arrived
    sentinels: int
    #: partitions of a table's topic, where not 1
    partitions: Mapping[str, int] = field(default_factory=dict)
    #: statements run before the tables are created (extensions, types, domains)
    setup: Sequence[str] = ()
    #: tidemark's connector config beyond the harness's own (e.g. ``envelope.version``)
    tidemark_config: Mapping[str, str] = field(default_factory=dict)
    #: the bytes that mark a sentinel record's value (the JSON string ``"sentinel"``)
    sentinel: bytes = SENTINEL
    #: ``(topic, key or value) -> the same, normalized`` where a documented difference
    #: must not count (the topic without its prefix, the record's JSON)
    normalize: Callable[[str, Any], Any] | None = None


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
    """A record's key or value: its JSON, or for other converters' bytes ``{"text": ...}``
    (UTF-8) or ``{"hex": ...}``, so every byte is still compared."""
    if raw is None:
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    try:
        return {"text": raw.decode("utf-8")}
    except UnicodeDecodeError:
        return {"hex": raw.hex()}


def _header(raw: bytes | None) -> str | None:
    return None if raw is None else raw.decode("utf-8", errors="backslashreplace")


def read_all(
    kafka: str, topic: str, partition: int = 0
) -> list[tuple[int, bytes | None, bytes | None, Any]]:
    """Every record of one partition of ``topic``, up to its current end."""
    consumer = Consumer(
        {
            "bootstrap.servers": kafka,
            "group.id": uuid.uuid4().hex,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        out: list[tuple[int, bytes | None, bytes | None, Any]] = []
        if high <= low:
            return out
        consumer.assign([TopicPartition(topic, partition, low)])
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


def _partitions(kafka: str, prefix: str) -> list[tuple[str, int, int]]:
    """(topic, partition, partition count) of every topic named ``<prefix>.…``."""
    admin = AdminClient({"bootstrap.servers": kafka})
    meta = admin.list_topics(timeout=10).topics
    return [
        (t, p, len(meta[t].partitions))
        for t in sorted(meta)
        if t.startswith(prefix + ".")
        for p in sorted(meta[t].partitions)
    ]


def collect(
    kafka: str, prefix: str, normalize: Callable[[str, Any], Any] | None = None
) -> dict[str, list[Rec]]:
    """Every topic of ``prefix``, named ``<prefix>.…``, with its normalized records; a topic
    of several partitions as one entry per partition, ``<topic>#<partition>``, so the record
    a side put in another partition than the other shows as a difference."""
    out: dict[str, list[Rec]] = {}
    for topic, partition, count in _partitions(kafka, prefix):
        recs = []
        name = strip_prefix(topic, prefix)
        for offset, key, value, headers in read_all(kafka, topic, partition):
            k = strip_prefix(_json(key), prefix)
            v = strip_tool_fields(strip_prefix(_json(value), prefix))
            if normalize is not None:
                k, v = normalize(name, k), normalize(name, v)
            recs.append(Rec(offset, k, v, [(str(k_), _header(v_)) for k_, v_ in headers]))
        out[f"{name}#{partition}" if count > 1 else name] = recs
    return out


def has_records(
    kafka: str, prefix: str, at_least: int, match: Callable[[bytes | None], bool]
) -> bool:
    """Whether the topics ``<prefix>.…`` hold ``at_least`` records whose value matches."""
    found = sum(
        1
        for topic, partition, _ in _partitions(kafka, prefix)
        for _, _, value, _ in read_all(kafka, topic, partition)
        if match(value)
    )
    return found >= at_least


def is_any(_value: bytes | None) -> bool:
    return True


def contains(marker: bytes, value: bytes | None) -> bool:
    return value is not None and marker in value


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


def _transaction(h: PgHarness, statements: Sequence[str]) -> None:
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


class _JvmSide(Protocol):
    """Where Debezium's connector and the chain run: started, watched, stopped."""

    name: str

    def check(self) -> None:
        """Raise with the JVM's own words if the connector is no longer running."""

    def log_tail(self) -> str: ...

    def stop(self) -> None: ...


class _DebeziumServer:
    """Debezium Server 3.6 with its Kafka sink. The sink sends every record without a
    partition (the producer partitions by key), so a transform's chosen partition is lost:
    use :class:`_KafkaConnect` for PartitionRouting."""

    name = "Debezium Server"

    def __init__(self, props: dict[str, str], workdir: Path) -> None:
        home, java = debezium_server()
        self.run = debezium.start(home, java, workdir, props)

    def check(self) -> None:
        if self.run.proc.poll() is not None:
            raise AssertionError(
                f"Debezium Server exited ({self.run.proc.returncode}):\n{self.run.log_tail(60)}"
            )

    def log_tail(self) -> str:
        return self.run.log_tail(60)

    def stop(self) -> None:
        stop_process(self.run.proc, timeout=60)
        self.run.log.close()


class _KafkaConnect:
    """Debezium's PostgreSQL connector in a real Kafka Connect 4.1.1 worker, which writes
    each record to the partition the transforms chose (``SourceRecord.kafkaPartition``)."""

    name = "Kafka Connect"

    def __init__(self, kafka: str, workdir: Path, config: dict[str, str]) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.worker = KafkaConnectWorker(kafka, workdir).__enter__()
        self.client = Client(self.worker.url, timeout=30)
        self.connector = "dbz-smt-parity"
        try:
            self.client.call("POST", "/connectors", {"name": self.connector, "config": config})
        except BaseException:
            self.stop()
            raise

    def check(self) -> None:
        code, status = self.client.request("GET", Client.connector_path(self.connector, "/status"))
        if code == 404:  # not assigned yet
            return
        for part in [status.get("connector", {}), *status.get("tasks", [])]:
            if part.get("state") == "FAILED":
                raise AssertionError(f"Debezium's connector failed:\n{part.get('trace')}")

    def log_tail(self) -> str:
        return "\n".join(self.worker.log().splitlines()[-60:])

    def stop(self) -> None:
        self.worker.__exit__(None, None, None)


def run_parity(
    pg: PgInfo,
    kafka: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    chain: Mapping[str, str],
    scenario: Scenario,
    *,
    jvm: str = "debezium-server",
) -> list[str]:
    """Run ``chain`` in Debezium's connector (in Debezium Server, or with
    ``jvm="kafka-connect"`` in a Kafka Connect worker) and in tidemark over the same changes;
    return the differences (empty when the topics agree)."""
    h = PgHarness(pg, kafka, f"smtp_{uuid.uuid4().hex[:8]}")
    request.addfinalizer(h.dispose)  # the database and both slots, also on a failure
    tag = uuid.uuid4().hex[:6]
    dbz_prefix, tm_prefix = f"dbzsmt{tag}", f"tmsmt{tag}"
    publication = f"{h.dbname}_pub"
    include = ",".join(f"public.{t}" for t in scenario.tables)
    h.sql(
        *scenario.setup,
        *(f"CREATE TABLE {t} ({cols})" for t, cols in scenario.tables.items()),
        *scenario.before_start,
        f"CREATE PUBLICATION {publication} FOR TABLE {', '.join(scenario.tables)}",
    )
    admin = AdminClient({"bootstrap.servers": kafka})
    new = [
        NewTopic(f"{p}.public.{t}", scenario.partitions.get(t, 1), 1)
        for p in (dbz_prefix, tm_prefix)
        for t in scenario.tables
    ]
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
            **scenario.tidemark_config,
            **chain,
        }
    )
    workdir = tmp_path / "debezium"
    tm: RunningConnector | None = None
    try:
        tm = h.start(cfg)
    except TransformConfigError as exc:
        pytest.fail(f"tidemark rejects the transform chain: {exc}", pytrace=False)
    side: _JvmSide | None = None
    try:
        if jvm == "kafka-connect":
            side = _KafkaConnect(
                kafka,
                workdir,
                {
                    "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
                    "tasks.max": "1",
                    "plugin.name": "pgoutput",
                    "database.hostname": pg.host,
                    "database.port": str(pg.port),
                    "database.user": pg.user,
                    "database.password": pg.password,
                    "database.dbname": h.dbname,
                    "slot.name": f"{h.dbname}_dbz",
                    "publication.name": publication,
                    "publication.autocreate.mode": "disabled",
                    "topic.prefix": dbz_prefix,
                    "table.include.list": include,
                    "snapshot.mode": "initial",
                    # Debezium's four __debezium.context.* headers; tidemark writes none
                    "extended.headers.enabled": "false",
                    **chain,
                },
            )
        else:
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
            side = _DebeziumServer(props, workdir)
        jvm_side = side

        def alive() -> None:
            if tm is not None and tm.errors:
                raise AssertionError(f"the tidemark connector failed: {tm.errors[0]!r}")
            jvm_side.check()

        for prefix in (dbz_prefix, tm_prefix):  # both slots exist, both snapshots are done
            snapshot = partial(has_records, kafka, prefix, scenario.snapshot_rows, is_any)
            _wait(f"the snapshot on {prefix}.*", snapshot, alive, timeout=120)
        for statements in scenario.changes:
            _transaction(h, statements)
        for prefix in (dbz_prefix, tm_prefix):
            found = partial(contains, scenario.sentinel)
            sentinels = partial(has_records, kafka, prefix, scenario.sentinels, found)
            _wait(f"the sentinels on {prefix}.*", sentinels, alive, timeout=120)
        time.sleep(1)  # anything a side wrongly writes after its sentinels shows up too
        jvm_topics = collect(kafka, dbz_prefix, scenario.normalize)
        py = collect(kafka, tm_prefix, scenario.normalize)
    except BaseException:
        if side is not None:
            print(side.log_tail())
        raise
    finally:
        if side is not None:
            side.stop()
        if tm is not None:
            tm.stop()
    for name, topics in (("Debezium", jvm_topics), ("tidemark", py)):
        print(f"{name}: " + ", ".join(f"{t} {len(r)}" for t, r in topics.items()))
    assert sum(len(r) for r in jvm_topics.values()) > scenario.snapshot_rows, (
        "Debezium wrote no changes"
    )
    return differences(jvm_topics, py)
