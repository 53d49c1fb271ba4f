#!/usr/bin/env bash
# Sets up a fresh machine (scripts/setup.sh) and runs the whole test suite. The integration
# tests start the real PostgreSQL, MariaDB and Kafka themselves, once per run, and stop them.
# Extra arguments go to pytest, e.g. scripts/test.sh tests/unit -k envelope
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh dev,spark
echo "==> running tests"
# two lanes side by side (tests/conftest.py); TIDEMARK_TEST_WORKERS=0 runs them in one process
exec .venv/bin/python -m pytest -n "${TIDEMARK_TEST_WORKERS:-2}" "$@"
