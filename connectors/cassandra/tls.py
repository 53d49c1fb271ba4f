"""TLS to the cluster from the SSL config file Debezium's Cassandra connector reads
(``cassandra.ssl.enabled``, ``cassandra.ssl.config.path``).

The file is Java properties: ``keyStore.location``/``.password``/``.type``,
``trustStore.location``/``.password``/``.type``, ``keyManager.algorithm``,
``trustManager.algorithm`` and ``cipherSuites``. Python's TLS is OpenSSL's, so:

- store types ``PKCS12`` and ``PEM`` are read (PEM: the key store is the private key and its
  certificate chain in one file, the trust store the CA certificates); ``JKS``, Debezium's
  default type, is Java's own format, and is refused with the ``keytool`` command that turns
  it into PKCS12;
- the two ``*.algorithm`` keys name Java key managers and are accepted and ignored;
- ``cipherSuites`` adds Java suite names to the JVM's list; OpenSSL's defaults already hold
  the current suites, so it is accepted and logged as ignored;
- the server's certificate is checked against the host name (the contact point), which the
  Java driver 3 Debezium used did not do by default; ``hostnameVerification=false`` (a
  tidemark key) turns that off for clusters whose certificates do not name their nodes.

No message quotes a value of the file: it holds passwords.
"""

from __future__ import annotations

import logging
import os
import ssl
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from cdc.java_properties import parse_properties

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.types import (
        PrivateKeyTypes as PKCS12PrivateKeyTypes,
    )
    from cryptography.x509 import Certificate

log = logging.getLogger("tidemark.cassandra")

KNOWN = frozenset(
    {
        "keyStore.location",
        "keyStore.password",
        "keyStore.type",
        "trustStore.location",
        "trustStore.password",
        "trustStore.type",
        "keyManager.algorithm",
        "trustManager.algorithm",
        "cipherSuites",
        "hostnameVerification",
    }
)


class TlsConfigError(ValueError):
    """The SSL config file cannot be used; the message names the key and why."""


def read_properties(path: Path) -> dict[str, str]:
    """The file's keys and values; an unknown key is named unless it begins with a known one
    (a line that lost its ``=``, whose value would be in the name)."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise TlsConfigError(f"cannot read the SSL config file {path}: {exc.strerror}") from exc
    out = parse_properties(text)
    unknown = sorted(set(out) - KNOWN)
    if unknown:
        shown = [
            next((f"a line starting with {k} and no '='" for k in KNOWN if u.startswith(k)), u)
            for u in unknown
        ]
        raise TlsConfigError(
            f"{path}: unknown key(s) {', '.join(shown)} (known: {', '.join(sorted(KNOWN))})"
        )
    return out


def _store_type(props: Mapping[str, str], store: str) -> str:
    kind = props.get(f"{store}.type", "JKS").strip().upper()
    if kind == "JKS":
        raise TlsConfigError(
            f"{store}.type=JKS: Java key stores cannot be read outside the JVM; convert it with "
            f"`keytool -importkeystore -srckeystore <{store} file> -destkeystore <file>.p12 "
            f"-deststoretype PKCS12` and set {store}.type=PKCS12 (or use PEM files: "
            f"{store}.type=PEM)"
        )
    if kind not in ("PKCS12", "PEM"):
        raise TlsConfigError(f"{store}.type must be PKCS12, PEM or JKS, not {kind}")
    return kind


def _pkcs12(
    props: Mapping[str, str], store: str
) -> tuple[PKCS12PrivateKeyTypes | None, Certificate | None, list[Certificate]]:
    from cryptography.hazmat.primitives.serialization import pkcs12

    location = Path(props[f"{store}.location"])
    password = props.get(f"{store}.password")
    try:
        key, cert, extra = pkcs12.load_key_and_certificates(
            location.read_bytes(), password.encode() if password else None
        )
    except OSError as exc:
        raise TlsConfigError(f"{store}.location: cannot read {location}: {exc.strerror}") from exc
    except ValueError as exc:
        raise TlsConfigError(
            f"{store}.location: {location} is not a PKCS12 store this {store}.password opens"
        ) from exc
    return key, cert, list(extra)


def ssl_context(path: str | os.PathLike[str]) -> ssl.SSLContext:
    """The client TLS context the SSL config file at ``path`` describes."""
    from cryptography.hazmat.primitives import serialization

    props = read_properties(Path(path))
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    verify = props.get("hostnameVerification", "true").strip().lower()
    if verify not in ("true", "false"):
        raise TlsConfigError(f"hostnameVerification must be true or false, not {verify!r}")
    ctx.check_hostname = verify == "true"
    if props.get("cipherSuites"):
        log.info("cipherSuites in the SSL config file are ignored: OpenSSL's defaults apply")
    if props.get("trustStore.location"):
        kind = _store_type(props, "trustStore")
        location = props["trustStore.location"]
        try:
            if kind == "PEM":
                ctx.load_verify_locations(cafile=location)
            else:
                _, cert, extra = _pkcs12(props, "trustStore")
                certs = [c for c in (cert, *extra) if c is not None]
                if not certs:
                    raise TlsConfigError(f"trustStore.location: {location} holds no certificate")
                pem = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs)
                ctx.load_verify_locations(cadata=pem.decode())
        except (OSError, ssl.SSLError) as exc:
            raise TlsConfigError(
                f"trustStore.location: {location} cannot be loaded as {kind}: {exc}"
            ) from exc
    if props.get("keyStore.location"):
        _load_identity(ctx, props)
    return ctx


def _load_identity(ctx: ssl.SSLContext, props: Mapping[str, str]) -> None:
    """The client's own key and certificate, for clusters that ask for client certificates.
    A PKCS12 store is written out as PEM into a private temporary directory for OpenSSL to
    load (it loads identities from files only), and removed at once."""
    from cryptography.hazmat.primitives import serialization

    kind = _store_type(props, "keyStore")
    location = props["keyStore.location"]
    password = props.get("keyStore.password") or None
    try:
        if kind == "PEM":
            ctx.load_cert_chain(location, password=password)
            return
        key, cert, extra = _pkcs12(props, "keyStore")
        if key is None or cert is None:
            raise TlsConfigError(
                f"keyStore.location: {location} holds no private key with its certificate"
            )
        pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        for c in (cert, *extra):
            pem += c.public_bytes(serialization.Encoding.PEM)
        with tempfile.TemporaryDirectory(prefix="tidemark-tls-") as tmp:
            out = Path(tmp) / "identity.pem"
            fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(pem)
            ctx.load_cert_chain(out)
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(
            f"keyStore.location: {location} cannot be loaded as {kind} with keyStore.password"
            f" ({type(exc).__name__})"
        ) from exc
