"""Config providers over REST (issue 23 part 1): what a config sent to the REST API may read,
and the scrubbing of resolved values. Through :meth:`App.handle` with fake engines; the real
worker process is in ``tests/integration/test_worker_security.py``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from cdc.offsets.memory import MemoryOffsetStore
from tests.unit.test_worker_herder import WORKER, Engines, memory
from worker.config import ConnectorEntry, WorkerConfigError, WorkerSettings, parse_config
from worker.config_providers import (
    ProviderError,
    Resolver,
    SecretValues,
    check_placeholders,
    declared_providers,
    installed,
)
from worker.herder import Herder
from worker.rest import App, Request, Response

PG = "io.debezium.connector.postgresql.PostgresConnector"


def make_app(
    tmp_path: Path, yaml: tuple[ConnectorEntry, ...] = (), **worker: Any
) -> tuple[App, Herder]:
    s = WorkerSettings.model_validate(
        {"state.dir": str(tmp_path / "state"), "rest.validate.connections": False, **worker}
    )
    herder = Herder(
        s, MemoryOffsetStore(), worker_id=WORKER, engine_factory=Engines(), env={"TM_PW": "pw1"}
    )
    herder.start(yaml)
    return App(herder, version="1.0"), herder


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    a, herder = make_app(tmp_path)
    yield a
    herder.shutdown(5)


def call(app: App, method: str, path: str, body: Any) -> Response:
    return app.handle(Request(method, path, {}, orjson.dumps(body)))


EXFILTRATE = {
    "connector.class": PG,
    "database.hostname": "${file:/etc/passwd}",
    "database.user": "${env:HOME}",
    "database.password": "x",
    "database.dbname": "d",
    "topic.prefix": "p",
}


def test_the_exfiltration_request_is_refused_with_default_settings(app: App) -> None:
    r = call(app, "POST", "/connectors", {"name": "x", "config": EXFILTRATE})
    assert r.status == 400
    msg = r.body["message"]
    assert "database.hostname: path /etc/passwd is outside" not in msg  # whole placeholder named
    assert "${file:/etc/passwd} is not allowed: path /etc/passwd is outside" in msg
    assert "config.providers.file.param.allowed.paths" in msg
    assert "database.user: config provider 'env' may not be used in configs sent over REST" in msg
    assert call(app, "GET", "/connectors", None).body == []
    r = call(app, "PUT", "/connectors/x/config", EXFILTRATE)
    assert r.status == 400 and call(app, "GET", "/connectors", None).body == []
    r = call(app, "PUT", f"/connector-plugins/{PG}/config/validate", EXFILTRATE)
    assert r.status == 400 and "${file:/etc/passwd}" in r.body["message"]


def test_default_allows_the_state_dir_secrets_directory_only(app: App, tmp_path: Path) -> None:
    secrets = tmp_path / "state" / "secrets"
    secrets.mkdir(parents=True)
    (secrets / "pw").write_text("s3cret-value\n")
    (tmp_path / "outside").write_text("nope\n")
    (secrets / "link").symlink_to(tmp_path / "outside")
    ok = memory(**{"database.password": f"${{file:{secrets}/pw}}"})
    assert call(app, "POST", "/connectors", {"name": "ok", "config": ok}).status == 201
    for sneaky in (f"${{file:{secrets}/../outside}}", f"${{file:{secrets}/link}}"):
        bad = memory(**{"database.password": sneaky})
        r = call(app, "POST", "/connectors", {"name": "bad", "config": bad})
        assert r.status == 400, sneaky
        assert f"path {tmp_path / 'outside'}" not in r.body["message"]  # the path as given
        assert "is outside config.providers.file.param.allowed.paths" in r.body["message"]
    r = call(app, "PATCH", "/connectors/ok/config", {"api.key": "${env:HOME}"})
    assert r.status == 400 and "'env' may not be used" in r.body["message"]
    assert call(app, "GET", "/connectors", None).body == ["ok"]


def test_declared_providers_set_what_rest_may_use(tmp_path: Path) -> None:
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    (allowed / "k").write_text("v1234\n")
    app, herder = make_app(
        tmp_path,
        **{
            "config.providers": "file,env,secrets",
            "config.providers.file.class": "org.apache.kafka.common.config.provider."
            "FileConfigProvider",
            "config.providers.file.param.allowed.paths": str(allowed),
            "config.providers.env.class": "EnvVarConfigProvider",
            "config.providers.env.param.allowlist.pattern": "TM_[A-Z]+",
            "config.providers.secrets.class": "org.apache.kafka.common.config.provider."
            "DirectoryConfigProvider",
            "config.providers.secrets.param.allowed.paths": str(allowed),
        },
    )
    try:
        with installed(herder.settings.trusted_providers()):
            good = memory(
                **{
                    "a": f"${{file:{allowed}/k}}",
                    "b": "${env:TM_PW}",
                    "c": f"${{secrets:{allowed}:k}}",
                }
            )
            assert call(app, "POST", "/connectors", {"name": "g", "config": good}).status == 201
            for key, value, reason in (
                ("b", "${env:HOME}", "does not match config.providers.env.param.allowlist.pattern"),
                ("c", f"${{secrets:{allowed}:../x}}", "is outside config.providers.secrets"),
                ("d", "${dir:/etc:passwd}", "'dir' may not be used"),
            ):
                r = call(
                    app, "POST", "/connectors", {"name": "b", "config": memory(**{key: value})}
                )
                assert r.status == 400 and reason in r.body["message"], r.body
    finally:
        herder.shutdown(5)


def test_a_yaml_connectors_own_placeholders_can_be_written_back(tmp_path: Path) -> None:
    yaml = ConnectorEntry(name="y", config=memory(**{"database.password": "${env:TM_PW}"}))
    app, herder = make_app(tmp_path, (yaml,))
    try:
        current = call(app, "GET", "/connectors/y/config", None).body
        assert current["database.password"] == "${env:TM_PW}"
        r = call(app, "PUT", "/connectors/y/config", {**current, "max.batch.size": "7"})
        assert r.status == 200, r.body
        r = call(app, "PUT", "/connectors/y/config", {**current, "other": "${env:TM_PW}"})
        assert r.status == 400  # the same placeholder under another key is new
        # ... and so is an unchanged one once the connector would connect elsewhere: its
        # value would be sent to the new host
        moved = {**current, "database.hostname": "evil.example"}
        r = call(app, "PUT", "/connectors/y/config", moved)
        assert r.status == 400 and "database.password: config provider 'env'" in r.body["message"]
        r = call(app, "PATCH", "/connectors/y/config", {"database.hostname": "evil.example"})
        assert r.status == 400 and "database.password: config provider 'env'" in r.body["message"]
        assert "database.hostname" not in herder.connector_config("y")  # nothing changed
    finally:
        herder.shutdown(5)


def test_a_kept_secret_does_not_follow_a_new_endpoint(app: App) -> None:
    """A masked secret written back keeps the stored one, but not when the hostname (or any
    endpoint key) changes in the same request: the secret would go to the new host."""
    cfg = memory(**{"database.password": "Lit3ral-Pw", "database.hostname": "db.internal"})
    assert call(app, "POST", "/connectors", {"name": "s", "config": cfg}).status == 201
    current = call(app, "GET", "/connectors/s/config", None).body
    assert current["database.password"] == "********"
    r = call(app, "PUT", "/connectors/s/config", {**current, "max.batch.size": "7"})
    assert r.status == 200 and app.herder._get("s").config["database.password"] == "Lit3ral-Pw"
    r = call(app, "PUT", "/connectors/s/config", {**current, "database.hostname": "evil.example"})
    assert r.status == 400 and "database.password: send the secret again" in r.body["message"]
    r = call(app, "PATCH", "/connectors/s/config", {"database.hostname": "evil.example"})
    assert r.status == 400 and "send the secret again" in r.body["message"]
    moved = {**current, "database.hostname": "db2.internal", "database.password": "N3w-Pw"}
    assert call(app, "PUT", "/connectors/s/config", moved).status == 200


def test_provider_declarations_are_checked_with_their_paths() -> None:
    with pytest.raises(WorkerConfigError) as err:
        parse_config(
            "worker:\n"
            "  config.providers: file,env,x\n"
            "  config.providers.file.class: com.example.Vault\n"
            "  config.providers.env.class: EnvVarConfigProvider\n"
            "  config.providers.env.param.allowlist.pattern: '(['\n"
            "  config.providers.y.class: FileConfigProvider\n"
        )
    found = dict(err.value.problems)
    assert (
        "unknown config provider class 'com.example.Vault'"
        in (found["worker.config.providers.file.class"])
    )
    assert (
        "not a valid regular expression"
        in (found["worker.config.providers.env.param.allowlist.pattern"])
    )
    assert "is required" in found["worker.config.providers.x.class"]
    assert "declare the provider in config.providers" in found["worker.config.providers.y.class"]


def test_declared_names_resolve_in_the_yaml_and_file_env_dir_stay_unlimited(
    tmp_path: Path,
) -> None:
    d = tmp_path / "d"
    d.mkdir()
    (d / "pw").write_text("hunter22\n")
    cfg = parse_config(
        f"""
