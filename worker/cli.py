"""The `tidemark` command line."""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from collections.abc import Sequence

from worker.dev import Stack, StackError


def _dev_up(args: argparse.Namespace) -> int:
    stack = Stack()
    for svc in stack.select(args.services):
        t0 = time.monotonic()
        print(f"  {svc.name:<9} starting ...", end="", flush=True, file=sys.stderr)
        started = svc.start()
        what = f"up in {time.monotonic() - t0:.1f} s" if started else "already running"
        print(f"\r  {svc.name:<9} {what} on {svc.host}:{svc.port}", file=sys.stderr)
    return 0


def _dev_down(args: argparse.Namespace) -> int:
    for name, stopped in Stack().down(args.services):
        print(f"  {name:<9} {'stopped' if stopped else 'not running'}", file=sys.stderr)
    return 0


def _dev_status(args: argparse.Namespace) -> int:
    for st in Stack().status():
        state = f"running (pid {st.pid})" if st.running else "stopped"
        print(f"{st.name:<9} {state:<22} {st.address:<17} log: {st.log_file}")
    return 0


def _dev_env(args: argparse.Namespace) -> int:
    for key, value in Stack().env(args.services).items():
        print(f"export {key}={shlex.quote(value)}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tidemark", description="Change data capture for Python (Debezium-compatible)."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    dev = sub.add_parser(
        "dev",
        help="the local stack: PostgreSQL, MariaDB and Kafka on loopback",
        description=(
            "Run PostgreSQL (logical decoding), MariaDB (row binlog + GTID) and Kafka (KRaft) "
            "as private processes on 127.0.0.1, with data under .tidemark/dev. Set "
            "TIDEMARK_DEV_HOME to move the data, TIDEMARK_<SERVICE>_PORT to change a port."
        ),
    )
    dsub = dev.add_subparsers(dest="dev_command", required=True)
    for name, func, helptext in (
        ("up", _dev_up, "start the services (a no-op for those already running)"),
        ("down", _dev_down, "stop the services; leaves no process behind"),
        ("env", _dev_env, "print connection settings as shell export lines"),
    ):
        p = dsub.add_parser(name, help=helptext, description=helptext)
        p.add_argument("services", nargs="*", help="postgres, mariadb, kafka (default: all)")
        p.set_defaults(func=func)
    p = dsub.add_parser("status", help="what runs, where, and its log file")
    p.set_defaults(func=_dev_status)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except StackError as exc:
        print(f"\ntidemark: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
