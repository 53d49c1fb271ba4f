#!/usr/bin/env bash
# Sets up a fresh machine (scripts/setup.sh) and runs the demo pipeline on the local stack.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh dev,spark
exec .venv/bin/python -m worker.demo