worker:
  state.dir: {tmp_path}
  config.providers: vault
  config.providers.vault.class: DirectoryConfigProvider
  config.providers.vault.param.allowed.paths: {d}
connectors:
  - name: a
    config: {{connector.class: memory, memory.database: "${{vault:{d}:pw}}", topic.prefix: p,
              x: "${{file:{d}/pw}}", y: "${{env:HOME}}"}}
"""
    )
    assert cfg.worker.rest_providers().keys() == {"vault"}
    assert cfg.worker.trusted_providers().keys() == {"vault", "file", "env", "dir"}
    resolver = Resolver({}, cfg.worker.trusted_providers())
    assert resolver.resolve(f"${{vault:{d}:pw}}") == "hunter22"
    assert resolver.resolve(f"${{dir:{d}:pw}}") == "hunter22"
    with pytest.raises(ProviderError, match=r"is outside config\.providers\.vault"):
        resolver.resolve(f"${{vault:{tmp_path}:x}}")


def test_check_placeholders_reads_nothing() -> None:
    providers, problems = declared_providers(
        {"config.providers": "file", "config.providers.file.class": "FileConfigProvider"}, "w"
    )
    assert problems == []
    # no allowed.paths: Kafka Connect's default, any path (the daemon warns about it)
    assert check_placeholders({"k": "${file:/nonexistent/x:y}"}, providers) == []


def test_secret_values_are_scrubbed_in_every_form_they_are_printed_in() -> None:
    s = SecretValues()
    s.add("line-one\nSecretHost.example\n")
    s.add("tiny")
    s.add("ab")  # too short to scrub
    s.add("true")  # would mangle every message
    assert s.redact("host 'secrethost.example' unknown") == "host '********' unknown"
    assert s.redact('"line-one\\nSecretHost.example"') == '"********"'
    assert s.redact("'line-one\\nSecretHost.example\\n'") == "'********'"
    assert s.redact("user tiny, tinyurl, ab, true") == "user ********, tinyurl, ab, true"


def test_resolved_values_leave_no_trace_in_rest_answers(tmp_path: Path) -> None:
    os.environ["TM_UNIT_SECRET"] = "Zq-unit-secret-value"
    Resolver().resolve("${env:TM_UNIT_SECRET}")
    app, herder = make_app(tmp_path)
    try:
        r = call(app, "POST", "/connectors", {"name": "Zq-unit-secret-value", "config": memory()})
        # the caller's own text is echoed as sent: masking it would confirm a guess
        assert r.status == 201 and r.body["name"] == "Zq-unit-secret-value"
        assert call(app, "GET", "/connectors", None).body == ["********"]
        r = call(app, "PUT", f"/connector-plugins/{PG}/config/validate", {
            **EXFILTRATE, "database.hostname": "h", "database.user": "u",
            "errors.max.retries": "hunter2 Zq-unit-secret-value Passw0rd",
        })  # fmt: skip
        assert "hunter2 Zq-unit-secret-value Passw0rd" in orjson.dumps(r.body).decode()
    finally:
        herder.shutdown(5)
        del os.environ["TM_UNIT_SECRET"]


#: read the worker's environment through str.format from a schema object's method
ENV_READ = (
    '"{0.field.__globals__[dataclass].__globals__[sys].modules[os].environ[HOME]}"'
    ".format(valueSchema)"
)
PYTHON_FILTER = {
    "transforms": "f",
    "transforms.f.type": "io.debezium.transforms.Filter",
    "transforms.f.language": "python",
    "transforms.f.condition": ENV_READ,
}


def test_python_code_in_a_rest_config_is_refused_by_default(tmp_path: Path) -> None:
    """A Filter condition is Python the worker evaluates, and a module:Class type is code it
    imports: neither may arrive over REST unless the worker's YAML allows it."""
    own = memory(**{**PYTHON_FILTER, "transforms.f.condition": "True"})
    app, herder = make_app(tmp_path, (ConnectorEntry(name="y", config=own),))
    try:
        r = call(app, "POST", "/connectors", {"name": "f", "config": memory(**PYTHON_FILTER)})
        assert r.status == 400
        assert (
            "transforms.f.condition: a Python condition cannot be set over REST"
            in (r.body["message"])
        )
        assert "rest.allow.python.transforms" in r.body["message"]
        imported = memory(transforms="t", **{"transforms.t.type": "os.path:join",
                                             "predicates": "p",
                                             "predicates.p.type": "json:JSONDecoder"})  # fmt: skip
        r = call(app, "POST", "/connectors", {"name": "t", "config": imported})
        assert r.status == 400
        assert (
            "transforms.t.type: 'os.path:join' is not a built-in transformation"
            in (r.body["message"])
        )
        assert (
            "predicates.p.type: 'json:JSONDecoder' is not a built-in predicate"
            in (r.body["message"])
        )
        transfer = memory(**{"commit.log.transfer.class": "shutil:rmtree"})
        r = call(app, "POST", "/connectors", {"name": "c", "config": transfer})
        assert r.status == 400
        assert (
            "commit.log.transfer.class: 'shutil:rmtree' is a Python class path"
            in (r.body["message"])
        )
        r = call(app, "PUT", f"/connector-plugins/{PG}/config/validate", PYTHON_FILTER)
        assert r.status == 400
        assert call(app, "GET", "/connectors", None).body == ["y"]
        built_in = memory(transforms="u,d", **{
            "transforms.u.type": "io.debezium.transforms.ExtractNewRecordState",
            "transforms.d.type": "org.apache.kafka.connect.transforms.InsertField$Value",
            "transforms.d.static.field": "f", "transforms.d.static.value": "v",
        })  # fmt: skip
        assert call(app, "POST", "/connectors", {"name": "b", "config": built_in}).status == 201
        # a YAML connector's own condition, read back and sent again, is not new
        current = call(app, "GET", "/connectors/y/config", None).body
        r = call(app, "PUT", "/connectors/y/config", {**current, "max.batch.size": "7"})
        assert r.status == 200, r.body
        changed = {**current, "transforms.f.condition": "value is not None"}
        assert call(app, "PUT", "/connectors/y/config", changed).status == 400
    finally:
        herder.shutdown(5)


