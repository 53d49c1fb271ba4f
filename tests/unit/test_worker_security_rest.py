"""REST over HTTPS with basic auth, roles, client certificates, the metrics listener and the
refusal to serve an unauthenticated API beyond loopback (issue 23 part 2). A real daemon on
loopback sockets with fake engines; certificates are generated here."""

from __future__ import annotations

import base64
import datetime
import ipaddress
import socket
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.unit.test_worker_herder import Engines
from worker.cli import main
from worker.config import parse_config
from worker.daemon import Daemon
from worker.rest.client import ApiError, Client, tls_context


def _cert(
    name: str, key: Any, issuer: tuple[x509.Name, Any] | None, ca: bool = False
) -> x509.Certificate:
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer[0] if issuer else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
    return builder.sign(issuer[1] if issuer else key, hashes.SHA256())


def _pem(path: Path, key: Any, cert: x509.Certificate) -> Path:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        + cert.public_bytes(serialization.Encoding.PEM)
    )
    return path


@pytest.fixture
def pki(tmp_path: Path) -> dict[str, Path]:
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert("test-ca", ca_key, None, ca=True)
    issuer = (ca.subject, ca_key)
    out = {"ca": tmp_path / "ca.pem"}
    out["ca"].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    for name in ("server", "client"):
        key = ec.generate_private_key(ec.SECP256R1())
        out[name] = _pem(tmp_path / f"{name}.pem", key, _cert(name, key, issuer))
    return out


def daemon(tmp_path: Path, **worker: str) -> Daemon:
    lines = "\n".join(f"  {k}: {v}" for k, v in worker.items())
    cfg = parse_config(
        f"""
worker:
  state.dir: {tmp_path / "state"}
  offset.storage: memory
{lines}
connectors:
  - name: m
    config: {{connector.class: memory, memory.database: db, topic.prefix: p}}
"""
    )
    d = Daemon(cfg, engine_factory=Engines())
    d.start()
    return d


def test_https_basic_auth_and_roles(tmp_path: Path, pki: dict[str, Path]) -> None:
    creds = tmp_path / "users.properties"
    creds.write_text("admin=Adm1n-pw\nwatcher: W4tch-pw\n")
    d = daemon(
        tmp_path,
        listeners="https://127.0.0.1:0",
        **{
            "listeners.https.ssl.keystore.location": str(pki["server"]),
            "rest.basic.auth.credentials.file": str(creds),
            "rest.basic.auth.readonly.users": "watcher",
            "metrics.listener": "http://127.0.0.1:0",
        },
    )
    try:
        assert d.url.startswith("https://127.0.0.1:")
        tls = tls_context(str(pki["ca"]))
        anon = Client(d.url, tls=tls)
        status, doc = anon.request("GET", "/connectors")
        assert status == 401 and doc["error_code"] == 401
        assert Client(d.url, tls=tls, credentials=("admin", "wrong")).request("GET", "/")[0] == 401
        admin = Client(d.url, tls=tls, credentials=("admin", "Adm1n-pw"))
        watcher = Client(d.url, tls=tls, credentials=("watcher", "W4tch-pw"))
        assert watcher.get("/connectors") == ["m"]
        status, doc = watcher.request("PUT", "/connectors/m/pause")
        assert status == 403 and "read-only" in doc["message"]
        assert admin.request("PUT", "/connectors/m/pause")[0] == 202
        # a client that does not trust the worker's CA does not talk to it
        with pytest.raises(ApiError, match="CERTIFICATE_VERIFY_FAILED"):
            Client(d.url, credentials=("admin", "Adm1n-pw")).get("/")
        # Prometheus: /metrics alone on its own port, without authentication
        assert d.metrics_server is not None
        metrics = Client(d.metrics_server.url)
        status, body = metrics.request("GET", "/metrics")
        assert status == 200 and "tidemark_worker_tasks" in body
        assert metrics.request("GET", "/connectors")[0] == 404
    finally:
        d.stop()


