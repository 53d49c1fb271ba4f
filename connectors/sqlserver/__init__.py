"""SQL Server connector: CDC change tables polled over pyodbc (seed chapter 5)."""

from connectors.sqlserver.connector import SqlServerConnector

__all__ = ["SqlServerConnector"]