def test_the_worker_config_can_allow_python_code_over_rest(tmp_path: Path) -> None:
    app, herder = make_app(tmp_path, **{"rest.allow.python.transforms": True})
    try:
        benign = {**PYTHON_FILTER, "transforms.f.condition": "value is not None"}
        r = call(app, "POST", "/connectors", {"name": "f", "config": memory(**benign)})
        assert r.status == 201, r.body
        # allowed over REST, the condition still meets the expression check
        r = call(app, "POST", "/connectors", {"name": "g", "config": memory(**PYTHON_FILTER)})
        assert r.status == 400 and "the attribute 'format' is not allowed" in r.body["message"]
    finally:
        herder.shutdown(5)


def test_values_sent_as_json_lists_are_checked_as_the_string_they_become(app: App) -> None:
    """Connect configs are string maps; a one-element JSON list becomes its element's text,
    which the resolver then reads. Checked only as a list, ["${env:X}"] went through."""
    sneaky = memory(**{"topic.prefix": ["${env:HOME}"], "x.y": ["a", "${file:/etc/passwd}"]})
    for method, path, body in (
        ("POST", "/connectors", {"name": "l", "config": sneaky}),
        ("PUT", "/connectors/l/config", sneaky),
        ("PUT", f"/connector-plugins/{PG}/config/validate", sneaky),
    ):
        r = call(app, method, path, body)
        assert r.status == 400, (method, path, r.body)
        assert "topic.prefix: config provider 'env' may not be used" in r.body["message"]
        assert "x.y: ${file:/etc/passwd} is not allowed" in r.body["message"]
    assert call(app, "GET", "/connectors", None).body == []


