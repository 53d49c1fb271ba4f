"""``python -m cdc.apply CONFIG.yaml`` / ``tidemark apply CONFIG.yaml`` / ``spark-submit``."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from cdc.apply import config as cfgmod

if TYPE_CHECKING:
    from cdc.apply.job import ApplyJob


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tidemark apply",
        description=(
            "Apply Debezium change events from Kafka to Delta Lake tables with Spark "
            "Structured Streaming (see docs/apply.md)."
        ),
    )
    p.add_argument("config", nargs="?", help="the job's YAML configuration file")
    p.add_argument("--master", help="Spark master URL (default: spark.master, else local[*])")
    p.add_argument(
        "--trigger",
        help="override the trigger: available-now, once, or an interval such as '10 seconds'",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a configuration key (repeatable), e.g. --set on.error=quarantine",
    )
    p.add_argument(
        "--print-jars",
        action="store_true",
        help="print the resolved Kafka/Delta jars comma-separated (for spark-submit --jars)",
    )
    p.add_argument(
        "--compact",
        action="store_true",
        help=(
            "merge-on-read tables: merge every change log into its table and exit, without "
            "reading Kafka (run it while the job is stopped)"
        ),
    )
    p.add_argument("--log-level", default="INFO", help="Python log level (default INFO)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the job; returns the process exit code (0 done, 1 failed, 2 bad usage/config).
    ``argv`` excludes the program name (``tidemark apply`` passes what follows ``apply``)."""
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    if not logging.getLogger().handlers:
        logging.basicConfig(
            level=args.log_level.upper(),
            format="%(asctime)s %(name)s %(levelname)s %(message)s",
        )
        logging.getLogger("py4j").setLevel(logging.WARNING)  # one line per callback otherwise
    if args.print_jars:
        from cdc.apply.jars import JarsMissing, resolved_jars

        try:
            print(",".join(resolved_jars()))
        except JarsMissing as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return 0
    if not args.config:
        print("error: CONFIG is required", file=sys.stderr)
        return 2
    try:
        overrides = dict(cfgmod.parse_override(s) for s in args.set)
        if args.trigger:
            overrides["trigger"] = args.trigger
        cfg = cfgmod.load(args.config, overrides)
    except cfgmod.ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return run(cfg, master=args.master, compact=args.compact)


def run(cfg: cfgmod.ApplyConfig, *, master: str | None = None, compact: bool = False) -> int:
    from cdc.apply.jars import JarsMissing
    from cdc.apply.job import ApplyJob
    from cdc.apply.progress import add_listener, remove_listener
    from cdc.apply.session import get_session

    log = logging.getLogger("tidemark.apply")
    try:
        spark = get_session(cfg, master)
    except JarsMissing as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    listener = add_listener(spark)
    job = ApplyJob(spark, cfg)
    try:
        return _run_job(job, compact, log)
    finally:
        remove_listener(spark, listener, job.query)


def _run_job(job: ApplyJob, compact: bool, log: logging.Logger) -> int:
    from cdc.apply.job import ApplyError

    if compact:
        for table, counts in sorted(job.compact_all().items()):
            log.info(
                "table %s: change log compacted: %d inserted, %d updated, %d deleted",
                table,
                counts.inserted,
                counts.updated,
                counts.deleted,
            )
        return 0
    try:
        job.run()
    except KeyboardInterrupt:
        log.info("interrupted: stopping the query (the next start resumes from the checkpoint)")
        if job.query is not None:
            job.query.stop()
        return 0
    except ApplyError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:
        cause = job.error or exc
        print(f"error: the apply query failed: {cause}", file=sys.stderr)
        return 1
    return 0
