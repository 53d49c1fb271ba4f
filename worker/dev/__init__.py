"""`tidemark dev`: the local stack (PostgreSQL, MariaDB, Kafka) on loopback, private data dirs."""

from worker.dev.service import StackError
from worker.dev.stack import Stack

__all__ = ["Stack", "StackError"]