@pytest.mark.parametrize(
    "config",
    [
        # an alias may contain dots: `transforms: a.b` reads transforms.a.b.*
        {"transforms": "a.b", "transforms.a.b.type": "io.debezium.transforms.Filter",
         "transforms.a.b.language": "python", "transforms.a.b.condition": "True"},
        {"transforms": "t", "transforms.t.type": "org.apache.kafka.connect.transforms.Filter",
         "transforms.t.predicate": "p.q", "predicates": "p.q",
         "predicates.p.q.type": "this:Nothing"},
    ],
)  # fmt: skip
def test_code_under_a_dotted_alias_is_refused_too(app: App, config: dict[str, str]) -> None:
    for method, path, body in (
        ("POST", "/connectors", {"name": "d", "config": memory(**config)}),
        ("PUT", f"/connector-plugins/{PG}/config/validate", config),
    ):
        r = call(app, method, path, body)
        assert r.status == 400, r.body
        assert "cannot be set over REST" in r.body["message"]
    assert call(app, "GET", "/connectors", None).body == []


def test_a_password_inside_a_url_is_masked_wherever_the_config_is_shown(app: App) -> None:
    """mongodb.connection.string (or a schema registry URL) is not a secret key as a whole,
    but the password in its userinfo is: GET, tasks, expand=info and validate hide it and
    keep the hosts readable."""
    uri = "mongodb://cdc:Sup3r-S3cret-Pw@mongo.internal:27017/?replicaSet=rs0"
    cfg = {
        "connector.class": "io.debezium.connector.mongodb.MongoDbConnector",
        "mongodb.connection.string": uri,
        "topic.prefix": "m",
        "value.converter.schema.registry.url": "http://sr:Pw-Reg1stry@127.0.0.1:9",
    }
    assert call(app, "POST", "/connectors", {"name": "mongo", "config": cfg}).status == 201
    for path, query in (
        ("/connectors/mongo/config", {}),
        ("/connectors/mongo/tasks", {}),
        ("/connectors/mongo/tasks-config", {}),
        ("/connectors", {"expand": ["info"]}),
    ):
        body = orjson.dumps(app.handle(Request("GET", path, query, b"")).body).decode()
        assert "Sup3r-S3cret-Pw" not in body and "Pw-Reg1stry" not in body, path
        assert "mongodb://cdc:********@mongo.internal:27017" in body, path
    r = call(app, "PUT", "/connector-plugins/MongoDbConnector/config/validate", cfg)
    shown = {e["value"]["name"]: e["value"]["value"] for e in r.body["configs"]}
    assert shown["mongodb.connection.string"] == uri.replace("Sup3r-S3cret-Pw", "********")
    # registered as a secret: a driver's message quoting it is scrubbed from traces and logs
    redact = app.herder.secrets.redact
    assert redact("auth failed for cdc:Sup3r-S3cret-Pw") == "auth failed for cdc:********"
    assert "Pw-Reg1stry" not in redact("no registry at http://sr:Pw-Reg1stry@127.0.0.1:9")


