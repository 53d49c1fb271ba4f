"""PostgreSQL connector (pgoutput logical decoding), Debezium-compatible."""

from connectors.postgres.connector import PostgresConnector

__all__ = ["PostgresConnector"]
