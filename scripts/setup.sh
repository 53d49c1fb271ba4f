#!/usr/bin/env bash
# Installs everything tidemark's demo and tests need on a fresh Debian 12 machine:
# Debian packages (PostgreSQL, MariaDB, Java, Maven), a virtualenv with tidemark and its
# extras, and the Maven jars of the local Kafka broker. Safe to re-run: it only adds what is
# missing. Usage: scripts/setup.sh [extra,extra,...]   (default extras: dev)
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS="${1:-dev}"
PY="${PYTHON:-python3}"

need_pkgs=()
for pkg in postgresql mariadb-server mariadb-client maven openjdk-17-jre-headless openjdk-17-jdk-headless; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_pkgs+=("$pkg")
done
# The compiled parts (pyproject.toml's ext-modules): a C compiler and Python's headers
for pkg in gcc libc6-dev python3-dev; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_pkgs+=("$pkg")
done
# SQL Server connector: pyodbc needs unixODBC; FreeTDS for a real SQL Server, the PostgreSQL
# ODBC driver for the SQL Server stand-in of `tidemark dev` (worker/dev/sqlserver_standin.py)
for pkg in unixodbc tdsodbc odbc-postgresql; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_pkgs+=("$pkg")
done
if [ "${#need_pkgs[@]}" -gt 0 ]; then
  echo "==> installing Debian packages: ${need_pkgs[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
fi
# The Debian packages may start system-wide servers; tidemark runs its own private ones.
for svc in postgresql mariadb; do
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$svc" 2>/dev/null; then
    echo "note: the system $svc service is running; tidemark uses its own ports, so it is left alone"
  fi
done

if [ ! -x .venv/bin/python ]; then
  echo "==> creating .venv"
  "$PY" -m venv .venv
fi
echo "==> installing tidemark[$EXTRAS] into .venv"
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[$EXTRAS]"

echo "==> resolving Kafka broker jars from Maven Central (cached in ~/.cache/tidemark)"
.venv/bin/python -c "from worker.dev.kafka import resolve_jars, KAFKA_VERSION; print('   ', resolve_jars('kafka', KAFKA_VERSION))"
echo "==> resolving the Cassandra node's jars from Maven Central (cached in ~/.cache/tidemark)"
.venv/bin/python -c "from worker.dev.cassandra import CASSANDRA_VERSION; from worker.dev.kafka import resolve_jars; print('   ', resolve_jars('cassandra', CASSANDRA_VERSION))"
echo "==> resolving the MongoDB stand-in's jars (mongo-java-server) from Maven Central (cached in ~/.cache/tidemark)"
.venv/bin/python -c "from worker.dev.mongodb import MONGO_JAVA_SERVER_VERSION; from worker.dev.kafka import resolve_jars; print('   ', resolve_jars('mongo-java-server', MONGO_JAVA_SERVER_VERSION))"
if [[ ",$EXTRAS," == *",spark,"* ]]; then
  echo "==> resolving Spark's Kafka source and Delta jars (cached in ~/.cache/tidemark)"
  .venv/bin/python -c "from cdc.apply.jars import POMS; from worker.dev.kafka import resolve_jars; [print('   ', resolve_jars(p, v)) for p, v in POMS]"
fi
