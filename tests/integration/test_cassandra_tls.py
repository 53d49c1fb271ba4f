"""The Cassandra connector over TLS to the real node (``cassandra.ssl.enabled``,
``cassandra.ssl.config.path``): the node of ``tidemark dev`` takes TLS on its CQL port beside
plain CQL, with a certificate of the stack's CA. Trust stores as PEM and as PKCS12, a PKCS12
key store with the client certificate, and a trust store of another CA refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509 import load_pem_x509_certificate

from cdc.offsets.memory import MemoryOffsetStore
from tests.integration.cassandra_harness import CassandraHarness, module_harness
from tests.integration.conftest import CassandraInfo
from worker.dev.tls import TlsFiles, ensure_tls

pytestmark = [pytest.mark.cassandra, pytest.mark.kafka]


@pytest.fixture(scope="module")
def h(
    cassandra: CassandraInfo, kafka: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CassandraHarness]:
    yield from module_harness(cassandra, kafka, tmp_path_factory, "cstls")


def p12(path: Path, password: str, key_pem: bytes | None, *certs_pem: bytes) -> Path:
    key = serialization.load_pem_private_key(key_pem, None) if key_pem else None
    certs = [load_pem_x509_certificate(c) for c in certs_pem]
    enc = serialization.BestAvailableEncryption(password.encode())
    if key is not None:
        data = pkcs12.serialize_key_and_certificates(b"c", key, certs[0], certs[1:], enc)  # type: ignore[arg-type]
    else:
        data = pkcs12.serialize_key_and_certificates(b"ca", None, None, certs, enc)
    path.write_bytes(data)
    return path


def ssl_file(tmp: Path, name: str, **props: str) -> str:
    path = tmp / f"{name}.properties"
    path.write_text(
        "# the seed's SSL config file\n" + "".join(f"{k}={v}\n" for k, v in props.items())
    )
    return str(path)


def snapshot_one_row(h: CassandraHarness, table: str, ssl_config: str) -> Any:
    """The snapshot event of the one row of a new table, read over TLS."""
    h.cql(f"CREATE TABLE {h.keyspace}.{table} (id int PRIMARY KEY, v text) WITH cdc = true")
    h.cql(f"INSERT INTO {h.keyspace}.{table} (id, v) VALUES (1, 'over tls')")
    cfg = h.config(
        **{
            "cassandra.ssl.enabled": "true",
            "cassandra.ssl.config.path": ssl_config,
            "table.include.list": rf"{h.keyspace}\.{table}",
        }
    )
    with h.running(cfg, MemoryOffsetStore()) as run:
        h.wait_streaming(run)
        events = h.read(cfg, table, min_count=1)
        # the node's own view: a client connected over TLS (this test's session is plain)
        clients = h.cql("SELECT ssl_enabled, ssl_protocol FROM system_views.clients")
        assert any(c.ssl_enabled for c in clients), clients
    # (the insert may also be streamed: Cassandra has no snapshot isolation)
    (snap,) = [e for e in events if e.op == "r"]
    return snap.after


def test_snapshot_over_tls_with_pem_and_pkcs12_stores(h: CassandraHarness) -> None:
    tls = TlsFiles.at(Path(h.node.tls_dir))
    pem = ssl_file(
        h.tmp, "pem", **{"trustStore.location": str(tls.ca_cert), "trustStore.type": "PEM"}
    )
    after = snapshot_one_row(h, "pem_trust", pem)
    assert after["id"] == 1 and after["v"]["value"] == "over tls", after
    trust = p12(h.tmp / "trust.p12", "trust-pw", None, tls.ca_cert.read_bytes())
    keys = p12(
        h.tmp / "client.p12",
        "key-pw",
        tls.client_key.read_bytes(),
        tls.client_cert.read_bytes(),
        tls.ca_cert.read_bytes(),
    )
    both = ssl_file(
        h.tmp,
        "p12",
        **{
            "keyStore.location": str(keys),
            "keyStore.password": "key-pw",
            "keyStore.type": "PKCS12",
            "trustStore.location": str(trust),
            "trustStore.password": "trust-pw",
            "trustStore.type": "PKCS12",
            "keyManager.algorithm": "SunX509",
            "trustManager.algorithm": "SunX509",
        },
    )
    after = snapshot_one_row(h, "p12_trust", both)
    assert after["id"] == 1 and after["v"]["value"] == "over tls", after


def test_a_trust_store_of_another_ca_is_refused(h: CassandraHarness, tmp_path: Path) -> None:
    other = ensure_tls(tmp_path / "other-ca")  # a CA of its own: the node's is not in it
    bad = ssl_file(
        h.tmp, "other", **{"trustStore.location": str(other.ca_cert), "trustStore.type": "PEM"}
    )
    h.cql(f"CREATE TABLE {h.keyspace}.refused (id int PRIMARY KEY) WITH cdc = true")
    cfg = h.config(
        **{
            "cassandra.ssl.enabled": "true",
            "cassandra.ssl.config.path": bad,
            "cassandra.connect.timeout.ms": "2000",
            "errors.max.retries": "0",
        }
    )
    run = h.start(cfg, MemoryOffsetStore())
    try:
        h.wait_for(lambda: bool(run.errors), timeout=60)
    except AssertionError:
        pass
    finally:
        run.stop()
    assert run.errors, "the connector connected with a trust store that lacks the node's CA"
    assert "CERTIFICATE_VERIFY_FAILED" in str(run.errors[0]) or "certificate verify failed" in str(
        run.errors[0]
    )
