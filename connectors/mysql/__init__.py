"""MySQL and MariaDB connector (binlog via python-mysql-replication), Debezium-compatible."""

from connectors.mysql.config import CONFIG_DEF as config_def
from connectors.mysql.connector import MySqlConnector

__all__ = ["MySqlConnector", "config_def"]
