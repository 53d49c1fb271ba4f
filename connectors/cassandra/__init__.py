"""Cassandra: a per-node agent reading the commit log segments in cdc_raw (pure Python)."""

from connectors.cassandra.connector import CassandraConnector

__all__ = ["CassandraConnector"]
