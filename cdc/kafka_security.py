"""Kafka client security settings: Kafka Connect's (Java) names accepted, librdkafka's passed on.

Users copy ``security.protocol``, ``ssl.*`` and ``sasl.*`` settings from a Kafka Connect or
Debezium deployment; several of them mean nothing to librdkafka, which rejects unknown keys
and would otherwise fail far from the config that caused it. The Java forms that have a
librdkafka equivalent are translated, once, where every Kafka client of tidemark builds its
configuration (producer, admin, consumer of the sink, offset store and schema history):

- ``sasl.jaas.config`` (``PlainLoginModule``/``ScramLoginModule required username="…"
  password="…";``) becomes ``sasl.username``/``sasl.password``;
- ``ssl.truststore.location`` with ``ssl.truststore.type=PEM`` becomes ``ssl.ca.location``;
- ``ssl.keystore.location`` with ``ssl.keystore.type=PEM`` (key and certificate chain in one
  file) becomes ``ssl.certificate.location`` + ``ssl.key.location``; PKCS12 keystores are read
  by librdkafka itself;
- PEM stores given inline (Kafka 2.7's ``ssl.truststore.certificates``, ``ssl.keystore.key``,
  ``ssl.keystore.certificate.chain``) become ``ssl.ca.pem``, ``ssl.key.pem`` and
  ``ssl.certificate.pem``;
- ``ssl.endpoint.identification.algorithm=`` (empty: Java's "no hostname check") becomes
  ``none``.

JKS stores have no librdkafka equivalent: they are refused with a message saying what to use.
librdkafka's own names (``ssl.ca.location``, ``sasl.username``…) pass through unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from cdc.errors import ConfigError

SECURITY_PREFIXES = ("security.protocol", "ssl.", "sasl.")


def is_credential_key(key: str) -> bool:
    """A client setting that carries credentials (librdkafka or Java names): SASL secrets and
    the client's own TLS key and certificate. Trust settings (CA, verification, protocol) are
    not: a connector writing to another listener of the same cluster still needs them."""
    if key.startswith("sasl."):
        return key not in ("sasl.mechanism", "sasl.mechanisms")
    return key.startswith(("ssl.key", "ssl.keystore", "ssl.certificate"))


_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')
_JAAS_MODULES = ("PlainLoginModule", "ScramLoginModule")
_INLINE_PEM = (
    ("ssl.truststore.certificates", "ssl.ca.pem"),
    ("ssl.keystore.key", "ssl.key.pem"),
    ("ssl.keystore.certificate.chain", "ssl.certificate.pem"),
)


class KafkaSecurityError(ConfigError):
    """A security setting librdkafka cannot honour; ``problems`` names the key."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__([(key, reason)])


def security_settings(conf: Mapping[str, Any]) -> dict[str, Any]:
    """The ``security.protocol``/``ssl.*``/``sasl.*`` entries of a client config."""
    return {k: v for k, v in conf.items() if k.startswith(SECURITY_PREFIXES)}


def librdkafka_config(conf: Mapping[str, Any]) -> dict[str, Any]:
    """``conf`` with Kafka Connect's security names translated for librdkafka; raises
    :class:`KafkaSecurityError` for settings that cannot be honoured."""
    out = dict(conf)
    for java, native in _INLINE_PEM:
        if java in out:
            out.setdefault(native, out.pop(java))
    jaas = out.pop("sasl.jaas.config", None)
    if jaas:
        _apply_jaas(out, str(jaas))
    trust_type = str(out.pop("ssl.truststore.type", "PEM")).upper()
    truststore = out.pop("ssl.truststore.location", None)
    out.pop("ssl.truststore.password", None)  # PEM truststores have no password
    if truststore:
        if trust_type != "PEM":
            raise KafkaSecurityError(
                "ssl.truststore.type",
                f"{trust_type} is not readable by the Kafka client "
                f"(librdkafka); convert the truststore to PEM and set ssl.truststore.type=PEM, "
                f"or set ssl.ca.location to a PEM CA file",
            )
        out.setdefault("ssl.ca.location", truststore)
    key_type = str(out.pop("ssl.keystore.type", "PKCS12" if "ssl.keystore.location" in out else ""))
    if key_type.upper() == "PEM":
        keystore = out.pop("ssl.keystore.location", None)
        out.pop("ssl.keystore.password", None)
        if keystore:
            out.setdefault("ssl.certificate.location", keystore)
            out.setdefault("ssl.key.location", keystore)
    elif key_type.upper() == "JKS":
        raise KafkaSecurityError(
            "ssl.keystore.type",
            "JKS is not readable by the Kafka client (librdkafka); use a "
            "PKCS12 or PEM keystore (ssl.keystore.type=PEM with the key and certificate chain "
            "in one file), or ssl.certificate.location + ssl.key.location",
        )
    if out.get("ssl.endpoint.identification.algorithm") == "":
        out["ssl.endpoint.identification.algorithm"] = "none"
    return out


def _apply_jaas(out: dict[str, Any], jaas: str) -> None:
    if not any(m in jaas for m in _JAAS_MODULES):
        raise KafkaSecurityError(
            "sasl.jaas.config",
            "only PlainLoginModule and ScramLoginModule can be translated "
            "for the Kafka client (librdkafka); set sasl.username and sasl.password (or the "
            "sasl.oauthbearer.* / sasl.kerberos.* settings) instead",
        )
    options = {k: re.sub(r"\\(.)", r"\1", v) for k, v in _JAAS_OPTION.findall(jaas)}
    for key in ("username", "password"):
        if key not in options:
            raise KafkaSecurityError("sasl.jaas.config", f'no {key}="..." option')
        out.setdefault(f"sasl.{key}", options[key])