def test_secrets_in_url_options_are_masked_and_count_as_literal_secrets() -> None:
    """A key file's password and AWS session tokens ride in MongoDB's connection string
    options, not its userinfo; they were shown by GET and stored unsealed."""
    from cdc.config import mask_url_passwords, url_passwords

    uri = (
        "mongodb://h:27017/?tls=true&tlsCertificateKeyFilePassword=K3y-Pw;"
        "authMechanism=MONGODB-AWS&authMechanismProperties=AWS_SESSION_TOKEN:T0ken&replicaSet=rs0"
    )
    shown = mask_url_passwords(uri)
    assert "K3y-Pw" not in shown and "T0ken" not in shown
    assert "replicaSet=rs0" in shown and "tls=true" in shown
    assert {"K3y-Pw", "AWS_SESSION_TOKEN:T0ken"} <= url_passwords(uri)
    assert mask_url_passwords("a=password=x") == "a=password=x"  # not a URL


def test_a_connector_naming_another_cluster_gets_none_of_the_workers_credentials() -> None:
    """producer.override.bootstrap.servers pointed the producer, with the worker's SASL
    password, at any host a REST caller named."""
    from cdc.offsets.memory import MemoryOffsetStore as Store
    from worker.worker import Worker

    s = WorkerSettings.model_validate(
        {
            "bootstrap.servers": "kafka:9093",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
            'required username="tidemark-worker" password="W0rker-Kafka-Pw";',
        }
    )
    w = Worker(s, Store(), worker_id="w")
    own = w.engine_settings("c", {"producer.override.linger.ms": "9"}, 0).producer
    assert "W0rker-Kafka-Pw" in repr(own) and own["linger.ms"] == "9"
    other = w.engine_settings(
        "c", {"producer.override.bootstrap.servers": "attacker:9092"}, 0
    ).producer
    assert other["bootstrap.servers"] == "attacker:9092"
    assert not [k for k in other if k.startswith("sasl.") and k != "sasl.mechanism"], other
    assert "W0rker-Kafka-Pw" not in repr(other)


