"""The Cassandra connector's SSL config file (connectors.cassandra.tls): what is read, what is
refused and how, without a node (the handshakes are in tests/integration/test_cassandra_tls.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509 import load_pem_x509_certificate

from connectors.cassandra.config import CONFIG_DEF
from connectors.cassandra.tls import TlsConfigError, read_properties, ssl_context
from worker.dev.tls import ensure_tls


def props(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ssl.properties"
    path.write_text(text)
    return path


def test_java_properties_forms_are_read(tmp_path: Path) -> None:
    path = props(
        tmp_path,
        "# comment\n! comment too\nkeyStore.location = /a/b\ntrustStore.type: PEM\n"
        "cipherSuites=TLS_A,\\\n  TLS_B\n\n",
    )
    assert read_properties(path) == {
        "keyStore.location": "/a/b",
        "trustStore.type": "PEM",
        "cipherSuites": "TLS_A,TLS_B",
    }


def test_refusals_name_the_key_and_never_quote_a_value(tmp_path: Path) -> None:
    with pytest.raises(TlsConfigError, match="keytool -importkeystore") as info:
        ssl_context(props(tmp_path, "trustStore.location=/x.jks\ntrustStore.password=hunter22\n"))
    assert "hunter22" not in str(info.value)
    with pytest.raises(TlsConfigError, match=r"unknown key\(s\) keystore\.location"):
        read_properties(props(tmp_path, "keystore.location=/x\n"))
    with pytest.raises(
        TlsConfigError, match=r"a line starting with keyStore\.password and no"
    ) as info:
        read_properties(props(tmp_path, "keyStore.type=PEM\nkeyStore.passwordhunter22\n"))
    assert "hunter22" not in str(info.value)
    with pytest.raises(TlsConfigError, match="cannot read the SSL config file"):
        read_properties(tmp_path / "missing.properties")
    with pytest.raises(TlsConfigError, match="must be PKCS12, PEM or JKS"):
        ssl_context(props(tmp_path, "trustStore.location=/x\ntrustStore.type=BKS\n"))


def test_pkcs12_stores_open_with_their_password_only(tmp_path: Path) -> None:
    tls = ensure_tls(tmp_path / "ca")
    key = serialization.load_pem_private_key(tls.client_key.read_bytes(), None)
    cert = load_pem_x509_certificate(tls.client_cert.read_bytes())
    store = tmp_path / "client.p12"
    store.write_bytes(
        pkcs12.serialize_key_and_certificates(
            b"c",
            key,
            cert,
            None,
            serialization.BestAvailableEncryption(b"right-pw"),  # type: ignore[arg-type]
        )
    )
    base = f"trustStore.location={tls.ca_cert}\ntrustStore.type=PEM\nkeyStore.location={store}\n"
    ctx = ssl_context(props(tmp_path, base + "keyStore.type=PKCS12\nkeyStore.password=right-pw\n"))
    assert ctx.check_hostname and ctx.verify_mode.name == "CERT_REQUIRED"
    with pytest.raises(
        TlsConfigError, match=r"not a PKCS12 store this keyStore\.password opens"
    ) as info:
        ssl_context(props(tmp_path, base + "keyStore.type=PKCS12\nkeyStore.password=wrong-pw\n"))
    assert "wrong-pw" not in str(info.value)
    off = ssl_context(
        props(
            tmp_path,
            f"trustStore.location={tls.ca_cert}\ntrustStore.type=PEM\nhostnameVerification=false\n",
        )
    )
    assert not off.check_hostname


def test_enabled_without_a_file_is_a_config_error() -> None:
    _, problems = CONFIG_DEF.validate(
        {
            "name": "c",
            "topic.prefix": "c",
            "cassandra.cdc.raw.dir": "/tmp",
            "offset.backing.store.dir": "/tmp/x",
            "cassandra.ssl.enabled": "true",
        }
    )
    assert any(k == "cassandra.ssl.config.path" for k, _ in problems), problems
