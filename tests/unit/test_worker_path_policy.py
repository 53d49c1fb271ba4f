"""Paths in connector configs sent over REST (worker/path_policy.py), and the file schema
history's and the file signal channel's refusal to damage or quote a file that is not theirs.
Through :meth:`App.handle` with fake engines, as tests/unit/test_worker_security.py."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from cdc.errors import SchemaError
from cdc.history import FileSchemaHistory, history_from_config
from cdc.offsets.memory import MemoryOffsetStore
from cdc.signals.file_channel import MAX_BYTES, FileSignalChannel
from connectors.cassandra.config import CONFIG_DEF as CASSANDRA_DEF
from tests.unit.test_worker_herder import WORKER, Engines, memory
from worker.config import ConnectorEntry, WorkerSettings, parse_config
from worker.herder import Herder
from worker.path_policy import check_paths
from worker.rest import App, Request, Response

MYSQL = "io.debezium.connector.mysql.MySqlConnector"
PG = "io.debezium.connector.postgresql.PostgresConnector"
CASSANDRA = "io.debezium.connector.cassandra.CassandraConnector"
MONGODB = "io.debezium.connector.mongodb.MongoDbConnector"
PASSWORD = "Adm1n-Rest-Pw"


class World:
    def __init__(
        self, tmp_path: Path, yaml: tuple[ConnectorEntry, ...] = (), **worker: Any
    ) -> None:
        self.tmp = tmp_path
        self.state = tmp_path / "state"
        self.files = self.state / "files"
        s = WorkerSettings.model_validate(
            {"state.dir": str(self.state), "rest.validate.connections": False, **worker}
        )
        self.engines = Engines()
        self.herder = Herder(
            s,
            MemoryOffsetStore(),
            worker_id=WORKER,
            engine_factory=self.engines,
            state_file=self.state / "connectors.json",
        )
        self.herder.start(yaml)
        self.app = App(self.herder, version="1.0")
        self.creds = tmp_path / "rest-users.properties"  # e.g. rest.basic.auth.credentials.file
        self.creds.write_text(f"admin={PASSWORD}\nwatcher=W4tch-pw\n")

    def call(self, method: str, path: str, body: Any = None) -> Response:
        data = b"" if body is None else orjson.dumps(body, default=str)
        return self.app.handle(Request(method, path, {}, data))


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = World(tmp_path)
    yield w
    w.herder.shutdown(5)


def mysql(**extra: Any) -> dict[str, Any]:
    return {
        "connector.class": MYSQL,
        "database.hostname": "mysql.example",
        "database.user": "u",
        "database.password": "p",
        "database.server.id": "5",
        "topic.prefix": "t",
        "schema.history.internal": "io.debezium.storage.file.history.FileSchemaHistory",
        **extra,
    }


def postgres_signals(path: str) -> dict[str, Any]:
    return {
        "connector.class": PG,
        "database.hostname": "127.0.0.1",
        "database.user": "u",
        "database.password": "p",
        "database.dbname": "d",
        "topic.prefix": "t",
        "snapshot.mode": "never",
        "read.only": "true",
        "signal.enabled.channels": "file",
        "signal.file": path,
    }


def refused(r: Response, key: str) -> str:
    assert r.status == 400, r.body
    message: str = r.body["message"]
    assert f"\n{key}: " in message, message
    return message


# -- the auditor's reproductions (S5, S6) -----------------------------------------------------


def test_a_history_file_outside_the_sandbox_is_refused(world: World) -> None:
    state_file = world.herder.state_file.path
    before = state_file.read_bytes()
    for key in ("schema.history.internal.file.filename", "database.history.file.filename"):
        for target in (world.creds, state_file):
            r = world.call("POST", "/connectors", {"name": "h", "config": mysql(**{key: target})})
            message = refused(r, key)
            assert str(world.files) in message and "rest.allowed.paths" in message
    # '..' and symlinks are resolved before the check
    sneaky = f"{world.files}/../connectors.json"
    r = world.call(
        "POST",
        "/connectors",
        {"name": "h", "config": mysql(**{"database.history.file.filename": sneaky})},
    )
    refused(r, "database.history.file.filename")
    world.files.mkdir(parents=True)
    (world.files / "link.jsonl").symlink_to(world.creds)
    r = world.call(
        "POST",
        "/connectors",
        {
            "name": "h",
            "config": mysql(**{"database.history.file.filename": str(world.files / "link.jsonl")}),
        },
    )
    refused(r, "database.history.file.filename")
    assert world.call("GET", "/connectors").body == []
    assert state_file.read_bytes() == before
    assert PASSWORD in world.creds.read_text()


def test_a_signal_file_outside_the_sandbox_is_refused(world: World) -> None:
    r = world.call(
        "POST", "/connectors", {"name": "sig", "config": postgres_signals(str(world.creds))}
    )
    refused(r, "signal.file")
    assert world.call("GET", "/connectors").body == []


def test_every_way_in_is_checked(world: World) -> None:
    """POST, PUT (new and existing), PATCH and config/validate."""
    inside = str(world.files / "a" / "history.jsonl")
    assert world.call("POST", "/connectors", {"name": "a", "config": mysql(**{
        "schema.history.internal.file.filename": inside})}).status == 201  # fmt: skip
    bad = {"schema.history.internal.file.filename": str(world.creds)}
    key = "schema.history.internal.file.filename"
    refused(world.call("PUT", "/connectors/new/config", mysql(**bad)), key)
    refused(world.call("PUT", "/connectors/a/config", mysql(**bad)), key)
    refused(world.call("PATCH", "/connectors/a/config", bad), key)
    refused(world.call("PUT", f"/connector-plugins/{MYSQL}/config/validate", mysql(**bad)), key)
    assert world.herder.connector_config("a")[key] == inside
    assert world.call("GET", "/connectors").body == ["a"]


def test_cassandra_directories_and_its_node_config(world: World) -> None:
    outside = world.tmp / "elsewhere"
    for key in (
        "offset.backing.store.dir",
        "cassandra.cdc.raw.dir",
        "commit.log.relocation.dir",
        "cassandra.config",
    ):
        cfg = {"connector.class": CASSANDRA, "topic.prefix": "c", key: str(outside)}
        if key != "cassandra.cdc.raw.dir":
            cfg["cassandra.cdc.raw.dir"] = str(world.files / "cdc_raw")
        r = world.call("PUT", f"/connector-plugins/{CASSANDRA}/config/validate", cfg)
        refused(r, key)
    # the refusal comes before the file is read, so it says nothing about the file
    missing = {"connector.class": CASSANDRA, "topic.prefix": "c", "cassandra.config": "/nope"}
    r = world.call("POST", "/connectors", {"name": "c", "config": missing})
    assert "No such file" not in refused(r, "cassandra.config")


def test_client_keys_kafka_files_and_native_code(world: World) -> None:
    cases = {
        "database.sslkey": str(world.creds),
        "database.sslcert": str(world.creds),
        "database.ssl.key": str(world.creds),
        "producer.override.ssl.key.location": str(world.creds),
        "producer.override.ssl.keystore.location": str(world.creds),
        "schema.history.internal.producer.sasl.kerberos.keytab": str(world.creds),
        "signal.consumer.sasl.oauthbearer.assertion.jwt.template.file": str(world.creds),
        "schema.history.internal.consumer.plugin.library.paths": str(world.files / "x.so"),
        "database.history.producer.ssl.engine.location": str(world.files / "x.so"),
    }
    for key, value in cases.items():
        r = world.call("POST", "/connectors", {"name": "k", "config": memory(**{key: value})})
        message = refused(r, key)
        if "library" in key or "engine" in key:
            assert "native code" in message
        else:
            assert str(world.state / "secrets") in message  # where client keys may live
    uri = f"mongodb://h:27017/?tls=true&tlsCertificateKeyFile={world.creds}"
    cfg = {"connector.class": MONGODB, "mongodb.connection.string": uri, "topic.prefix": "m"}
    refused(
        world.call("POST", "/connectors", {"name": "m", "config": cfg}), "mongodb.connection.string"
    )
    # placeholders cannot be checked as paths
    placeholder = memory(**{"signal.file": "${file:" + str(world.state / "secrets" / "p") + "}"})
    message = refused(
        world.call("POST", "/connectors", {"name": "p", "config": placeholder}), "signal.file"
    )
    assert "placeholder" in message


def test_paths_inside_the_sandbox_and_the_secrets_dir_are_accepted(world: World) -> None:
    secrets = world.state / "secrets"
    cfg = mysql(**{
        "schema.history.internal.file.filename": str(world.files / "orders" / "history.jsonl"),
        "signal.enabled.channels": "source,file",
        "signal.file": str(world.files / "orders" / "signals.txt"),
        "database.ssl.mode": "verify_identity",
        "database.ssl.ca": "/etc/ssl/certs/ca-certificates.crt",  # CA files are not limited
        "database.ssl.cert": str(secrets / "client.pem"),
        "database.ssl.key": str(secrets / "client.key"),
        "producer.override.ssl.ca.location": "/etc/ssl/certs/ca-certificates.crt",
        "producer.override.ssl.key.location": str(secrets / "kafka.key"),
    })  # fmt: skip
    r = world.call("POST", "/connectors", {"name": "orders", "config": cfg})
    assert r.status == 201, r.body
    cassandra = {
        "connector.class": CASSANDRA,
        "topic.prefix": "c",
        "cassandra.cdc.raw.dir": str(world.files / "cdc_raw"),
        "offset.backing.store.dir": str(world.files),  # the sandbox itself
        "commit.log.transfer.class": "relocate",
        "commit.log.relocation.dir": str(world.files / "done"),
    }
    r = world.call("POST", "/connectors", {"name": "cass", "config": cassandra})
    assert r.status == 201, r.body


def test_the_worker_config_widens_the_sandbox(tmp_path: Path) -> None:
    node = tmp_path / "cassandra"
    node.mkdir()
    for allowed in ([str(node), str(tmp_path / "other")], f"{node}, {tmp_path / 'other'}"):
        w = World(tmp_path, **{"rest.allowed.paths": allowed})
        try:
            cfg = {
                "connector.class": CASSANDRA,
                "topic.prefix": "c",
                "cassandra.config": str(node / "cassandra.yaml"),
                "cassandra.cdc.raw.dir": str(node / "cdc_raw"),
            }
            r = w.call("PUT", f"/connector-plugins/{CASSANDRA}/config/validate", cfg)
            assert r.status == 200, r.body
            r = w.call("PUT", f"/connector-plugins/{CASSANDRA}/config/validate",
                       {**cfg, "cassandra.cdc.raw.dir": str(tmp_path / "elsewhere")})  # fmt: skip
            message = refused(r, "cassandra.cdc.raw.dir")
            assert str(node) in message and str(w.files) in message
        finally:
            w.herder.shutdown(5)
    yaml = f"worker:\n  state.dir: {tmp_path}\n  rest.allowed.paths: [/srv/a, /srv/b]\n"
    doc = parse_config(yaml + "connectors: []\n")
    assert doc.worker.rest_allowed_paths == [Path("/srv/a"), Path("/srv/b")]


def test_a_yaml_connectors_own_paths_can_be_written_back(tmp_path: Path) -> None:
    outside = str(tmp_path / "var" / "orders.history")
    own = mysql(**{"schema.history.internal.file.filename": outside,
                   "signal.file": str(tmp_path / "signals")})  # fmt: skip
    world = World(tmp_path, (ConnectorEntry(name="y", config=own),))
    try:
        _write_back(world, outside)
    finally:
        world.herder.shutdown(5)


def _write_back(world: World, outside: str) -> None:
    current = world.call("GET", "/connectors/y/config").body
    r = world.call("PUT", "/connectors/y/config", {**current, "max.batch.size": "7"})
    assert r.status == 200, r.body
    r = world.call("PATCH", "/connectors/y/config", {"max.batch.size": "8"})
    assert r.status == 200, r.body
    # a changed path is new ...
    moved = {**current, "schema.history.internal.file.filename": str(world.creds)}
    refused(
        world.call("PUT", "/connectors/y/config", moved), "schema.history.internal.file.filename"
    )
    # ... and so is an unchanged one once the connector would read another database
    r = world.call("PATCH", "/connectors/y/config", {"database.hostname": "other.example"})
    refused(r, "schema.history.internal.file.filename")
    # the same path under another connector's name is new too
    r = world.call("POST", "/connectors", {"name": "z", "config": current})
    refused(r, "schema.history.internal.file.filename")
    assert world.herder.connector_config("y")["schema.history.internal.file.filename"] == outside


def test_check_paths_reads_and_creates_nothing(tmp_path: Path) -> None:
    problems = check_paths(
        {"signal.file": "bad\0path", "cassandra.config": str(tmp_path / "x")},
        state_dir=tmp_path / "state",
    )
    assert [k for k, _ in problems] == ["signal.file", "cassandra.config"]
    assert not (tmp_path / "state").exists()


def test_a_cassandra_server_name_cannot_walk_out_of_the_record_directory() -> None:
    _, problems = CASSANDRA_DEF.validate(
        {"topic.prefix": "a/../../../tmp", "cassandra.cdc.raw.dir": "/r"}
    )
    assert problems and problems[0][0] == "topic.prefix"
    _, problems = CASSANDRA_DEF.validate(
        {"topic.prefix": "a/b", "cassandra.cdc.raw.dir": "/r", "offset.backing.store.dir": "/o"}
    )
    assert problems == []


# -- defence in depth: the file history --------------------------------------------------------


def test_the_history_changes_nothing_in_a_file_that_is_not_one(tmp_path: Path) -> None:
    creds = tmp_path / "users.properties"
    creds.write_text(f"admin={PASSWORD}\n")
    state = tmp_path / "connectors.json"
    state.write_text('{\n  "connectors": {\n    "a": {"database.password": "S3cret-Pw"}\n  }\n}')
    for path in (creds, state):
        before = path.read_bytes()
        h = FileSchemaHistory(path)
        with pytest.raises(SchemaError) as err:
            h.start()
        assert "is not a schema history file (line 1 is not a history record)" in str(err.value)
        assert path.read_bytes() == before
        # recovery without start() does not quote it either
        with pytest.raises(SchemaError) as err:
            list(h.all_records())
        text = str(err.value)
        assert "line 1" in text and PASSWORD not in text and "S3cret" not in text
        assert "admin" not in text and "database.password" not in text
    # a history whose last line is not the start of a record is not cut either
    history = tmp_path / "h.jsonl"
    h = FileSchemaHistory(history)
    h.start()
    h.record({"server": "s"}, {"pos": 1}, None, None, "CREATE TABLE t (a int)")
    h.stop()
    with history.open("ab") as fh:
        fh.write(f"password={PASSWORD}".encode())
    before = history.read_bytes()
    with pytest.raises(SchemaError, match=r"its last line \(22 bytes\) is not a history record"):
        FileSchemaHistory(history).start()
    assert history.read_bytes() == before


def test_a_history_error_leaves_no_file_content_in_the_task_trace(world: World) -> None:
    h = history_from_config(mysql(**{"schema.history.internal.file.filename": str(world.creds)}))
    errors = []
    for step in (h.start, lambda: list(h.all_records())):
        try:
            step()
        except SchemaError as exc:
            errors.append(exc)
    assert len(errors) == 2
    world.engines.failures["r"] = errors
    cfg = memory(**{"errors.max.retries": 1})
    assert world.call("POST", "/connectors", {"name": "r", "config": cfg}).status == 201
    deadline = time.monotonic() + 5
    trace = ""
    while time.monotonic() < deadline and "line 1" not in trace:
        status = world.call("GET", "/connectors/r/status").body
        trace = str((status.get("tasks") or [{}])[0].get("trace") or "")
        time.sleep(0.02)
    assert "line 1" in trace and PASSWORD not in trace and "admin" not in trace


# -- defence in depth: the file signal channel --------------------------------------------------


def test_the_signal_channel_leaves_a_file_that_is_not_a_signal_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    victim = tmp_path / "users.properties"
    victim.write_text(f"admin={PASSWORD}\nwatcher=W4tch-pw\n")
    got: list[Any] = []
    channel = FileSignalChannel(str(victim), got.append, 1.0)
    with caplog.at_level(logging.INFO, logger="tidemark.signals.file"):
        assert channel.poll() == 0 and channel.poll() == 0
    assert victim.read_text().startswith("admin=") and got == []
    assert PASSWORD not in caplog.text and "admin" not in caplog.text
    assert len(caplog.records) == 1  # once per change of the file, not per poll
    assert "line 1 (19 bytes) is not a JSON signal" in caplog.text
    # JSON lines that are not signals (another connector's history) are not consumed either
    history = tmp_path / "h.jsonl"
    history.write_text('{"source": {"server": "s"}, "position": {"pos": 1}, "ddl": "x"}\n')
    before = history.read_bytes()
    assert FileSignalChannel(str(history), got.append, 1.0).poll() == 0
    assert history.read_bytes() == before and got == []


def test_the_signal_channel_reads_only_small_regular_files(tmp_path: Path) -> None:
    got: list[Any] = []
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert FileSignalChannel(str(fifo), got.append, 1.0).poll() == 0  # does not block
    assert FileSignalChannel(str(tmp_path), got.append, 1.0).poll() == 0  # a directory
    big = tmp_path / "big"
    big.write_text('{"type": "log", "data": {"message": "x"}}\n' * (MAX_BYTES // 40 + 1))
    size = big.stat().st_size
    assert FileSignalChannel(str(big), got.append, 1.0).poll() == 0
    assert big.stat().st_size == size and got == []


def test_the_signal_channel_still_consumes_a_signal_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "signals.txt"
    got: list[Any] = []
    channel = FileSignalChannel(str(path), got.append, 1.0)
    path.write_text(
        '{"id": "s1", "type": "log", "data": {"message": "hi"}}\n'
        "\n"
        '{"id": "s2", "type": "execute-snapshot", "data": "{not json"}\n'  # a broken signal
        '{"type": "pause-snapshot"}\n'
    )
    with caplog.at_level(logging.WARNING, logger="tidemark.signals.file"):
        assert channel.poll() == 2
    assert [s.id for s in got] == ["s1", "file-4"]
    assert path.read_text() == ""
    assert "line 3 skipped" in caplog.text  # the broken one is consumed and reported
