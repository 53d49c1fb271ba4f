"""The worker YAML: every problem reported at once with its YAML path; config providers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from worker.cli import main
from worker.config import WorkerConfigError, load_config, parse_config
from worker.config_providers import Resolver, resolve_config

PG = {
    "connector.class": "postgres",
    "database.hostname": "127.0.0.1",
    "database.user": "postgres",
    "database.dbname": "inventory",
    "topic.prefix": "dbserver1",
}


def problems(text: str, env: dict[str, str] | None = None) -> list[tuple[str, str]]:
    with pytest.raises(WorkerConfigError) as info:
        parse_config(text, env=env or {})
    return info.value.problems


def paths(text: str, env: dict[str, str] | None = None) -> list[str]:
    return [p for p, _ in problems(text, env)]


def test_a_valid_file_parses_with_defaults() -> None:
    cfg = parse_config(
        """
worker:
  bootstrap.servers: 127.0.0.1:19092
  rest.port: 18083
  producer: {linger.ms: 5}
connectors:
  - name: inventory
    config:
      connector.class: io.debezium.connector.postgresql.PostgresConnector
      database.hostname: 127.0.0.1
      database.port: 15432
      database.user: postgres
      database.password: "${env:PGPASSWORD}"
      database.dbname: inventory
      topic.prefix: dbserver1
""",
        env={"PGPASSWORD": "s3cret"},
    )
    w = cfg.worker
    assert w.rest_port == 18083 and w.offset_storage == "file"
    assert w.offset_flush_interval_ms == 5000 and w.task_shutdown_graceful_timeout_ms == 30000
    assert w.producer_config() == {"bootstrap.servers": "127.0.0.1:19092", "linger.ms": 5}
    assert cfg.connectors[0].name == "inventory"
    # the placeholder is kept: it is resolved when the connector starts, never stored resolved
    assert cfg.connectors[0].config["database.password"] == "${env:PGPASSWORD}"


def test_an_empty_file_is_a_worker_without_connectors() -> None:
    cfg = parse_config("")
    assert cfg.connectors == [] and cfg.worker.rest_port == 8083


def test_malformed_yaml_names_line_and_column() -> None:
    (path, msg), *_ = problems("worker:\n  rest.port: [1, 2\n")
    assert path == "" and "not valid YAML" in msg and "line" in msg


def test_a_top_level_list_is_refused() -> None:
    assert "mapping" in problems("- a\n- b\n")[0][1]


def test_unknown_keys_and_wrong_types_name_their_yaml_path() -> None:
    found = dict(
        problems(
            """
worker:
  rest.port: abc
  offset.flush.interval.ms: -5
  offset.storage: s3
  bogus.key: 1
connectors:
  - name: a
    config: {connector.class: memory, memory.database: d, topic.prefix: p}
    state: RUNNING
elsewhere: 1
"""
        )
    )
    assert found["worker.rest.port"].startswith("Input should be a valid integer")
    assert "greater than or equal to 1" in found["worker.offset.flush.interval.ms"]
    assert "'file'" in found["worker.offset.storage"]
    assert found["worker.bogus.key"].startswith("unknown key (known keys: bootstrap.servers")
    assert found["connectors[0].state"].startswith("unknown key (known keys: name, config")
    assert found["elsewhere"].startswith("unknown key (known keys: worker, connectors")


def test_connector_configs_are_checked_by_the_connectors_config_def() -> None:
    found = problems(
        """
connectors:
  - name: inventory
    config:
      connector.class: postgres
      database.hostname: h
      database.port: five
      database.user: u
      database.dbname: d
      snapshot.mode: sometimes
      errors.max.retries: -7
"""
    )
    assert ("connectors[0].config.database.port", "must be an integer, got 'five'") in found
    assert ("connectors[0].config.database.server.name", "is required") in found
    assert any(
        p == "connectors[0].config.snapshot.mode" and "must be one of" in m for p, m in found
    )
    assert ("connectors[0].config.errors.max.retries", "must be >= -1") in found


def test_unknown_class_duplicate_names_and_missing_class() -> None:
    found = problems(
        f"""
connectors:
  - name: a
    config: {json.dumps(PG)}
  - name: a
    config: {json.dumps(PG)}
  - name: b
    config: {{connector.class: com.example.Nope}}
  - name: c
    config: {{database.hostname: h}}
  - name: d
    config: {{connector.class: memory, name: other, memory.database: x, topic.prefix: p}}
