"""Connecting with a config before it is stored: Kafka Connect's validate step.

Kafka Connect asks the connector to validate a config on every create and update over REST,
and Debezium's connectors connect to the database then; an operator coming from Debezium
expects a typo in a password to be a 400 on ``POST /connectors``, not a task that fails
later. Each connector says what it checks (``Connector.check_connection``); this module runs
it with the connector's ``connection.validation.timeout.ms``, on a thread of its own so a host
that never answers cannot hold the request longer than that."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

from cdc.spi.connection_check import ConnectionReport
from worker.config import WorkerConfig
from worker.config_providers import resolve_config
from worker.registry import ConnectorPlugin, Registry

log = logging.getLogger("tidemark.worker.validate")

TIMEOUT_KEY = "connection.validation.timeout.ms"
DEFAULT_TIMEOUT_MS = 60000
#: the key a timeout or an unexpected error is reported under: the connector's address, as
#: Debezium reports it (``database.hostname``), else the key of the timeout itself
_ADDRESS_KEYS = ("database.hostname", "mongodb.connection.string", "mongodb.hosts")


def timeout_ms(config: Mapping[str, Any]) -> int:
    try:
        value = int(str(config.get(TIMEOUT_KEY, DEFAULT_TIMEOUT_MS)))
    except ValueError:
        return DEFAULT_TIMEOUT_MS  # the config check has reported it already
    return max(value, 1)


def check_connection(plugin: ConnectorPlugin, config: Mapping[str, Any]) -> ConnectionReport:
    """What ``plugin``'s connector finds connecting with ``config`` (already resolved, with
    the worker's restrictions applied, exactly as the task would get it)."""
    where = next((k for k in _ADDRESS_KEYS if config.get(k)), TIMEOUT_KEY)
    limit = timeout_ms(config)
    outcome: list[ConnectionReport | BaseException | None] = []

    def run() -> None:
        try:
            outcome.append(plugin.cls.check_connection(dict(config)))
        except Exception as exc:  # a bug or an error the connector did not expect
            outcome.append(exc)

    thread = threading.Thread(target=run, name="tidemark-connection-check", daemon=True)
    thread.start()
    thread.join(limit / 1000)
    if not outcome:
        # the thread is left to its driver's own connect timeout; it only reads
        timed_out = f"Connection validation timed out after {limit} ms"
        return ConnectionReport(errors=[(where, timed_out)])
    result = outcome[0]
    if isinstance(result, BaseException):
        log.warning("connection check of %s failed", plugin.class_name, exc_info=result)
        return ConnectionReport(errors=[(where, f"Error during connection validation: {result}")])
    return result or ConnectionReport()


def check_file(config: WorkerConfig, env: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """``tidemark validate --connect``: every connector of a valid YAML file checked as a REST
    config would be (the file's own credentials rules apply: it is the operator's). Returns
    errors and warnings as ``connectors[i].config.<key>: message`` lines."""
    registry = Registry()
    errors: list[str] = []
    warnings: list[str] = []
    for i, entry in enumerate(config.connectors):
        plugin = registry.resolve(str(entry.config["connector.class"]))
        stored = {k: str(v) for k, v in entry.config.items()}
        resolved, _ = resolve_config({**stored, "name": entry.name}, env)
        report = check_connection(plugin, resolved)
        errors += [f"connectors[{i}].config.{k}: {m}" for k, m in report.errors]
        warnings += [f"connectors[{i}].config.{k}: {m}" for k, m in report.warnings]
    return errors, warnings
