"""PUT and PATCH of a connector in distributed mode keep the standalone herder's rules for
masked secrets: a masked value written back keeps the stored secret only while the connector
still connects where it did (docs/security.md). The config topic is replaced by a list here
(tests.unit.test_config_sealing.ListLog); the herder, its checks and its store are real."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc.offsets.memory import MemoryOffsetStore
from tests.unit.test_config_sealing import KEY, ListLog
from worker.config import WorkerSettings
from worker.distributed.herder import DistributedHerder
from worker.herder import BadRequest

MONGO = "mongodb://cdc:pw-mongo-1@127.0.0.1:27017/?replicaSet=rs0"


def herder(tmp_path: Path) -> DistributedHerder:
    settings = WorkerSettings.model_validate(
        {
            "mode": "distributed",
            "state.dir": str(tmp_path),
            "config.storage.encryption.key": KEY,
            "rest.validate.connections": False,
        }
    )
    h = DistributedHerder(settings, MemoryOffsetStore(), worker_id="w1")
    log = ListLog(h.configs)
    h.configs.log = log  # type: ignore[assignment]
    return h


def pg(**extra: str) -> dict[str, str]:
    return {
        "connector.class": "postgres",
        "database.hostname": "127.0.0.1",
        "database.user": "cdc",
        "database.password": "pw-pg-1",
        "database.dbname": "inv",
        "topic.prefix": "inv",
        **extra,
    }


def test_a_masked_password_follows_no_new_hostname(tmp_path: Path) -> None:
    h = herder(tmp_path)
    h.create("inv", pg())
    shown = h.connector_config("inv")
    assert shown["database.password"] == "********"
    # written back unchanged: the stored secret is kept
    h.put_config("inv", shown)
    assert h.configs.config("inv")["database.password"] == "pw-pg-1"  # type: ignore[index]
    # written back with another host: refused, for PUT as for PATCH
    with pytest.raises(BadRequest, match="send the secret again"):
        h.put_config("inv", {**shown, "database.hostname": "evil.example"})
    with pytest.raises(BadRequest, match="send the secret again"):
        h.patch_config("inv", {"database.hostname": "evil.example"})
    assert h.configs.config("inv")["database.hostname"] == "127.0.0.1"  # type: ignore[index]
    # with the secret sent again the move is fine
    h.put_config("inv", {**shown, "database.hostname": "db2.example", "database.password": "pw-2"})
    assert h.configs.config("inv")["database.password"] == "pw-2"  # type: ignore[index]


def test_a_masked_url_password_is_restored_not_stored_masked(tmp_path: Path) -> None:
    h = herder(tmp_path)
    h.create(
        "m", {"connector.class": "mongodb", "mongodb.connection.string": MONGO, "topic.prefix": "m"}
    )
    shown = h.connector_config("m")
    assert (
        shown["mongodb.connection.string"]
        == "mongodb://cdc:********@127.0.0.1:27017/?replicaSet=rs0"
    )
    h.put_config("m", {**shown, "snapshot.mode": "never"})
    stored = h.configs.config("m")
    assert stored is not None and stored["mongodb.connection.string"] == MONGO


def test_put_of_a_connector_stored_in_the_topic_replaces_it(tmp_path: Path) -> None:
    """Existence is the config topic's, not this worker's local entries (another worker may
    have created the connector a moment ago)."""
    h = herder(tmp_path)
    h.configs.put_connector("other", pg(**{"name": "other"}), "STARTED")  # as another worker
    created, _ = h.put_config("other", {**pg(), "snapshot.mode": "never"})
    assert created is False
    assert h.configs.config("other")["snapshot.mode"] == "never"  # type: ignore[index]


def test_standalone_keeps_a_masked_url_password_written_back(tmp_path: Path) -> None:
    """The same rule in standalone mode: a MongoDB connection string read back with its
    password masked is the same endpoint (it was once refused as a move)."""
    from tests.unit.test_worker_herder import Engines, make

    h = make(tmp_path, Engines(), MemoryOffsetStore())
    h.start()
    try:
        h.create(
            "m",
            {"connector.class": "mongodb", "mongodb.connection.string": MONGO, "topic.prefix": "m"},
        )
        shown = h.connector_config("m")
        h.put_config("m", {**shown, "snapshot.mode": "never"})
        assert h._get("m").config["mongodb.connection.string"] == MONGO
        moved = shown["mongodb.connection.string"].replace("127.0.0.1", "evil.example")
        with pytest.raises(BadRequest, match="send the secret again"):
            h.put_config("m", {**shown, "mongodb.connection.string": moved})
    finally:
        assert h.shutdown(5)
