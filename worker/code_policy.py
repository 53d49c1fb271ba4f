"""What a connector config sent over REST may not carry: Python code, native code, and
weaker transport for the worker's own Kafka credentials.

Some settings run Python in the worker: Debezium's ``Filter`` ``condition`` (an expression
tidemark evaluates per record), and a ``module:Class`` path (imported, so the module's code
runs) as a ``transforms.<alias>.type``, a ``predicates.<alias>.type`` or the Cassandra
connector's ``commit.log.transfer.class``. The expression check of
:mod:`cdc.transforms.filter` stops accidents, not a hostile author: ``str.format`` alone
reaches any module's globals from a schema object, so a condition could read the worker's
environment and return it in a failure trace. The YAML file is trusted (docs/security.md),
REST is not: over REST these settings are refused unless the worker config says
``rest.allow.python.transforms: true``.

librdkafka settings under ``producer.override.`` load native libraries or run commands
(``plugin.library.paths``, ``sasl.kerberos.kinit.cmd``, ``ssl.engine.location``), and others
decide how the worker's SASL/TLS credentials travel (``security.protocol``, certificate
checks, the OAuth token endpoint): the same rule refuses them over REST, the latter only while
the connector writes to the worker's own cluster.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from cdc.transforms.base import is_built_in

# An alias may itself hold dots (``transforms: a.b`` reads ``transforms.a.b.type``), so any
# key under the namespace that ends in the setting's name counts.
_TYPE = re.compile(r"(transforms|predicates)\..+\.type")
_CONDITION = re.compile(r"transforms\..+\.condition")
#: connector settings that take a ``module:Class`` path besides their built-in values
_CLASS_KEYS = frozenset({"commit.log.transfer.class"})
_OVERRIDE = "producer.override."
#: Kafka clients a connector config tunes by prefix, each with the key naming its cluster:
#: where that key is unset the client talks to the worker's cluster with its credentials
_CLIENTS = {
    _OVERRIDE: _OVERRIDE + "bootstrap.servers",
    "schema.history.internal.producer.": "schema.history.internal.kafka.bootstrap.servers",
    "schema.history.internal.consumer.": "schema.history.internal.kafka.bootstrap.servers",
    "database.history.producer.": "database.history.kafka.bootstrap.servers",
    "database.history.consumer.": "database.history.kafka.bootstrap.servers",
    "signal.consumer.": "signal.kafka.bootstrap.servers",
}
#: librdkafka settings that load a native library or run a command (``ssl.providers`` is
#: handed to OpenSSL, which loads a provider given as a path)
_NATIVE_CODE = (
    "plugin.library.paths",
    "sasl.kerberos.kinit.cmd",
    "ssl.engine.location",
    "ssl.providers",
)
#: settings that would weaken how the worker's own credentials travel to its own cluster
#: (a connector naming another cluster gets none of them, see Worker.engine_settings)
_TRANSPORT = (
    "security.protocol",
    "enable.ssl.certificate.verification",
    "ssl.endpoint.identification.algorithm",
    "sasl.oauthbearer.token.endpoint.url",
)


def _client_setting(key: str) -> tuple[str, str] | None:
    """(client prefix, setting) for a Kafka client key of a connector config."""
    for prefix in _CLIENTS:
        if key.startswith(prefix):
            return prefix, key[len(prefix) :]
    return None


ADVICE = "or set rest.allow.python.transforms: true in the worker config if REST callers may"


def python_code_problems(config: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Each key of ``config`` that would make the worker run Python it was sent."""
    problems = []
    for key, value in config.items():
        client = _client_setting(key)
        setting = client[1] if client else ""
        own_cluster = client is not None and _CLIENTS[client[0]] not in config
        if setting in _NATIVE_CODE:
            problems.append(
                (key, f"loads native code or runs a command in the worker, which cannot be "
                      f"set over REST; set it in the worker's YAML file, {ADVICE} run code")
            )  # fmt: skip
        elif setting in _TRANSPORT and own_cluster:
            assert client is not None
            problems.append(
                (key, f"would change how the worker's own Kafka credentials are sent, which "
                      f"cannot be set over REST; set it in the worker config (a connector that "
                      f"names its own {_CLIENTS[client[0]]} may set it)")
            )  # fmt: skip
        elif _CONDITION.fullmatch(key):
            problems.append(
                (key, f"a Python condition cannot be set over REST (it runs in the worker); "
                      f"set it in the worker's YAML file, {ADVICE} run code there")
            )  # fmt: skip
        elif key in _CLASS_KEYS and ":" in str(value or ""):
            problems.append(
                (key, f"{str(value).strip()!r} is a Python class path, which cannot be set "
                      f"over REST (it would import code); use a built-in value, {ADVICE} "
                      f"load code")
            )  # fmt: skip
        elif (m := _TYPE.fullmatch(key)) and value is not None:
            kind = "transformation" if m.group(1) == "transforms" else "predicate"
            # only a ``module:Class`` path is imported; another unknown name is reported as
            # unknown when the config is validated
            if ":" in str(value) and not is_built_in(str(value), kind):
                problems.append(
                    (key, f"{str(value).strip()!r} is not a built-in {kind}; a Python class "
                          f"path cannot be set over REST (it would import code); use a "
                          f"built-in type, {ADVICE} load code")
                )  # fmt: skip
    return problems
