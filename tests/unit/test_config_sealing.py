"""Connector secrets sealed for the distributed config topic (worker.sealing): what
opens, what does not and why, the worker keys' validation, and the records the config store
writes and reads (its Kafka log replaced by a list: the same records on the real Kafka are in
tests/integration/test_distributed_stores.py)."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import orjson
import pytest

from cdc.errors import ConfigError
from cdc.offsets.memory import MemoryOffsetStore
from worker.config import ConnectorEntry, WorkerConfigError, WorkerSettings, load_config
from worker.distributed.config_store import SEALED, UNREADABLE, ConfigStore
from worker.distributed.herder import DistributedHerder
from worker.sealing import Sealer, SealError

KEY = secrets.token_urlsafe(32)
OTHER = secrets.token_urlsafe(32)


def test_a_sealed_value_opens_only_for_its_connector_and_key() -> None:
    s = Sealer(KEY)
    token = s.seal("inv", "database.password", "s3cret-pw")
    assert "s3cret-pw" not in token and s.is_current(token)
    assert s.unseal("inv", "database.password", token) == "s3cret-pw"
    # same key text on another worker: same derived key
    assert Sealer(KEY).unseal("inv", "database.password", token) == "s3cret-pw"
    # a fresh nonce per seal: equal passwords do not show as equal tokens
    assert s.seal("inv", "database.password", "s3cret-pw") != token
    for connector, key in (("other", "database.password"), ("inv", "database.user")):
        with pytest.raises(SealError, match="copied from another connector or key"):
            s.unseal(connector, key, token)
    tampered = token[:-2] + ("A" if token[-2] != "A" else "B") + token[-1]
    with pytest.raises(SealError, match="altered"):
        s.unseal("inv", "database.password", tampered)
    with pytest.raises(SealError, match="not a sealed value"):
        s.unseal("inv", "database.password", "hunter2")


def test_another_key_names_both_ids_and_a_previous_key_opens_old_values() -> None:
    old = Sealer(KEY).seal("inv", "database.password", "pw-1")
    old_id = old.split(":")[1]
    with pytest.raises(SealError, match=f"sealed with key {old_id}, which this worker does not"):
        Sealer(OTHER).unseal("inv", "database.password", old)
    with pytest.raises(SealError, match="its keys: none"):
        Sealer(None).unseal("inv", "database.password", old)
    rotated = Sealer(OTHER, [KEY])
    assert rotated.unseal("inv", "database.password", old) == "pw-1"
    assert not rotated.is_current(old)
    assert rotated.is_current(rotated.seal("inv", "database.password", "pw-1"))
    with pytest.raises(SealError, match="not set"):
        Sealer(None, [KEY]).seal("inv", "database.password", "pw")


def test_worker_keys_are_checked_and_read_from_placeholders(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text("worker:\n  config.storage.encryption.key: short\n")
    with pytest.raises(WorkerConfigError) as info:
        load_config(path)
    assert "config.storage.encryption.key" in str(info.value)
    assert "at least 32 characters" in str(info.value)
    path.write_text(
        "worker:\n"
        "  config.storage.encryption.key: ${env:TMD_SEAL_KEY}\n"
        f"  config.storage.encryption.previous.keys: {OTHER}, {KEY}\n"
    )
    s = load_config(path, env={"TMD_SEAL_KEY": KEY}).worker
    assert s.config_storage_encryption_key is not None
    assert s.config_storage_encryption_key.get_secret_value() == KEY
    assert [k.get_secret_value() for k in s.config_storage_encryption_previous_keys] == [
        OTHER,
        KEY,
    ]
    assert KEY not in repr(s)


class ListLog:
    """Stands in for the store's Kafka log: records go to a list and are read back at once,
    as the one-partition topic would hand them to every reader."""

    def __init__(self, *stores: ConfigStore) -> None:
        self.records: list[tuple[str, bytes | None]] = []
        self.readers = list(stores)

    def send(self, records: list[tuple[str, bytes | None]]) -> None:
        self.records += records
        for key, value in records:
            for r in self.readers:
                r._apply(key, value)

    def sync(self) -> None:
        pass


def secret_rule(config: Any, key: str, value: str) -> bool:
    return "password" in key or ("://" in value and "@" in value)


def store(sealer: Sealer, log: ListLog | None = None) -> ConfigStore:
    s = ConfigStore({"bootstrap.servers": "127.0.0.1:1"}, "t", sealer=sealer, is_secret=secret_rule)
    if log is not None:
        log.readers.append(s)
        s.log = log  # type: ignore[assignment]
    return s


def test_the_store_writes_secrets_sealed_and_reads_them_opened() -> None:
    log = ListLog()
    writer = store(Sealer(KEY), log)
    peer = store(Sealer(KEY), log)
    stranger = store(Sealer(OTHER), log)
    config = {
        "connector.class": "postgres",
        "name": "inv",
        "database.user": "cdc",
        "database.password": "pw-inv-1",
        "mongodb.connection.string": "mongodb://cdc:pw-url-2@db:27017",
    }
    writer.put_connector("inv", config, "STARTED")
    raw = b"".join(v for _, v in log.records if v)
    assert b"pw-inv-1" not in raw and b"pw-url-2" not in raw
    record = orjson.loads(dict(log.records)["connector-inv"])
    assert set(record[SEALED]) == {"database.password", "mongodb.connection.string"}
    assert record["properties"] == {
        "connector.class": "postgres",
        "name": "inv",
        "database.user": "cdc",
    }
    assert peer.config("inv") == config and peer.unreadable("inv") == {}
    assert peer.stored_in_clear() == {} and peer.sealed_with_previous_key() == {}
    # a worker with another key: the values read as masked, the reason is kept
    seen = stranger.config("inv")
    assert seen is not None and seen["database.password"] == UNREADABLE
    assert set(stranger.unreadable("inv")) == {"database.password", "mongodb.connection.string"}
    # a sealed value copied into another connector's record does not open there
    moved = orjson.dumps({"properties": {"name": "evil"}, SEALED: record[SEALED]})
    log.send([("connector-evil", moved)])
    assert "copied from another connector" in peer.unreadable("evil")["database.password"]


def test_records_in_clear_and_under_a_previous_key_are_reported() -> None:
    log = ListLog()
    old = store(Sealer(None), log)
    log.send(
        [
            (
                "connector-legacy",
                orjson.dumps({"properties": {"name": "legacy", "database.password": "pw-3"}}),
            )
        ]
    )
    assert old.stored_in_clear() == {"legacy": ["database.password"]}
    assert old.config("legacy") == {"name": "legacy", "database.password": "pw-3"}
    with pytest.raises(SealError):  # no key: never written in clear
        old.put_connector("legacy", {"name": "legacy", "database.password": "pw-3"}, None)
    rotated = store(Sealer(OTHER, [KEY]), log)
    store(Sealer(KEY), log).put_connector("x", {"name": "x", "database.password": "pw-4"}, None)
    assert rotated.config("x") == {"name": "x", "database.password": "pw-4"}
    assert rotated.sealed_with_previous_key() == {"x": ["database.password"]}
    rotated.put_connector("x", {"name": "x", "database.password": "pw-4"}, None)
    assert rotated.sealed_with_previous_key() == {}
    log.send([("connector-x", None)])
    assert rotated.config("x") is None and rotated.unreadable("x") == {}


def distributed(tmp_path: Path, **keys: str) -> DistributedHerder:
    settings = WorkerSettings.model_validate(
        {"mode": "distributed", "state.dir": str(tmp_path), **keys}
    )
    return DistributedHerder(settings, MemoryOffsetStore(), worker_id="w1")


def pg_config(password: str) -> dict[str, str]:
    return {
        "connector.class": "postgres",
        "database.hostname": "127.0.0.1",
        "database.user": "cdc",
        "database.password": password,
        "database.dbname": "inv",
        "topic.prefix": "inv",
    }


def test_without_a_key_literal_secrets_are_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    h = distributed(tmp_path)
    problems = h._storage_problems(pg_config("pw-5"))
    assert [k for k, _ in problems] == ["database.password"]
    assert "config.storage.encryption.key" in problems[0][1]
    assert h._storage_problems(pg_config("${file:/run/secrets/pg:password}")) == []
    # the YAML file's connectors: the worker does not start (checked before Kafka is reached)
    with pytest.raises(ConfigError, match=r"connectors\[inv\]\.database\.password"):
        h.start([ConnectorEntry(name="inv", config=pg_config("pw-5"))])
    # REST validate reports it on the key
    out = h.validate("postgres", pg_config("pw-5"))
    field = next(c for c in out["configs"] if c["definition"]["name"] == "database.password")
    assert any("in clear" in e for e in field["value"]["errors"])
    assert (
        distributed(tmp_path, **{"config.storage.encryption.key": KEY})._storage_problems(
            pg_config("pw-5")
        )
        == []
    )


def test_the_worker_scrubs_its_keys_from_logs(tmp_path: Path) -> None:
    h = distributed(
        tmp_path,
        **{
            "config.storage.encryption.key": KEY,
            "config.storage.encryption.previous.keys": OTHER,
        },
    )
    assert h.secrets.redact(f"a {KEY} b {OTHER}") == "a ******** b ********"


def test_validate_names_literal_secrets_of_a_distributed_worker_without_a_key(
    tmp_path: Path,
) -> None:
    path = tmp_path / "w.yaml"
    body = (
        "  mode: distributed\n"
        "connectors:\n"
        "  - name: inv\n"
        "    config:\n"
        "      connector.class: postgres\n"
        "      database.hostname: 127.0.0.1\n"
        "      database.user: cdc\n"
        "      database.password: pw-6\n"
        "      database.dbname: inv\n"
        "      topic.prefix: inv\n"
    )
    path.write_text("worker:\n" + body)
    with pytest.raises(WorkerConfigError) as info:
        load_config(path)
    assert [p for p, _ in info.value.problems] == ["connectors[0].config.database.password"]
    path.write_text(f"worker:\n  config.storage.encryption.key: {KEY}\n" + body)
    assert load_config(path).connectors[0].name == "inv"
    path.write_text("worker:\n" + body.replace("pw-6", "${env:TMD_PW}"))
    assert load_config(path, env={"TMD_PW": "x"}).connectors[0].name == "inv"


def test_standalone_state_file_seals_with_the_key_and_opens_again(tmp_path: Path) -> None:
    """The same key seals ``connectors.json`` in standalone mode: no literal password on
    disk; a file written before the key is read and sealed on its next write; another key
    stops the worker naming the connector and key."""
    from tests.unit.test_worker_herder import Engines
    from worker.herder import Herder

    def herder(**keys: str) -> Any:
        settings = WorkerSettings.model_validate(
            {
                "state.dir": str(tmp_path),
                "task.shutdown.graceful.timeout.ms": 5000,
                "rest.validate.connections": False,
                **keys,
            }
        )
        return Herder(
            settings,
            MemoryOffsetStore(),
            worker_id="w",
            engine_factory=Engines(),
            state_file=tmp_path / "connectors.json",
        )

    state = tmp_path / "connectors.json"
    plain = herder()
    plain.start()
    plain.create("inv", pg_config("pw-7"))
    assert plain.shutdown(5)
    assert b"pw-7" in state.read_bytes()  # without a key, as before (mode 0600)

    sealed = herder(**{"config.storage.encryption.key": KEY})
    sealed.start()  # reads the file written in clear, seals it on the next write
    sealed.patch_config("inv", {"snapshot.mode": "never"})
    assert sealed.shutdown(5)
    assert b"pw-7" not in state.read_bytes()
    entry = orjson.loads(state.read_bytes())["connectors"][0]
    assert set(entry["sealed"]) == {"database.password"}

    again = herder(**{"config.storage.encryption.key": KEY})
    again.start()
    assert again._get("inv").config["database.password"] == "pw-7"
    assert again.shutdown(5)

    other = herder(**{"config.storage.encryption.key": OTHER})
    with pytest.raises(
        Exception, match=r"connector inv in .*: database\.password: sealed with key"
    ):
        other.start()


def test_config_key_prints_a_usable_key(capsys: pytest.CaptureFixture[str]) -> None:
    from worker.cli import main
    from worker.sealing import key_problem

    assert main(["config-key"]) == 0
    first = capsys.readouterr().out.strip()
    assert main(["config-key"]) == 0
    second = capsys.readouterr().out.strip()
    assert key_problem(first) is None and first != second
    token = Sealer(first).seal("c", "k", "v")
    assert Sealer(first).unseal("c", "k", token) == "v"
