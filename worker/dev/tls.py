"""The local stack's private certificate authority and the certificates issued from it.

`tidemark dev` serves Kafka (SASL_SSL and mutual-TLS listeners), PostgreSQL and MariaDB over
TLS so that the code paths users run in production (hostname verification, client
certificates, SCRAM over TLS) are exercised by the demo and the tests, not only plain text.
The CA lives under ``<stack home>/tls``; it is created once and reused, so a client configured
with its ``ca.crt`` keeps working across restarts. Keys are ECDSA P-256: instant to generate
and accepted by Java (Kafka), OpenSSL (PostgreSQL, MariaDB, librdkafka) and Python's ``ssl``.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import ipaddress
import os
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from worker.dev.service import StackError

if TYPE_CHECKING:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric.ec import (
        EllipticCurvePrivateKey,
        EllipticCurvePublicKey,
    )

SERVER_NAMES = ("localhost", "127.0.0.1")
"""What the stack's server certificate is valid for: every address the stack advertises."""

CLIENT_NAME = "tidemark-client"
VALID_DAYS = 3650


@dataclass(frozen=True)
class TlsFiles:
    """PEM files of the stack's CA, its server certificate and a client certificate."""

    dir: Path
    ca_cert: Path
    ca_key: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path

    @classmethod
    def at(cls, directory: Path) -> TlsFiles:
        return cls(
            directory,
            directory / "ca.crt",
            directory / "ca.key",
            directory / "server.crt",
            directory / "server.key",
            directory / "client.crt",
            directory / "client.key",
        )

    def copy_server_pair(self, dest: Path, owner: str | None) -> tuple[Path, Path, Path]:
        """Copies of (cert, key, ca) for a server that insists on owning its key file (0600,
        owned by the server's OS user, as PostgreSQL requires)."""
        dest.mkdir(parents=True, exist_ok=True)
        out = (dest / "server.crt", dest / "server.key", dest / "ca.crt")
        for src, dst in zip((self.server_cert, self.server_key, self.ca_cert), out, strict=True):
            shutil.copyfile(src, dst)
            os.chmod(dst, 0o600 if dst.name.endswith(".key") else 0o644)
            if owner is not None and os.geteuid() == 0:
                shutil.chown(dst, owner, owner)
        if owner is not None and os.geteuid() == 0:
            shutil.chown(dest, owner, owner)
        return out


def _crypto() -> object:
    try:
        import cryptography
    except ImportError as exc:
        raise StackError(
            "the `cryptography` package is needed to create the local stack's certificates. "
            "Install it with: .venv/bin/pip install -e '.[dev]'"
        ) from exc
    return cryptography


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """One process at a time creates the files, so two concurrent `up`s share one CA."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def ensure_tls(directory: Path) -> TlsFiles:
    """Create the CA, the server certificate (localhost, 127.0.0.1) and the client
    certificate under ``directory`` if they are missing; idempotent."""
    files = TlsFiles.at(directory)
    with _locked(directory):
        if not (files.ca_cert.exists() and files.ca_key.exists()):
            _crypto()
            key = new_key()
            write_key(files.ca_key, key)
            write_cert(files.ca_cert, _ca_cert(key))
            for stale in (files.server_cert, files.client_cert):
                stale.unlink(missing_ok=True)
        if not files.server_cert.exists():
            issue(files, files.server_cert, files.server_key, SERVER_NAMES, server=True)
        if not files.client_cert.exists():
            issue(files, files.client_cert, files.client_key, (CLIENT_NAME,), server=False)
    return files


# -- certificate building ---------------------------------------------------------------------
def new_key() -> EllipticCurvePrivateKey:
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def write_key(path: Path, key: EllipticCurvePrivateKey) -> None:
    """PKCS#8, unencrypted: the one private-key PEM form Kafka's PEM keystore reads."""
    from cryptography.hazmat.primitives import serialization

    data = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    path.touch(mode=0o600, exist_ok=True)
    os.chmod(path, 0o600)
    path.write_bytes(data)


def write_cert(path: Path, cert: x509.Certificate) -> None:
    from cryptography.hazmat.primitives import serialization

    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _name(common_name: str) -> x509.Name:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "tidemark dev"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _builder(
    subject: x509.Name, issuer: x509.Name, public_key: EllipticCurvePublicKey
) -> x509.CertificateBuilder:
    from cryptography import x509

    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
    )


def _ca_cert(key: EllipticCurvePrivateKey) -> x509.Certificate:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes

    name = _name("tidemark dev CA")
    return (
        _builder(name, name, key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )


def issue(
    files: TlsFiles, cert_path: Path, key_path: Path, names: Sequence[str], *, server: bool
) -> None:
    """Issue a certificate signed by the stack's CA for ``names`` (DNS names or IP
    addresses; the first is the subject's common name). Tests use it for certificates the
    stack does not make, e.g. one valid only for another host."""
    _crypto()
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.x509.oid import ExtendedKeyUsageOID

    ca_key = serialization.load_pem_private_key(files.ca_key.read_bytes(), password=None)
    ca_cert = x509.load_pem_x509_certificate(files.ca_cert.read_bytes())
    key = new_key()
    sans: list[x509.GeneralName] = []
    for n in names:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(n)))
        except ValueError:
            sans.append(x509.DNSName(n))
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    cert = (
        _builder(_name(names[0]), ca_cert.subject, key.public_key())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_cert.public_key()),  # type: ignore[arg-type]
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
    )
    write_key(key_path, key)
    write_cert(cert_path, cert)