"""
    )
    msgs = dict(found)
    assert "duplicate connector name 'a' (also connectors[0])" in msgs["connectors[1].name"]
    cls = msgs["connectors[2].config.connector.class"]
    assert "unknown connector class 'com.example.Nope'" in cls and "postgres" in cls
    assert msgs["connectors[3].config.connector.class"] == "is required"
    assert "does not match name 'd'" in msgs["connectors[4].config.name"]


def test_nested_values_and_nulls_in_a_connector_config_are_refused() -> None:
    found = dict(
        problems(
            """
connectors:
  - name: a
    config:
      connector.class: memory
      memory.database: x
      topic.prefix: p
      transforms: {a: b}
      table.include.list: ~
"""
        )
    )
    assert "not an object" in found["connectors[0].config.transforms"]
    assert found["connectors[0].config.table.include.list"] == "must not be null"


def test_yaml_scalars_become_connect_strings() -> None:
    cfg = parse_config(
        """
connectors:
  - name: a
    config:
      connector.class: memory
      memory.database: x
      topic.prefix: p
      tombstones.on.delete: false
      max.batch.size: 10
      table.include.list: [s.a, s.b]
"""
    )
    from worker.registry import normalise_config

    stored, probs = normalise_config(cfg.connectors[0].config)
    assert probs == []
    assert stored["tombstones.on.delete"] == "false"
    assert stored["max.batch.size"] == "10"
    assert stored["table.include.list"] == "s.a,s.b"


def test_missing_env_var_is_reported_at_its_path() -> None:
    found = problems(
        f"""
worker:
  producer: {{sasl.password: "${{env:KAFKA_PW}}"}}
connectors:
  - name: a
    config: {json.dumps({**PG, "database.password": "${env:PGPW}"})}
"""
    )
    assert ("worker.producer.sasl.password", "environment variable KAFKA_PW is not set") in found
    assert ("connectors[0].config.database.password", "environment variable PGPW is not set") in (
        found
    )


def test_worker_placeholders_are_resolved_at_load() -> None:
    cfg = parse_config(
        'worker:\n  producer: {sasl.password: "${env:KPW}"}\n', env={"KPW": "hunter22"}
    )
    assert cfg.worker.producer["sasl.password"] == "hunter22"


def test_exactly_once_needs_the_kafka_offset_store() -> None:
    found = dict(problems("worker:\n  exactly.once.source.support: enabled\n"))
    assert "offset.storage: kafka" in found["worker.exactly.once.source.support"]
    ok = parse_config("worker:\n  exactly.once.source.support: enabled\n  offset.storage: kafka\n")
    assert ok.worker.exactly_once


def test_every_problem_is_reported_at_once() -> None:
    found = paths(
        """
worker: {rest.port: x, nope: 1}
connectors:
  - name: a
    config: {connector.class: postgres, database.port: y}