def test_native_code_and_weaker_transport_settings_are_refused_over_rest(app: App) -> None:
    for key, value in (
        ("producer.override.plugin.library.paths", "/tmp/evil.so"),
        ("producer.override.sasl.kerberos.kinit.cmd", "touch /tmp/pwned"),
        ("producer.override.security.protocol", "SASL_PLAINTEXT"),
        # the schema history's and the signal consumer's clients use the worker's cluster and
        # credentials too unless they name their own
        ("schema.history.internal.producer.security.protocol", "SASL_PLAINTEXT"),
        ("database.history.consumer.enable.ssl.certificate.verification", "false"),
        ("signal.consumer.sasl.oauthbearer.token.endpoint.url", "http://evil/"),
        ("schema.history.internal.consumer.plugin.library.paths", "/tmp/evil.so"),
        ("producer.override.enable.ssl.certificate.verification", "false"),
        ("producer.override.ssl.providers", "/tmp/evil.so"),
        # librdkafka's alias of bootstrap.servers: the worker's SASL password went along
        ("producer.override.metadata.broker.list", "attacker:9093"),
        ("schema.history.internal.producer.metadata.broker.list", "attacker:9093"),
    ):
        r = call(app, "POST", "/connectors", {"name": "p", "config": memory(**{key: value})})
        assert r.status == 400 and f"{key}: " in r.body["message"], (key, r.body)
    # a connector writing to a cluster of its own chooses its own transport
    other = memory(
        **{
            "producer.override.bootstrap.servers": "other:9092",
            "producer.override.security.protocol": "SSL",
        }
    )
    assert call(app, "POST", "/connectors", {"name": "o", "config": other}).status == 201


def test_a_connectors_records_may_not_go_to_the_workers_internal_topics() -> None:
    """A RegexRouter to the status topic could forge a task's state, and with it the worker
    a signal is forwarded to (the caller's Authorization header included)."""
    from cdc.offsets.memory import MemoryOffsetStore as Store
    from cdc.sinks.kafka import KafkaSink, SinkError
    from worker.worker import Worker

    s = WorkerSettings.model_validate(
        {"bootstrap.servers": "kafka:9093", "mode": "distributed", "offset.storage": "kafka"}
    )
    w = Worker(s, Store(), worker_id="w")
    reserved = w.engine_settings("c", {}, 0).reserved_topics
    assert reserved == {"tidemark-offsets", "tidemark-configs", "tidemark-status",
                        "tidemark-assignments"}  # fmt: skip
    other = {"producer.override.bootstrap.servers": "elsewhere:9092"}
    assert w.engine_settings("c", other, 0).reserved_topics == frozenset()
    sink = KafkaSink(
        {"bootstrap.servers": "127.0.0.1:1", "log_level": 0},
        create_topics=False,
        reserved_topics=reserved,
    )
    try:
        with pytest.raises(SinkError, match="tidemark-status, the worker's own internal topic"):
            sink.ensure_topics(["srv.inventory.customers", "tidemark-status"])
    finally:
        sink.release()


def test_a_schema_history_on_the_workers_cluster_may_not_use_its_own_topics() -> None:
    from cdc.errors import ConfigError
    from cdc.offsets.memory import MemoryOffsetStore as Store
    from worker.registry import Registry
    from worker.worker import Worker

    s = WorkerSettings.model_validate(
        {"bootstrap.servers": "kafka:9093", "mode": "distributed", "offset.storage": "kafka"}
    )
    w = Worker(s, Store(), worker_id="w")
    plugin = Registry().resolve("io.debezium.connector.mysql.MySqlConnector")
    config = {"name": "m", "schema.history.internal.kafka.topic": "tidemark-configs"}
    with pytest.raises(ConfigError, match="worker's own internal topic"):
        w.with_defaults(plugin, config)
    config["schema.history.internal.kafka.topic"] = "m-history"
    assert w.with_defaults(plugin, config)["schema.history.internal.kafka.bootstrap.servers"]
