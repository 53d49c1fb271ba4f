"""`tidemark offsets import|export` refusals, against a stub REST client (named as such: the
happy paths run against a real worker in tests/integration/test_switch_from_debezium.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cdc.offsets.debezium_server_file import StoredOffset, parse_offsets, render_offsets
from tests.unit.test_debezium_offsets import TIDEMARK_PG
from worker import offsets_cli
from worker.offsets_cli import OffsetsCliError, export_offsets, import_offsets

PG = "io.debezium.connector.postgresql.PostgresConnector"
STREAMING = {"lsn_proc": 90, "messageType": "INSERT", "lsn_commit": 80, "lsn": 90, "txId": 4}


class StubClient:
    """Answers GET config/offsets from dicts and records every other call (a stand-in for
    the worker's REST API)."""

    url = "http://stub"

    def __init__(self, config: dict[str, str], offsets: list[dict[str, Any]] | None = None):
        self.config = config
        self.offsets = offsets or []
        self.calls: list[tuple[str, str, Any]] = []

    state = "STOPPED"

    def get(self, path: str) -> Any:
        if path.endswith("/status"):
            return {"connector": {"state": self.state}}
        return self.config if path.endswith("/config") else {"offsets": self.offsets}

    def call(self, method: str, path: str, body: Any = None) -> Any:
        self.calls.append((method, path, body))
        return {"message": "The offsets for this connector have been altered successfully"}


def write(tmp_path: Path, *entries: StoredOffset) -> Path:
    path = tmp_path / "offsets.dat"
    path.write_bytes(render_offsets(entries))
    return path


def test_import_sends_translated_offsets(tmp_path: Path) -> None:
    client = StubClient({"connector.class": PG, "topic.prefix": "inv"})
    path = write(tmp_path, StoredOffset("kafka", {"server": "inv"}, STREAMING))
    lines = import_offsets(client, "c", path, None)  # type: ignore[arg-type]
    ((method, url, body),) = client.calls
    assert (method, url) == ("PATCH", "/connectors/c/offsets")
    assert body == {"offsets": [{"partition": {"server": "inv"}, "offset": STREAMING}]}
    assert any("continues after them" in line for line in lines)


@pytest.mark.parametrize(
    ("entries", "name", "why"),
    [
        (
            [StoredOffset("kafka", {"server": "other"}, STREAMING)],
            None,
            'set topic.prefix to "other"',
        ),
        (
            [
                StoredOffset("a", {"server": "inv"}, STREAMING),
                StoredOffset("b", {"server": "inv"}, STREAMING),
            ],
            None,
            "choose one with --name",
        ),
        ([StoredOffset("kafka", {"server": "inv"}, STREAMING)], "nope", "no offsets named nope"),
        (
            [StoredOffset("kafka", {"server": "inv"}, {"lsn": 5, "snapshot": "INITIAL"})],
            None,
            "snapshot had not finished",
        ),
    ],
)
def test_import_refuses_and_changes_nothing(
    tmp_path: Path, entries: list[StoredOffset], name: str | None, why: str
) -> None:
    client = StubClient({"connector.class": PG, "topic.prefix": "inv"})
    with pytest.raises(OffsetsCliError, match=why):
        import_offsets(client, "c", write(tmp_path, *entries), name)  # type: ignore[arg-type]
    assert client.calls == []


def test_export_writes_debeziums_form_and_refuses_what_it_cannot(tmp_path: Path) -> None:
    ours = TIDEMARK_PG
    client = StubClient({"connector.class": PG}, [{"partition": {"server": "inv"}, "offset": ours}])
    path = tmp_path / "back.dat"
    export_offsets(client, "c", path, "kafka")  # type: ignore[arg-type]
    (entry,) = parse_offsets(path.read_bytes())
    assert entry.name == "kafka" and entry.offset is not None and entry.offset["lsn_commit"] == 96
    client.state = "RUNNING"
    with pytest.raises(OffsetsCliError, match="is RUNNING: stop it first"):
        export_offsets(client, "c", path, "kafka")  # type: ignore[arg-type]
    mongo = StubClient(
        {"connector.class": "io.debezium.connector.mongodb.MongoDbConnector"},
        [{"partition": {}, "offset": {"sec": 1}}],
    )
    with pytest.raises(OffsetsCliError, match="no Debezium form"):
        export_offsets(mongo, "c", tmp_path / "m.dat", "kafka")  # type: ignore[arg-type]


def test_a_damaged_file_is_an_error_message_not_a_traceback(tmp_path: Path, capsys: Any) -> None:
    path = tmp_path / "bad.dat"
    path.write_bytes(b"garbage")

    class Args:
        offsets_command, file, connector, name, stop = "import", str(path), "c", None, False

    client = StubClient({"connector.class": PG, "topic.prefix": "inv"})
    assert offsets_cli.run(Args(), client) == 1  # type: ignore[arg-type]
    assert "not a Debezium Server offset file" in capsys.readouterr().err