"""
    )
    assert len(found) >= 6  # two worker keys, port, and the three required PG keys ...
    assert "worker.rest.port" in found and "worker.nope" in found
    assert "connectors[0].config.database.port" in found


# -- config providers ---------------------------------------------------------------------------


def test_env_provider_forms() -> None:
    r = Resolver({"A": "1", "B": "two"})
    assert r.resolve("${env:A}") == "1"
    assert r.resolve("${env::B}") == "two"  # Kafka's EnvVarConfigProvider form
    assert r.resolve("x-${env:A}-${env:B}") == "x-1-two"
    assert r.resolve("no placeholder $ {env:A}") == "no placeholder $ {env:A}"


def test_file_provider_reads_properties_json_and_yaml(tmp_path: Path) -> None:
    props = tmp_path / "db.properties"
    props.write_text("# secrets\ndb.password = pa=ss\nuser: alice\nlong = a\\\n  b\n")
    js = tmp_path / "s.json"
    js.write_text(json.dumps({"password": "j", "db": {"password": "nested"}, "port": 5432}))
    ym = tmp_path / "s.yaml"
    ym.write_text("db:\n  password: y\nflag: true\n")
    whole = tmp_path / "pw.txt"
    whole.write_text("only-line\n")
    r = Resolver({})
    assert r.resolve(f"${{file:{props}:db.password}}") == "pa=ss"
    assert r.resolve(f"${{file:{props}:user}}") == "alice"
    assert r.resolve(f"${{file:{props}:long}}") == "ab"
    assert r.resolve(f"${{file:{js}:password}}") == "j"
    assert r.resolve(f"${{file:{js}:db.password}}") == "nested"
    assert r.resolve(f"${{file:{js}:port}}") == "5432"
    assert r.resolve(f"${{file:{ym}:db.password}}") == "y"
    assert r.resolve(f"${{file:{ym}:flag}}") == "true"
    assert r.resolve(f"${{file:{whole}}}") == "only-line"


def test_provider_errors_are_collected_per_key(tmp_path: Path) -> None:
    props = tmp_path / "p.properties"
    props.write_text("a=1\n")
    resolved, probs = resolve_config(
        {
            "ok": f"${{file:{props}:a}}",
            "k1": f"${{file:{props}:missing}}",
            "k2": "${file:/nonexistent/x.properties:a}",
            "k3": "${vault:secret/x}",
            "plain": "v",
        },
        env={},
    )
    assert resolved["ok"] == "1" and resolved["plain"] == "v"
    found = dict(probs)
    assert "has no key 'missing'" in found["k1"]
    assert "cannot read /nonexistent/x.properties" in found["k2"]
    assert "unknown config provider 'vault'" in found["k3"]


# -- the CLI ------------------------------------------------------------------------------------


def test_cli_validate_reports_every_error_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "worker: {rest.port: abc}\nconnectors:\n  - name: a\n"
        "    config: {connector.class: postgres, database.port: x}\n"
    )
    assert main(["validate", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "worker.rest.port: Input should be a valid integer" in err
    assert "connectors[0].config.database.port: must be an integer" in err


def test_cli_validate_accepts_the_example(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TIDEMARK_PG_PASSWORD", "postgres")
    example = Path(__file__).resolve().parents[2] / "examples" / "postgres.yaml"
    assert main(["validate", str(example)]) == 0
    assert "valid (1 connector(s): inventory)" in capsys.readouterr().out


def test_cli_run_exits_1_on_a_bad_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("worker: {unknown: 1}\n")
    assert main(["run", str(bad)]) == 1
    assert "worker.unknown: unknown key" in capsys.readouterr().err
    assert main(["validate", str(tmp_path / "missing.yaml")]) == 1
    assert "cannot read the file" in capsys.readouterr().err


def test_every_command_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (
        ["--help"],
        ["run", "--help"],
        ["validate", "--help"],
        ["status", "--help"],
        ["offsets", "--help"],
        ["offsets", "show", "--help"],
        ["offsets", "reset", "--help"],
        ["dev", "--help"],
    ):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 0
        assert "usage:" in capsys.readouterr().out


def test_status_without_a_worker_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--url", "http://127.0.0.1:9"]) == 1
    assert "cannot reach the worker at http://127.0.0.1:9" in capsys.readouterr().err


def test_load_config_reads_a_file(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text("worker: {rest.port: 0, state.dir: /tmp/x}\n")
    cfg = load_config(path)
    assert cfg.worker.rest_port == 0 and str(cfg.worker.state_dir) == "/tmp/x"


@pytest.mark.parametrize(
    ("yaml_text", "key", "text"),
    [
        ("worker:\n  listeners: http://127.0.0.1:99999\n", "worker.listeners", "port must be"),
        ("worker:\n  rest.advertised.url: http://h:99999\n", "worker.rest.advertised.url", "port"),
        (
            "worker:\n  offset.storage.replication.factor: 0\n",
            "worker.offset.storage.replication.factor",
            "-1 (the broker's default) or at least 1",
        ),
        ("worker:\n  rest.port: true\n", "worker.rest.port", "must be a number, not true"),
        (
            "worker:\n  offset.storage.topic: ''\n",
            "worker.offset.storage.topic",
            "may not be empty",
        ),
        ("worker:\n  state.dir: ' '\n", "worker.state.dir", "may not be empty"),
        (
            "worker:\n  producer:\n    linger.ms: [1, 2]\n",
            "worker.producer.linger.ms",
            "must be a string, number or boolean",
        ),
        ("worker:\n  rest.prot: 8083\n", "worker.rest.prot", "did you mean rest.port?"),
        ("worker:\n  mode: distributed\n  offset.storage: file\n", "worker", "mode: distributed"),
    ],
)
def test_worker_settings_mistakes_name_the_key_in_plain_words(
    yaml_text: str, key: str, text: str
) -> None:
    with pytest.raises(WorkerConfigError) as err:
        parse_config(yaml_text)
    found = dict(err.value.problems)
    assert len(err.value.problems) == 1, err.value.problems
    assert text in found[key], found
    assert not found[key].startswith("Value error")
    assert "kafka_security" not in found[key]