def test_cli_takes_credentials_from_a_file_or_env_and_the_ca(
    tmp_path: Path,
    pki: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    creds = tmp_path / "users.properties"
    creds.write_text("ops=0ps-pw\n")
    d = daemon(
        tmp_path,
        listeners="https://127.0.0.1:0",
        **{
            "listeners.https.ssl.keystore.location": str(pki["server"]),
            "rest.basic.auth.credentials.file": str(creds),
        },
    )
    try:
        assert main(["status", "--url", d.url, "--ca-file", str(pki["ca"])]) == 1
        assert "HTTP 401" in capsys.readouterr().err
        mine = tmp_path / "me"
        mine.write_text("ops:0ps-pw\n")
        args = ["status", "--url", d.url, "--ca-file", str(pki["ca"])]
        assert main([*args, "--credentials-file", str(mine)]) == 0
        assert "m  " in capsys.readouterr().out
        monkeypatch.setenv("TIDEMARK_REST_USER", "ops")
        monkeypatch.setenv("TIDEMARK_REST_PASSWORD", "0ps-pw")
        monkeypatch.setenv("TIDEMARK_REST_CA", str(pki["ca"]))
        assert main(["offsets", "show", "m", "--url", d.url]) == 0
    finally:
        d.stop()


def test_client_certificates_when_required(tmp_path: Path, pki: dict[str, Path]) -> None:
    d = daemon(
        tmp_path,
        listeners="https://0.0.0.0:0",  # beyond loopback: client certificates authenticate
        **{
            "listeners.https.ssl.keystore.location": str(pki["server"]),
            "listeners.https.ssl.truststore.location": str(pki["ca"]),
            "listeners.https.ssl.client.auth": "required",
        },
    )
    try:
        url = d.url.replace("0.0.0.0", "127.0.0.1")
        with pytest.raises(ApiError):
            Client(url, tls=tls_context(str(pki["ca"]))).get("/connectors")
        client = Client(url, tls=tls_context(str(pki["ca"]), str(pki["client"])))
        assert client.get("/connectors") == ["m"]
    finally:
        d.stop()


def test_an_unauthenticated_api_beyond_loopback_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match=r"worker\.rest\.allow\.unauthenticated\.remote"):
        daemon(tmp_path, **{"rest.host": "0.0.0.0", "rest.port": "0"})
    d = daemon(
        tmp_path,
        **{"rest.host": "0.0.0.0", "rest.port": "0", "rest.allow.unauthenticated.remote": "true"},
    )
    d.stop()


def test_https_settings_are_checked_at_load(tmp_path: Path) -> None:
    from worker.config import WorkerConfigError

    with pytest.raises(WorkerConfigError, match=r"listeners\.https\.ssl\.keystore\.location"):
        parse_config("worker:\n  listeners: https://127.0.0.1:8443\n")


def _raw_request(url: str, head: bytes, body: bytes = b"") -> socket.socket:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=10)
    sock.sendall(head + body)
    return sock


def test_an_unauthenticated_body_is_refused_before_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Authentication ran after the whole body (up to 16 MiB) was read, so credential-less
    clients that stalled mid-upload each held that much of the worker's memory; and a client
    that stalls mid-body is now dropped after the body timeout."""
    from worker.rest import server

    monkeypatch.setattr(server, "BODY_TIMEOUT_S", 1)
    creds = tmp_path / "users.properties"
    creds.write_text("admin=Adm1n-pw\n")
    d = daemon(
        tmp_path,
        listeners="http://127.0.0.1:0",
        **{"rest.basic.auth.credentials.file": str(creds)},
    )
    try:
        big = server.MAX_BODY - 1
        head = (
            f"POST /connectors HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {big}\r\n\r\n"
        ).encode()
        # the 401 arrives although only a fraction of the announced body was sent
        sock = _raw_request(d.url, head, b"{" * 1024)
        assert sock.recv(64).startswith(b"HTTP/1.1 401")
        sock.close()
        # an authenticated client that stops sending gets 408 after the timeout
        auth = base64.b64encode(b"admin:Adm1n-pw").decode()
        head = head.replace(b"Host: x\r\n", f"Host: x\r\nAuthorization: Basic {auth}\r\n".encode())
        sock = _raw_request(d.url, head, b"{" * 1024)
        assert sock.recv(64).startswith(b"HTTP/1.1 408")
        sock.close()
    finally:
        d.stop()
