"""Process plumbing shared by the local-stack services.

Every service of `tidemark dev` is a plain OS process started from packages found on this
machine, with its data, pid file and log under one private folder. Keeping the plumbing here
means each service module only says *what* to run and *how to tell it is ready*.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import signal
import socket
import subprocess
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path


class StackError(RuntimeError):
    """A service could not be prepared, started or stopped; the message says what to do."""


@dataclass(frozen=True)
class ServiceStatus:
    name: str
    running: bool
    pid: int | None
    address: str
    log_file: Path


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        return s.connect_ex((host, port)) == 0


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child still answers kill(0); treat it as gone.
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][:1] != "Z"
    except OSError:
        return False


def tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log yet)"


_CHILDREN: dict[Path, subprocess.Popen[bytes]] = {}

#: starts tried when a service exits because one of its ports was taken (see _lost_bind)
BIND_ATTEMPTS = 3


def _lost_bind(log_file: Path, since: int) -> bool:
    """Whether the attempt that logged from byte ``since`` on died binding a port. The
    default dev ports lie below Linux's ephemeral range (32768-60999), but a port chosen
    with ``TIDEMARK_*_PORT`` may lie in it, and then a client socket of any process on the
    box can hold it for a moment; the port was free when ``start`` checked it, so trying
    again is right. (A connection that stays open keeps the port for good: that is why the
    defaults moved out of the range.)"""
    try:
        with open(log_file, "rb") as f:
            f.seek(since)
            text = f.read().decode(errors="replace")
    except OSError:
        return False
    return "in use" in text


class Service(ABC):
    """One local service: a process, its private data folder, a pid file and a log file."""

    name: str = ""
    host = "127.0.0.1"

    def __init__(self, home: Path, port: int) -> None:
        self.home = home / self.name
        self.port = port
        self.log_file = self.home / f"{self.name}.log"
        self.pid_file = self.home / f"{self.name}.pid"

    # -- what each service defines -------------------------------------------------------
    @abstractmethod
    def prepare(self) -> None:
        """Create the data folder and configuration once; must be idempotent."""

    @abstractmethod
    def command(self) -> Sequence[str]:
        """The foreground command line of the service process."""

    def ready(self) -> bool:
        """True once the service accepts clients; the default checks the port only."""
        return port_open(self.host, self.port)

    def after_start(self) -> None:  # noqa: B027 - optional hook, empty by default
        """One-time setup that needs the running service (users, grants)."""

    def env(self) -> dict[str, str]:
        return {}

    def run_as(self) -> str | None:
        """OS user to run the process as when we are root (databases refuse to run as root)."""
        return None

    start_timeout = 60.0

    # -- shared plumbing -------------------------------------------------------------------
    def pid(self) -> int | None:
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if pid_alive(pid) else None

    def running(self) -> bool:
        return self.pid() is not None and self.ready()

    def status(self) -> ServiceStatus:
        return ServiceStatus(
            self.name, self.running(), self.pid(), f"{self.host}:{self.port}", self.log_file
        )

    def _ids(self) -> tuple[int | None, int | None, list[int] | None]:
        """(uid, gid, groups) to drop to, or Nones when no switch is needed."""
        user = self.run_as()
        if user is None or os.geteuid() != 0:
            return None, None, None
        try:
            pw = pwd.getpwnam(user)
        except KeyError as exc:
            raise StackError(
                f"{self.name}: OS user {user!r} does not exist; it is created by the Debian "
                f"package, so reinstall the package (see `tidemark dev up --help`)"
            ) from exc
        return pw.pw_uid, pw.pw_gid, []

    def chown(self, path: Path) -> None:
        user = self.run_as()
        if user is None or os.geteuid() != 0:
            return
        pw = pwd.getpwnam(user)
        for root, dirs, files in os.walk(path):
            for entry in [root, *(os.path.join(root, d) for d in dirs)]:
                os.chown(entry, pw.pw_uid, pw.pw_gid)
            for f in files:
                os.chown(os.path.join(root, f), pw.pw_uid, pw.pw_gid)

    def run_checked(self, argv: Sequence[str], what: str) -> str:
        """Run a setup command as the service user; failures quote its output."""
        uid, gid, groups = self._ids()
        proc = subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            check=False,
            user=uid,
            group=gid,
            extra_groups=groups,
        )
        if proc.returncode != 0:
            raise StackError(
                f"{self.name}: {what} failed (exit {proc.returncode}): "
                f"{(proc.stderr or proc.stdout).strip()[-2000:]}"
            )
        return proc.stdout

    def start(self) -> bool:
        """Start the service if needed; returns False when it was already running."""
        if self.running():
            return False
        if self.pid() is None and port_open(self.host, self.port):
            raise StackError(
                f"{self.name}: port {self.port} on {self.host} is already used by another "
                f"process. Stop that process or choose another port with "
                f"{self.port_env_var()}=<port>."
            )
        self.home.mkdir(parents=True, exist_ok=True)
        self.prepare()
        for attempt in range(1, BIND_ATTEMPTS + 1):
            logged = self.log_file.stat().st_size if self.log_file.exists() else 0
            try:
                self._launch()
                break
            except StackError:
                if attempt == BIND_ATTEMPTS or not _lost_bind(self.log_file, logged):
                    raise
                time.sleep(2.0)
        self.after_start()
        return True

    def _launch(self) -> None:
        uid, gid, groups = self._ids()
        with open(self.log_file, "ab") as log:
            proc = subprocess.Popen(
                list(self.command()),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=self.home,
                user=uid,
                group=gid,
                extra_groups=groups,
            )
        # Keep the Popen: it is the only handle that can reap the child when we stop it.
        _CHILDREN[self.pid_file] = proc
        self.pid_file.write_text(str(proc.pid))
        self._wait(proc.poll, proc.pid)

    def _wait(self, poll: Callable[[], int | None], pid: int) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            code = poll()
            if code is not None:
                raise StackError(
                    f"{self.name} exited with code {code} while starting; its log is "
                    f"{self.log_file}:\n{tail(self.log_file)}"
                )
            if self.ready():
                return
            time.sleep(0.2)
        self._kill(pid)
        raise StackError(
            f"{self.name} did not become ready within {self.start_timeout:.0f} s; its log is "
            f"{self.log_file}:\n{tail(self.log_file)}"
        )

    def stop(self, timeout: float = 30.0) -> bool:
        pid = self.pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return False
        self._kill(pid, timeout)
        self.pid_file.unlink(missing_ok=True)
        return True

    def crash(self, sig: signal.Signals = signal.SIGKILL) -> None:
        """Stop the service abruptly with ``sig`` and wait until it exited, for fault tests
        (``start()`` brings it back on the same data): SIGKILL is a crash, SIGQUIT is
        PostgreSQL's ``pg_ctl stop -m immediate`` (no checkpoint: recovery at the start)."""
        pid = self.pid()
        if pid is None:
            raise StackError(f"{self.name} is not running")
        self._kill(pid, steps=((sig, 30.0), (signal.SIGKILL, 5.0)))
        self.pid_file.unlink(missing_ok=True)

    def _kill(
        self,
        pid: int,
        timeout: float = 30.0,
        steps: tuple[tuple[signal.Signals, float], ...] | None = None,
    ) -> None:
        child = _CHILDREN.get(self.pid_file)
        if child is not None and child.pid != pid:
            child = None
        for sig, wait in steps or ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, sig)
            if child is not None:
                # Our own child: wait() reaps it, so no zombie and no "still running" warning.
                try:
                    child.wait(wait)
                except subprocess.TimeoutExpired:
                    continue
                _CHILDREN.pop(self.pid_file, None)
                return
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                if not pid_alive(pid):
                    return
                time.sleep(0.1)

    @classmethod
    def port_env_var(cls) -> str:
        return f"TIDEMARK_{cls.name.upper()}_PORT"
