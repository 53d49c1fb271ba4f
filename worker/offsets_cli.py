"""``tidemark offsets import|export``: a connector's offsets taken over from Debezium Server's
offset file, or handed back in one, through the REST API (``PATCH``/``GET /offsets``).

Runs on the operator's machine, never in the worker: the file is read here, translated by the
connector class's own rules (``Connector.from_debezium_offset`` / ``to_debezium_offset``) and
sent like any offset edit, so the worker validates it as it validates ``PATCH /offsets`` and
the connector must be STOPPED (Kafka Connect's rule for offset edits). For Kafka Connect
deployments no file is needed: tidemark's Kafka offset store reads Connect's offsets topic
(docs/switching-from-debezium.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from cdc.errors import OffsetError
from cdc.offsets.debezium_server_file import StoredOffset, parse_offsets, render_offsets
from worker.rest.client import Client

#: the entry name Debezium Server gives its offsets: its sink type (``debezium.sink.type``)
DEFAULT_NAME = "kafka"
_SERVER_KEYS = ("topic.prefix", "database.server.name")


class OffsetsCliError(Exception):
    """A problem the operator fixes (the message says how); nothing was changed."""


def _connector(client: Client, name: str) -> tuple[dict[str, Any], type[Any]]:
    config = client.get(Client.connector_path(name, "/config"))
    if not isinstance(config, dict) or not config.get("connector.class"):
        raise OffsetsCliError(f"connector {name} has no connector.class")
    from worker.registry import Registry  # only when a command needs it: it loads plugins

    plugin = Registry().resolve(str(config["connector.class"]))
    return config, plugin.cls


def _check_partition(config: dict[str, Any], partition: dict[str, Any]) -> None:
    """Offsets under another server name would be stored and never read: the connector would
    snapshot again as if nothing had been imported."""
    server = partition.get("server")
    ours = next((config[k] for k in _SERVER_KEYS if config.get(k)), None)
    if server is not None and ours is not None and server != ours:
        raise OffsetsCliError(
            f'the Debezium offsets are for server "{server}", the connector\'s topic.prefix is '
            f'"{ours}": set topic.prefix to "{server}" (Debezium\'s topics and offsets follow '
            "it) and run the import again"
        )


def _pick(entries: list[StoredOffset], name: str | None, path: Path) -> list[StoredOffset]:
    names = sorted({e.name for e in entries})
    if name is None:
        if len(names) != 1:
            listed = ", ".join(names) or "none"
            raise OffsetsCliError(f"{path} holds the offsets of {listed}: choose one with --name")
        name = names[0]
    chosen = [e for e in entries if e.name == name]
    if not chosen:
        raise OffsetsCliError(f"{path} has no offsets named {name} (it has {', '.join(names)})")
    return chosen


def import_offsets(client: Client, connector: str, path: Path, name: str | None) -> list[str]:
    """Store the file's offsets as ``connector``'s; returns what the operator should know."""
    config, cls = _connector(client, connector)
    entries = _pick(parse_offsets(path.read_bytes()), name, path)
    offsets: list[dict[str, Any]] = []
    notes: list[str] = []
    for entry in entries:
        _check_partition(config, entry.partition)
        translated = cls.from_debezium_offset(entry.offset)
        if translated.refused:
            raise OffsetsCliError(f"partition {entry.partition}: {translated.refused}")
        offsets.append({"partition": entry.partition, "offset": translated.offset})
        notes += translated.notes
    answer = client.call(
        "PATCH", Client.connector_path(connector, "/offsets"), {"offsets": offsets}
    )
    message = answer.get("message") if isinstance(answer, dict) else answer
    return [*notes, str(message)]


def export_offsets(client: Client, connector: str, path: Path, name: str) -> list[str]:
    """Write ``connector``'s offsets as Debezium Server's offset file; returns the notes."""
    _config, cls = _connector(client, connector)
    status = client.get(Client.connector_path(connector, "/status"))
    state = status.get("connector", {}).get("state") if isinstance(status, dict) else None
    if state != "STOPPED":
        # a running task keeps moving its offsets: Debezium would start from an old one and
        # both would capture at once
        raise OffsetsCliError(
            f"connector {connector} is {state}: stop it first "
            f"(PUT {Client.connector_path(connector, '/stop')})"
        )
    doc = client.get(Client.connector_path(connector, "/offsets"))
    stored = doc.get("offsets", []) if isinstance(doc, dict) else []
    if not stored:
        raise OffsetsCliError(f"connector {connector} has no stored offsets yet")
    out: list[StoredOffset] = []
    notes: list[str] = []
    for item in stored:
        translated = cls.to_debezium_offset(item.get("offset"))
        if translated.refused:
            raise OffsetsCliError(f"partition {item.get('partition')}: {translated.refused}")
        out.append(StoredOffset(name, dict(item.get("partition") or {}), translated.offset))
        notes += translated.notes
    path.write_bytes(render_offsets(out))
    return [*notes, f"wrote {len(out)} offset(s) named {name} to {path}"]


def run(args: argparse.Namespace, client: Client) -> int:
    path = Path(args.file)
    try:
        if args.offsets_command == "import":
            if args.stop:
                client.call("PUT", Client.connector_path(args.connector, "/stop"))
                print(f"connector {args.connector} stopped")
            lines = import_offsets(client, args.connector, path, args.name)
            lines.append(
                f"resume it with: curl -X PUT {client.url}"
                f"{Client.connector_path(args.connector, '/resume')}"
            )
        else:
            lines = export_offsets(client, args.connector, path, args.name or DEFAULT_NAME)
    except (OffsetsCliError, OffsetError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for line in lines:
        print(line)
    return 0


def add_commands(osub: Any, add_rest_options: Any, func: Any) -> None:
    """The ``import`` and ``export`` subcommands of ``tidemark offsets``."""
    q = osub.add_parser(
        "import",
        help="take over the offsets in a Debezium Server offset file (the connector must be "
        "STOPPED, or use --stop)",
        description="Read Debezium Server's offset file (offset.storage.file.filename), "
        "translate each offset for the connector's class and store it (PATCH /offsets). "
        "The connector then resumes where Debezium stopped, without a new snapshot.",
    )
    q.add_argument("connector", help="connector name")
    q.add_argument("file", help="Debezium Server's offset file, e.g. data/offsets.dat")
    q.add_argument(
        "--name",
        help="which entries of the file (Debezium Server names them after its sink type, "
        "e.g. kafka); needed only when the file holds several",
    )
    q.add_argument("--stop", action="store_true", help="stop the connector first")
    add_rest_options(q)
    q.set_defaults(func=func)
    q = osub.add_parser(
        "export",
        help="write the connector's offsets as a Debezium Server offset file",
        description="Write the connector's stored offsets (GET /offsets) as Debezium Server's "
        "offset file, translated for Debezium's connector, to hand the connector back to "
        "Debezium Server. The connector must be STOPPED.",
    )
    q.add_argument("connector", help="connector name")
    q.add_argument("file", help="the offset file to write (replaced if it exists)")
    q.add_argument(
        "--name",
        help=f"entry name, Debezium Server's sink type (default {DEFAULT_NAME})",
    )
    add_rest_options(q)
    q.set_defaults(func=func)
