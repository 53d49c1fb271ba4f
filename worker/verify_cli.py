"""``tidemark verify``: is a connector's downstream copy still equal to its source?

The command reads the worker YAML for the connector's config (placeholders resolved as the
worker resolves them) and Kafka settings, opens the connector's verify side (the lookup below:
one line per connector that implements ``cdc.verify``'s contract) and the target, and compares
table by table (``cdc.verify.compare``). Exit code 0 only when every table is equal, 1 when a
difference remains after the re-checks, 2 when the comparison could not run.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any, TextIO

import orjson

from cdc.kafka_client_log import logged
from cdc.verify.compare import Options, TableResult, compare_table
from cdc.verify.contract import SourceSide, TargetSide
from cdc.verify.report import export, summary, to_json

#: connector plugin name -> "module:function" building its verify side from a resolved config
VERIFY_SIDES: dict[str, str] = {
    "postgres": "connectors.postgres.verify:verify_side",
    "mysql": "connectors.mysql.verify:verify_side",
}

EXIT_EQUAL, EXIT_DIFFERENT, EXIT_ERROR = 0, 1, 2


class VerifyError(Exception):
    """The comparison cannot run (bad arguments, unknown connector, unreachable service)."""


def add_verify_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "verify",
        help="compare a connector's tables with their topics or Delta tables",
        description=(
            "Compare each captured table of CONNECTOR with its downstream copy, chunk by "
            "primary-key range with checksums computed in the database, and name the keys "
            "that are missing, extra or stale. Exit code 0 only when every table is equal, 1 "
            "when they differ, 2 when the comparison could not run. See docs/verify.md."
        ),
    )
    p.add_argument("config", help="worker YAML file holding the connector")
    p.add_argument("--connector", required=True, help="connector name in the YAML file")
    p.add_argument(
        "--table",
        action="append",
        default=[],
        help="schema.table (PostgreSQL) or db.table (MySQL); repeatable (default: every "
        "table the connector captures)",
    )
    p.add_argument(
        "--target",
        default="kafka",
        help="kafka (the last event per key of each table's topic), delta:PATH (the "
        "Delta tables the apply job writes under PATH, one directory per topic) or jdbc:URL "
        "(the tables a JDBC sink writes, e.g. jdbc:postgresql://host:5432/db?user=u&"
        "password=p; table per topic as Debezium's JDBC sink names it)",
    )
    p.add_argument("--chunk-rows", type=int, default=50_000, help="rows per checksum chunk")
    p.add_argument(
        "--recheck-rounds",
        type=int,
        default=5,
        help="times a differing chunk is compared again (capture may be catching up)",
    )
    p.add_argument("--recheck-wait", type=float, default=2.0, help="seconds between re-checks")
    p.add_argument(
        "--isolation",
        choices=["read_committed", "read_uncommitted"],
        default="read_committed",
        help="Kafka isolation level for reading topics",
    )
    p.add_argument(
        "--processes",
        type=int,
        default=None,
        help="processes sharing the first read of a large topic (default: the CPUs less one, "
        "at most 4)",
    )
    p.add_argument("--json", action="store_true", help="print the JSON report, not the table")
    p.add_argument("--metrics-textfile", help="write Prometheus gauges of the result to a file")
    p.add_argument("--pushgateway", help="push Prometheus gauges of the result to this URL")
    p.set_defaults(func=run_verify)


def _connector_config(path: str, name: str) -> tuple[str, dict[str, str], dict[str, Any]]:
    """(plugin name, resolved connector config, Kafka consumer settings)."""
    from cdc.kafka_security import librdkafka_config
    from worker.config import WorkerConfigError, load_config
    from worker.registry import Registry

    try:
        config = load_config(path)
    except WorkerConfigError as exc:
        raise VerifyError(str(exc)) from exc
    entries = {c.name: c for c in config.connectors}
    if name not in entries:
        known = ", ".join(sorted(entries)) or "none"
        raise VerifyError(f"{path}: no connector named {name!r} (connectors: {known})")
    checked = Registry().check(entries[name].config)
    if not checked.ok or checked.plugin is None:
        problems = "; ".join(f"{k}: {v}" for k, v in checked.problems)
        raise VerifyError(f"connector {name}: invalid config: {problems}")
    ws = config.worker
    kafka = logged(
        librdkafka_config(
            {"bootstrap.servers": ws.bootstrap_servers, **ws.internal_client_security()}
        )
    )
    return checked.plugin.spec.name, checked.resolved, kafka


def open_source(plugin: str, config: Mapping[str, Any]) -> SourceSide:
    target = VERIFY_SIDES.get(plugin)
    if target is None:
        raise VerifyError(
            f"connector plugin {plugin!r} has no verify side (have: {', '.join(VERIFY_SIDES)})"
        )
    module, func = target.split(":")
    build: Callable[[Mapping[str, Any]], SourceSide] = getattr(
        importlib.import_module(module), func
    )
    try:
        return build(config)
    except Exception as exc:  # the driver's own errors: unreachable server, bad password
        raise VerifyError(f"cannot open the {plugin} database: {exc}") from exc


def avro_reading(config: Mapping[str, Any]) -> dict[str, Any]:
    """How to read the connector's topics when it writes Avro: where the writer schemas are
    and the names its fields are written under (``KafkaTarget``'s ``registry`` and
    ``field_name``); nothing for JSON. The converters are built as the connector builds
    them (``converter_from_config``), so the two cannot disagree on which is Avro."""
    from cdc.converters.avro import AvroConverter
    from cdc.converters.avro_json import RegistrySettings
    from cdc.converters.factory import converter_from_config

    for side in ("value", "key"):
        try:
            converter = converter_from_config(config, is_key=side == "key")
        except ValueError as exc:
            raise VerifyError(f"connector's {side}.converter: {exc}") from exc
        if isinstance(converter, AvroConverter):
            converter.close()
            registry = RegistrySettings(
                str(config[f"{side}.converter.schema.registry.url"]),
                config.get(f"{side}.converter.basic.auth.user.info"),
            )
            return {"registry": registry, "field_name": converter.field_name}
    return {}


def open_target(
    spec: str,
    kafka: Mapping[str, Any],
    isolation: str,
    processes: int | None = None,
    connector: Mapping[str, Any] | None = None,
) -> TargetSide:
    if spec == "kafka":
        from cdc.verify.kafka_target import KafkaTarget

        return KafkaTarget(
            kafka, isolation=isolation, processes=processes, **avro_reading(connector or {})
        )
    if spec.startswith("delta:") and len(spec) > len("delta:"):
        from cdc.verify.delta_target import DeltaTarget

        return DeltaTarget(spec[len("delta:") :])
    if spec.startswith("jdbc:"):
        from cdc.verify.jdbc_target import JdbcTarget, JdbcTargetError

        try:
            return JdbcTarget(spec)
        except JdbcTargetError as exc:
            raise VerifyError(f"--target: {exc}") from exc
    raise VerifyError("--target: expected kafka, delta:PATH or jdbc:URL")


def _progress(stream: TextIO) -> Callable[[str, int, int], None] | None:
    if not stream.isatty():
        return None
    started: dict[str, float] = {}

    def show(table: str, done: int, total: int) -> None:
        t0 = started.setdefault(table, time.monotonic())
        elapsed = time.monotonic() - t0
        eta = elapsed / done * (total - done) if done else 0.0
        width = 30
        bar = "#" * (width * done // total) + "." * (width - width * done // total)
        end = "\n" if done == total else ""
        print(f"\r{table} [{bar}] {done}/{total} chunks, ETA {eta:.0f}s", end=end, file=stream)

    return show


def verify(
    source: SourceSide,
    target: TargetSide,
    tables: list[str],
    options: Options,
    progress: Callable[[str, int, int], None] | None = None,
    route: Callable[[str], str] | None = None,
) -> list[TableResult]:
    """Compare each table; ``route``: the connector's topic routing (``topic_route``)."""
    from cdc.verify.routing import RoutingError, routed

    try:
        specs = source.tables(tables)
    except KeyError as exc:
        raise VerifyError(f"--table {exc.args[0]}: not a table the connector captures") from exc
    if not specs:
        raise VerifyError("the connector captures no table to compare")
    if route is not None:
        try:
            routed(source.tables([]) if tables else specs, route)  # no two tables merged
            specs = routed(specs, route)
        except RoutingError as exc:
            raise VerifyError(str(exc)) from exc
    results = []
    for spec in specs:
        if not spec.key:
            result = TableResult(spec.identifier, spec.topic, target.name)
            result.error = "no primary key: rows cannot be matched by key"
            results.append(result)
            continue
        try:
            results.append(compare_table(source, target, spec, options, progress))
        except Exception as exc:  # one table's failure is reported; the others still run
            result = TableResult(spec.identifier, spec.topic, target.name)
            result.error = str(exc)
            results.append(result)
    return results


def run_verify(args: argparse.Namespace) -> int:
    from cdc.verify.routing import RoutingError, topic_route

    try:
        plugin, config, kafka = _connector_config(args.config, args.connector)
        try:
            route = topic_route(config)
        except RoutingError as exc:
            raise VerifyError(str(exc)) from exc
        source = open_source(plugin, config)
        try:
            target = open_target(args.target, kafka, args.isolation, args.processes, config)
            try:
                options = Options(args.chunk_rows, args.recheck_rounds, args.recheck_wait)
                results = verify(source, target, args.table, options, _progress(sys.stderr), route)
            finally:
                target.close()
        finally:
            source.close()
    except VerifyError as exc:
        print(f"tidemark verify: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if args.json:
        doc = to_json(args.connector, results)
        sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        sys.stdout.write(summary(results))
    export(args.connector, results, textfile=args.metrics_textfile, pushgateway=args.pushgateway)
    if any(r.error for r in results):
        return EXIT_ERROR
    return EXIT_EQUAL if all(r.equal for r in results) else EXIT_DIFFERENT
