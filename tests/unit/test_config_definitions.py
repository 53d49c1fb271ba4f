"""Connector config definitions are complete enough for tooling (issue 20, part 8).

Kafka Connect UIs and validators read ``GET /connector-plugins/{p}/config`` and
``PUT .../config/validate``: every key a connector accepts must be listed there with its
type, default, importance, group and documentation, and enums with their allowed values.
The scan below reads the source for config keys the code uses, so a key added to the code
without a definition fails here rather than being silently unknown to tooling.
"""

# ruff: noqa: F811  (test parameters named after the imported `herder` fixture)
from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from cdc.config import ConfigDef, OneOf
from tests.unit.test_config_unknown_keys import herder  # noqa: F401  (the fixture)
from worker.herder import Herder
from worker.registry import Registry

ROOT = Path(__file__).resolve().parents[2]
PLUGINS = ("postgres", "mysql", "memory")
IMPORTANCE = {"HIGH", "MEDIUM", "LOW"}

# `cfg["key"]`, `self.config.get("key"`, `src.cfg.raw.get(f"prefix.{`: reads of a parsed
# connector Config (or its raw map) by the names the code gives it.
READ = re.compile(
    r"\b(?:cfg|config|raw|self\.cfg|self\.config|src\.cfg|c)(?:\.raw)?"
    r"(?:\[|\.get\()\s*(f?)\"([a-z][A-Za-z0-9_.-]*\.[A-Za-z0-9_.-]*)(\{?)"
)
# Where the parsed connector config is read, and whose definition must hold the key (None:
# code shared by every connector; the key must be defined by all of them when read with [],
# by at least one when read with .get(), which tolerates its absence).
SOURCES: dict[str, str | None] = {
    "connectors/postgres": "postgres",
    "connectors/mysql": "mysql",
    "cdc/testing/memory.py": "memory",
    "cdc/engine.py": None,
    "cdc/assembly.py": None,
    "cdc/snapshot": None,
    "cdc/pipeline": None,
    "cdc/snapshot_modes.py": None,
    "worker/worker.py": None,
}


def defs() -> dict[str, ConfigDef]:
    registry = Registry(entry_points=False)
    return {name: registry.resolve(name).config_def for name in PLUGINS}


def reads() -> Iterator[tuple[str, str | None, str, bool, bool]]:
    """(where, plugin, key, read with [] , key is an f-string prefix)"""
    for base, plugin in SOURCES.items():
        path = ROOT / base
        files = [path] if path.suffix == ".py" else sorted(path.rglob("*.py"))
        for file in files:
            text = file.read_text()
            for m in READ.finditer(text):
                fstring, key, brace = m.groups()
                where = f"{file.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}"
                yield (
                    where,
                    plugin,
                    key,
                    m.group(0).rstrip('f"').endswith("["),
                    bool(fstring and brace),
                )


def test_the_scan_finds_the_reads_it_is_meant_to_check() -> None:
    keys = {key for _, _, key, _, _ in reads()}
    assert {"slot.name", "database.ssl.mode", "memory.database", "max.queue.size"} <= keys
    assert "snapshot.select.statement.overrides." in keys


def test_every_key_the_code_reads_is_defined() -> None:
    by_plugin = defs()
    missing = []
    for where, plugin, key, indexed, prefix in reads():
        targets = [by_plugin[plugin]] if plugin else list(by_plugin.values())
        if prefix:
            ok = all(any(key.startswith(p) for p in d.passthrough) for d in targets)
        elif plugin is None and not indexed:
            ok = any(d.lookup(key) is not None for d in targets)
        else:
            ok = all(d.lookup(key) is not None for d in targets)
        if not ok:
            missing.append(f"{where}: {key}")
    assert missing == []


@pytest.mark.parametrize("plugin", PLUGINS)
def test_every_key_is_documented_grouped_and_ranked(plugin: str) -> None:
    cdef = defs()[plugin]
    bad = [
        f.name
        for f in cdef.fields.values()
        if len(f.doc) < 20 or not f.group or f.importance not in IMPORTANCE
    ]
    assert bad == []


@pytest.mark.parametrize("plugin", PLUGINS)
def test_every_enum_offers_its_values(plugin: str) -> None:
    cdef = defs()[plugin]
    enums = [f for f in cdef.fields.values() if isinstance(f.validator, OneOf)]
    assert enums, "the scan must see the enum keys"
    assert [f.name for f in enums if f.recommended_values != list(f.validator.choices)] == []  # type: ignore[union-attr]


@pytest.mark.parametrize("plugin", PLUGINS)
def test_the_plugin_config_endpoint_lists_every_accepted_name(herder: Herder, plugin: str) -> None:
    listed = {d["name"]: d for d in herder.plugin_config(plugin)}
    cdef = herder.registry.resolve(plugin).config_def
    assert set(listed) == set(cdef.names())
    undocumented = [n for n, d in listed.items() if not d["documentation"]]
    assert undocumented == []
    assert all(d["group"] and d["importance"] in IMPORTANCE for d in listed.values())


def test_postgres_lists_topic_prefix_and_its_enums_values(herder: Herder) -> None:
    listed = {d["name"]: d for d in herder.plugin_config("postgres")}
    assert "topic.prefix" in listed and "database.server.name" in listed
    assert "database.server.name" in listed["topic.prefix"]["documentation"]
    assert listed["database.hostname"]["group"] == "Connection"
    assert listed["snapshot.mode"]["importance"] == "HIGH"

    result = herder.validate("postgres", {"topic.prefix": "srv"})
    values = {c["value"]["name"]: c["value"] for c in result["configs"]}
    assert values["topic.prefix"]["value"] == "srv"
    assert values["database.server.name"]["value"] == "srv"
    assert values["snapshot.mode"]["recommended_values"] == [
        "initial",
        "always",
        "never",
        "initial_only",
        "exported",
        "when_needed",
        "no_data",
        "schema_only",
    ]
    assert values["database.sslmode"]["recommended_values"][0] == "disable"
    assert (
        "io.confluent.connect.avro.AvroConverter" in values["value.converter"]["recommended_values"]
    )
    # the required keys left out are the only errors
    errors = {n: v["errors"] for n, v in values.items() if v["errors"]}
    assert errors == {
        "database.hostname": ["is required"],
        "database.user": ["is required"],
        "database.dbname": ["is required"],
    }


def test_an_unsupported_converter_is_refused_at_validation() -> None:
    checked = Registry(entry_points=False).check(
        {
            "connector.class": "memory",
            "memory.database": "db",
            "topic.prefix": "srv",
            "value.converter": "io.apicurio.registry.utils.converter.AvroConverter",
        }
    )
    assert [k for k, _ in checked.problems] == ["value.converter"]
