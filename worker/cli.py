"""The `tidemark` command line."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from collections.abc import Sequence

from worker.dev import Stack, StackError
from worker.rest.client import DEFAULT_URL, ApiError, Client
from worker.verify_cli import add_verify_command


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
    add_worker_commands(sub)
    add_verify_command(sub)
    return parser


def _run(args: argparse.Namespace) -> int:
    from worker import daemon
    from worker.config import WorkerConfigError, load_config

    try:
        config = load_config(args.config)
    except WorkerConfigError as exc:
        print(f"tidemark: {exc}", file=sys.stderr)
        return 1
    return daemon.run(config, log_level=args.log_level, log_format=args.log_format)


def _validate(args: argparse.Namespace) -> int:
    from worker.config import WorkerConfigError, load_config

    warnings: list[tuple[str, str]] = []
    try:
        config = load_config(args.config, warnings=warnings)
    except WorkerConfigError as exc:
        _print_warnings(warnings)
        print(str(exc), file=sys.stderr)
        return 1
    _print_warnings(warnings)
    names = ", ".join(c.name for c in config.connectors) or "none"
    extra = f", {len(warnings)} warning(s)" if warnings else ""
    print(f"{args.config}: valid ({len(config.connectors)} connector(s): {names}{extra})")
    if not args.connect:
        return 0
    from worker.connection_check import check_file

    errors, notices = check_file(config, os.environ)
    for line in notices:
        print(f"warning: {line}", file=sys.stderr)
    for line in errors:
        print(line, file=sys.stderr)
    if errors:
        print(f"{args.config}: {len(errors)} connection problem(s)", file=sys.stderr)
        return 1
    print(f"{args.config}: every connector connects")
    return 0


def _print_warnings(warnings: list[tuple[str, str]]) -> None:
    """Likely typos among unknown keys: shown, never fatal (unknown keys pass through)."""
    for path, msg in warnings:
        print(f"warning: {path}: {msg}", file=sys.stderr)


def _status(args: argparse.Namespace) -> int:
    from worker.rest.status_view import render_status

    print(render_status(_client(args)), end="")
    return 0


def _offsets(args: argparse.Namespace) -> int:
    import orjson

    client = _client(args)
    if args.offsets_command in ("import", "export"):
        from worker import offsets_cli

        return offsets_cli.run(args, client)
    path = Client.connector_path(args.connector, "/offsets")
    if args.offsets_command == "show":
        doc = client.get(path)
        print(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode())
        return 0
    if args.stop:
        client.call("PUT", Client.connector_path(args.connector, "/stop"))
        print(f"connector {args.connector} stopped")
    doc = client.call("DELETE", path)
    print(doc.get("message") if isinstance(doc, dict) else doc)
    print(
        f"resume it with: curl -X PUT {client.url}"
        f"{Client.connector_path(args.connector, '/resume')}"
    )
    return 0


def _client(args: argparse.Namespace) -> Client:
    return Client.from_env(
        args.url, credentials_file=args.credentials_file, ca=args.ca_file, cert=args.cert
    )


def add_rest_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--url", default=None, help=f"worker REST URL (default: $TIDEMARK_URL or {DEFAULT_URL})"
    )
    p.add_argument(
        "--credentials-file",
        help="file with one user:password line for HTTP basic auth (default: "
        "$TIDEMARK_REST_CREDENTIALS_FILE, or $TIDEMARK_REST_USER and $TIDEMARK_REST_PASSWORD); "
        "never pass a password on the command line",
    )
    p.add_argument(
        "--ca-file", help="PEM CA of an https:// worker's certificate (default: $TIDEMARK_REST_CA)"
    )
    p.add_argument(
        "--cert",
        help="PEM client certificate with its key, for mutual TLS (default: $TIDEMARK_REST_CERT)",
    )


def add_worker_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "run",
        help="run the worker daemon (connectors from a YAML file, Kafka Connect REST API)",
        description=(
            "Run the worker: host the connectors of CONFIG, serve the Kafka Connect REST API, "
            "/metrics and /health. SIGTERM or Ctrl-C stops it gracefully (offsets committed) "
            "within task.shutdown.graceful.timeout.ms; exit code 0 when that succeeded."
        ),
    )
    p.add_argument("config", help="worker YAML file (see examples/postgres.yaml)")
    p.add_argument(
        "--log-level", choices=["DEBUG", "INFO", "WARN", "ERROR"], help="override worker.log.level"
    )
    p.add_argument("--log-format", choices=["text", "json"], help="override worker.log.format")
    p.set_defaults(func=_run)

    p = sub.add_parser(
        "validate",
        help="check a worker YAML file and every connector config in it",
        description=(
            "Check CONFIG without starting anything: YAML syntax, worker keys and types, "
            "connector classes, every connector property, duplicate names and ${env:...} / "
            "${file:...} placeholders. Prints every problem with its YAML path; exit code 1 "
            "if there is any. With --connect, also connect to each connector's database as "
            "a create over REST does (login, and warnings for what would fail once streaming)."
        ),
    )
    p.add_argument("config", help="worker YAML file")
    p.add_argument(
        "--connect",
        action="store_true",
        help="also connect to every connector's database with its config",
    )
    p.set_defaults(func=_validate)

    p = sub.add_parser(
        "config-key",
        help="print a new key for worker.config.storage.encryption.key",
        description="Print a random key (256 bits, URL-safe text) for "
        "config.storage.encryption.key: every worker of a distributed group needs the same one "
        "(docs/distributed.md#secrets-in-the-config-topic).",
    )
    p.set_defaults(func=_config_key)

    p = sub.add_parser(
        "status",
        help="connectors, tasks, snapshot progress and lag of a running worker",
        description="Show a running worker's connectors and tasks with their state, snapshot "
        "progress (rows, ETA), streaming lag and failure traces.",
    )
    add_rest_options(p)
    p.set_defaults(func=_status)

    p = sub.add_parser(
        "apply",
        help="run the Spark apply job: Kafka change events -> Delta Lake tables",
        description="Run the PySpark apply job (cdc.apply) with CONFIG; every option after "
        "CONFIG goes to the job (see `tidemark apply CONFIG --help`, docs/apply.md).",
        add_help=False,
    )
    p.add_argument("apply_args", nargs=argparse.REMAINDER)
    p.set_defaults(func=_apply)
    p = sub.add_parser(
        "offsets",
        help="show, reset, import or export a connector's stored offsets",
        description="Show or reset a connector's source offsets through the REST API "
        "(GET / DELETE /connectors/{c}/offsets), or move them from or to Debezium Server's "
        "offset file. Reset and import need the connector STOPPED.",
    )
    osub = p.add_subparsers(dest="offsets_command", required=True)
    for name, helptext in (
        ("show", "print the stored offsets as JSON"),
        ("reset", "delete the stored offsets: the next start snapshots again (per snapshot.mode)"),
    ):
        q = osub.add_parser(name, help=helptext, description=helptext)
        q.add_argument("connector", help="connector name")
        add_rest_options(q)
        if name == "reset":
            q.add_argument(
                "--stop",
                action="store_true",
                help="stop the connector first (PUT /connectors/{c}/stop)",
            )
        q.set_defaults(func=_offsets)
    from worker.offsets_cli import add_commands

    add_commands(osub, add_rest_options, _offsets)


def _config_key(args: argparse.Namespace) -> int:
    import secrets

    print(secrets.token_urlsafe(32))
    return 0


def _apply(args: argparse.Namespace) -> int:
    """The job lives in cdc.apply (it depends only on the envelope contract)."""
    from cdc.apply.cli import main as apply_main

    return int(apply_main(list(args.apply_args)))


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["apply"]:
        # Everything after `apply`, --help included, belongs to the job's own parser.
        from cdc.apply.cli import main as apply_main

        return int(apply_main(argv[1:]))
    args = build_parser().parse_args(argv)
    try:
        code = int(args.func(args))
        sys.stdout.flush()  # a reader gone shows here, where it is handled, not at exit
        return code
    except StackError as exc:
        print(f"\ntidemark: {exc}", file=sys.stderr)
        return 1
    except ApiError as exc:
        print(f"tidemark: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `tidemark dev env | head -3`, `tidemark status | grep -m1 ...`: the reader has
        # what it wanted. Python would print a traceback, and another one at exit while
        # flushing stdout, so stdout goes to /dev/null first.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # a shell's status for SIGPIPE, what `yes | head` reports


if __name__ == "__main__":
    sys.exit(main())
