"""Which files a connector config sent over REST may make the worker read, write or delete.

Several connector settings are filesystem paths the worker acts on with its own rights: the
file schema history is appended to and its torn last line cut off, the file signal channel
reads and empties its file, the Cassandra connector reads its node's ``cassandra.yaml``, deletes
or moves commit log segments and writes its snapshot record, and TLS clients read private keys
and present them to the server a config names. Pointed at the worker's ``connectors.json`` or a
credentials file, any of them damages the worker or carries a secret out (a failure trace, a log
line, a TLS handshake with a host the caller chose). The YAML file is trusted (docs/security.md),
REST is not: a path in a config arriving over REST must resolve (after ``..`` and symlinks)

- under ``<state.dir>/files/``, the REST connectors' own working directory, or under a path the
  worker config lists in ``rest.allowed.paths``;
- for a file a TLS client reads as its own identity (a client key or certificate, a keystore, a
  Kerberos keytab): also under the paths REST configs may read secrets from (the declared
  ``file``/``dir`` providers' ``allowed.paths``, or ``<state.dir>/secrets/`` when none are
  declared), where such files belong.

CA certificates and CRLs (``database.sslrootcert``, ``database.ssl.ca``, ``ssl.ca.location``,
a MongoDB ``tlsCAFile``) are public material a TLS library parses without echoing: they are not
limited. Like :mod:`worker.code_policy`, this reads no file and is applied to the values a
request changes (see ``App.check_providers``): a YAML connector's own path, read back with GET
and sent again, is not new.

Kafka client settings that load native code or run a command are refused by code_policy,
under every client prefix (``producer.override.``, the schema history's and the signal
consumer's); they are not path checks here.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, Protocol

from cdc.config import url_options
from worker.config_providers import Provider, has_placeholder

Problem = tuple[str, str]
Kind = Literal["files", "identity"]

SANDBOX = "files"
"""The REST connectors' directory under ``state.dir``."""

_HISTORY = "the schema history file, which the worker appends to and repairs"
#: connector settings naming a file or directory the worker writes, deletes or reads
FILE_KEYS: dict[str, str] = {
    "schema.history.internal.file.filename": _HISTORY,
    "database.history.file.filename": _HISTORY,
    "signal.file": "the file signal channel's file, which the worker reads and empties",
    "offset.backing.store.dir": "the directory the Cassandra connector writes its snapshot "
    "record to",
    "cassandra.cdc.raw.dir": "the commit log directory the Cassandra connector reads segments "
    "from and deletes (or moves) them",
    "commit.log.relocation.dir": "the directory processed Cassandra commit log segments are "
    "moved to",
    "cassandra.config": "a file the worker reads (the node's cassandra.yaml)",
}
#: database TLS settings naming the client's own key or certificate
IDENTITY_KEYS: dict[str, str] = {
    "database.sslcert": "a client certificate the worker presents to the database",
    "database.sslkey": "a private key the worker authenticates with",
    "database.ssl.cert": "a client certificate the worker presents to the database",
    "database.ssl.key": "a private key the worker authenticates with",
    "cassandra.ssl.config.path": "the Cassandra TLS settings file (key stores and their passwords)",
}
#: where a connector config passes settings to a Kafka client (librdkafka)
KAFKA_CLIENT_PREFIXES = (
    "producer.override.",
    "schema.history.internal.producer.",
    "schema.history.internal.consumer.",
    "database.history.producer.",
    "database.history.consumer.",
    "signal.consumer.",
)
#: librdkafka settings naming CA certificates or CRLs: not limited
KAFKA_TRUST = frozenset(
    {"ssl.ca.location", "ssl.crl.location", "ssl.truststore.location", "https.ca.location"}
)
#: librdkafka settings that load a native library or run a command
KAFKA_CODE = frozenset(
    {"plugin.library.paths", "ssl.engine.location", "ssl.providers", "sasl.kerberos.kinit.cmd"}
)
#: librdkafka settings naming a file it writes
KAFKA_WRITE = frozenset({"offset.store.path"})
#: endings of librdkafka settings naming a file it reads (keys, certificates, keystores,
#: keytabs, OAUTHBEARER assertions and templates)
_KAFKA_READ_ENDINGS = (".location", ".file", ".keytab")
MONGODB_URI = "mongodb.connection.string"
#: MongoDB URI options naming the client's own key and certificate (pymongo, any case)
MONGODB_IDENTITY = frozenset({"tlscertificatekeyfile"})


def sandbox(state_dir: str | os.PathLike[str]) -> Path:
    """``<state.dir>/files``, resolved."""
    return Path(os.path.realpath(Path(state_dir) / SANDBOX))


