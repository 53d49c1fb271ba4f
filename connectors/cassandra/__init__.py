"""Cassandra: a per-node agent reading the commit log segments in cdc_raw (pure Python)."""
