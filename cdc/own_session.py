"""A database session of a component's own, beside the connector's capture sessions.

The reselect post-processor and ``heartbeat.action.query`` each query the source on a
connection that is not the one reading the log (a failed or slow query there must not
disturb capture). The session is opened on first use, so a connector configured with them
but never needing them holds no connection, and closed after an error, so a broken session
is never reused: the next use opens a new one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

log = logging.getLogger("tidemark.session")

T = TypeVar("T")


class OwnSession:
    """``connect`` opens the session (a DB-API connection, or anything with ``close()``);
    ``what`` names it in the log."""

    def __init__(self, connect: Callable[[], Any], what: str) -> None:
        self._connect = connect
        self.what = what
        self.conn: Any = None

    def run(self, work: Callable[[Any], T]) -> T:
        """``work(connection)``, on the session (opened now if it is not open); an error
        closes the session and propagates."""
        if self.conn is None:
            self.conn = self._connect()
        try:
            return work(self.conn)
        except Exception:
            self.close()  # a broken session is not reused
            raise

    def close(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # already gone
                log.debug("closing the %s session failed", self.what, exc_info=True)