def _real(path: str | os.PathLike[str]) -> Path | None:
    try:
        return Path(os.path.realpath(path))
    except (ValueError, OSError):  # a NUL byte, a symlink loop on some systems
        return None


def allowed_roots(
    state_dir: str | os.PathLike[str],
    allowed_paths: Iterable[str | os.PathLike[str]] = (),
    providers: Mapping[str, Provider] | None = None,
) -> dict[Kind, tuple[Path, ...]]:
    """The directories (or files) each kind of path may resolve under."""
    files = [sandbox(state_dir)]
    files += [r for r in (_real(p) for p in allowed_paths) if r is not None]
    identity = list(files)
    for provider in (providers or {}).values():
        if provider.kind in ("file", "dir") and provider.allowed_paths:
            identity += provider.allowed_paths
    return {"files": tuple(dict.fromkeys(files)), "identity": tuple(dict.fromkeys(identity))}


def _under(path: str, roots: Iterable[Path]) -> bool:
    real = _real(path)
    return real is not None and any(real == r or real.is_relative_to(r) for r in roots)


def _kafka_key(key: str) -> tuple[str, str] | None:
    for prefix in KAFKA_CLIENT_PREFIXES:
        if key.startswith(prefix):
            return prefix, key[len(prefix) :]
    return None


def _mongodb_paths(uri: str) -> list[tuple[str, str]]:
    """``(option, path)`` for each identity file a MongoDB connection string names."""
    return [(name, value) for name, value in url_options(uri) if name.lower() in MONGODB_IDENTITY]


def _refusal(key: str, what: str, roots: tuple[Path, ...]) -> Problem:
    where = ", ".join(str(r) for r in roots)
    return (
        key,
        f"names {what}; a config sent over REST may only name a path under {where} "
        f"(after resolving '..' and symlinks); put the file there, set the key in the "
        f"worker's YAML file, or list its directory in the worker config's rest.allowed.paths",
    )


class Settings(Protocol):
    """What the policy reads from the worker settings (``worker.config.WorkerSettings``)."""

    @property
    def state_dir(self) -> Path: ...
    @property
    def rest_allowed_paths(self) -> list[Path]: ...
    @property
    def rest_allow_python_transforms(self) -> bool: ...


def path_problems(
    config: Mapping[str, Any], settings: Settings, providers: Mapping[str, Provider] | None = None
) -> list[Problem]:
    """:func:`check_paths` with the worker's settings: ``providers`` are those REST configs may
    use (``App.providers``)."""
    return check_paths(
        config,
        state_dir=settings.state_dir,
        allowed_paths=settings.rest_allowed_paths,
        providers=providers,
    )


def check_paths(
    config: Mapping[str, Any],
    *,
    state_dir: str | os.PathLike[str],
    allowed_paths: Iterable[str | os.PathLike[str]] = (),
    providers: Mapping[str, Provider] | None = None,
) -> list[Problem]:
    """``(key, reason)`` for each path in ``config`` (a REST config's new or changed values)
    that the worker may not act on for a REST caller. Nothing is read or created."""
    roots = allowed_roots(state_dir, allowed_paths, providers)
    problems: list[Problem] = []

    def check(key: str, value: str, what: str, kind: Kind) -> None:
        if has_placeholder(value):
            problems.append(
                (key, f"names {what}; over REST it must be a path, not a placeholder "
                      f"(the path it resolves to could not be checked)")
            )  # fmt: skip
        elif not _under(value, roots[kind]):
            problems.append(_refusal(key, what, roots[kind]))

    for key, raw in config.items():
        value = "" if raw is None else str(raw)
        if not value:
            continue  # unset: the connector's default, which is not the caller's choice
        if key in FILE_KEYS:
            check(key, value, FILE_KEYS[key], "files")
        elif key in IDENTITY_KEYS:
            check(key, value, IDENTITY_KEYS[key], "identity")
        elif key == MONGODB_URI:
            for option, path in _mongodb_paths(value):
                what = f"a client key and certificate in its {option} option"
                if not path or has_placeholder(path) or not _under(path, roots["identity"]):
                    problems.append(_refusal(key, what, roots["identity"]))
        elif (kafka := _kafka_key(key)) is not None:
            _, name = kafka
            if name in KAFKA_CODE:
                continue  # code_policy refuses these under every client prefix
            elif name in KAFKA_TRUST:
                continue
            elif name in KAFKA_WRITE:
                check(key, value, "a file the Kafka client writes", "files")
            elif name.endswith(_KAFKA_READ_ENDINGS):
                check(key, value, "a file the Kafka client reads as a credential", "identity")
    return problems
