"""A dev service that dies because a port was taken is started again (a port chosen in the
ephemeral range can be held for a moment by another process's client socket); any other early
exit fails at once, naming the log. The default ports lie below the ephemeral range."""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from worker.dev import service as service_module
from worker.dev.service import Service, StackError

# The fake service: exits saying the port is in use while a marker file lists failures to go,
# else listens on the port until killed.
_SCRIPT = """
import socket, sys, time, pathlib
marker = pathlib.Path(sys.argv[2])
left = int(marker.read_text()) if marker.exists() else 0
if left > 0:
    marker.write_text(str(left - 1))
    print(sys.argv[3], flush=True)
    sys.exit(1)
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen()
while True:
    time.sleep(1)
"""


class _Fake(Service):
    name = "fake"
    start_timeout = 20.0

    def __init__(self, home: Path, port: int, failures: int, message: str) -> None:
        super().__init__(home, port)
        self.marker = home / "failures"
        self.message = message
        home.mkdir(parents=True, exist_ok=True)
        self.marker.write_text(str(failures))

    def prepare(self) -> None:
        (self.home / "script.py").write_text(_SCRIPT)

    def command(self) -> Sequence[str]:
        return [
            sys.executable,
            str(self.home / "script.py"),
            str(self.port),
            str(self.marker),
            self.message,
        ]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Clock:
    """``time`` for the service module, without the pause between attempts."""

    monotonic = staticmethod(time.monotonic)

    @staticmethod
    def sleep(seconds: float) -> None:
        time.sleep(min(seconds, 0.05))


@pytest.fixture(autouse=True)
def _no_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(service_module, "time", _Clock())


def test_a_port_taken_at_start_is_tried_again(tmp_path: Path) -> None:
    fake = _Fake(tmp_path, _free_port(), 2, "127.0.0.1:7000 is in use by another process")
    try:
        assert fake.start() is True
        assert fake.running()
        assert fake.log_file.read_text().count("is in use by another process") == 2
    finally:
        fake.stop()


def test_the_port_still_taken_after_the_last_attempt_fails(tmp_path: Path) -> None:
    fake = _Fake(tmp_path, _free_port(), 5, "Address already in use")
    with pytest.raises(StackError, match="exited with code 1"):
        fake.start()
    assert fake.log_file.read_text().count("Address already in use") == 3
    assert fake.marker.read_text() == "2"


def test_another_failure_is_not_retried(tmp_path: Path) -> None:
    fake = _Fake(tmp_path, _free_port(), 5, "Fatal configuration error")
    with pytest.raises(StackError, match="Fatal configuration error"):
        fake.start()
    assert fake.marker.read_text() == "4"


def _ephemeral_low() -> int:
    """The first port Linux gives outgoing connections (32768 unless the box says otherwise)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def test_default_dev_ports_lie_below_the_ephemeral_range(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An outgoing connection holding a dev port for as long as it stays open made CI's
    late-starting services fail to bind; every default port, derived ones included, must be
    out of the range the kernel hands out."""
    from worker.dev.cassandra import CassandraService
    from worker.dev.kafka import KafkaService
    from worker.dev.stack import SERVICE_TYPES, Stack

    for cls, _ in SERVICE_TYPES.values():
        monkeypatch.delenv(cls.port_env_var(), raising=False)
    monkeypatch.delenv("TIDEMARK_CASSANDRA_STORAGE_PORT", raising=False)
    stack = Stack(tmp_path)
    ports: dict[str, int] = {}
    for name in SERVICE_TYPES:
        svc = stack[name]
        ports[name] = svc.port
        if isinstance(svc, KafkaService):
            ports.update(controller=svc.controller_port, sasl=svc.sasl_ssl_port, mtls=svc.mtls_port)
        if isinstance(svc, CassandraService):
            ports["cassandra storage"] = svc.storage_port
    low = min(_ephemeral_low(), 32768)
    assert {k: p for k, p in ports.items() if p >= low} == {}
    taken = [p for k, p in ports.items() if k != "sqlserver"]  # sqlserver lives in postgres
    assert len(taken) == len(set(taken)), ports
