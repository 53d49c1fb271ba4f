"""Whether the server still has a stored position: purged binlog files or GTIDs.

Asked by streaming (can it resume, ``snapshot.mode=when_needed``) and by the snapshot (can it
hand over from an earlier attempt's position); its own module so neither imports the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from connectors.mysql import connection as myconn
from connectors.mysql.gtid import MariaDbGtidSet, parse_gtid_set


def missing_reason(conn: Any, info: myconn.ServerInfo, offset: Mapping[str, Any]) -> str | None:
    """Why the offset cannot be streamed from, or None."""
    gtids = offset.get("gtids")
    if gtids and info.gtid_mode:
        stored = parse_gtid_set(str(gtids), mariadb=info.is_mariadb)
        _available, purged_text = myconn.gtid_sets(conn, info)
        purged = parse_gtid_set(purged_text, mariadb=info.is_mariadb)
        if isinstance(stored, MariaDbGtidSet) and isinstance(purged, MariaDbGtidSet):
            mine = stored.domains()
            for domain, (_server, seq) in purged.domains().items():
                if domain in mine and mine[domain][1] < seq:
                    return (
                        f"the server purged the binlog files that follow it: the oldest binlog "
                        f"starts at GTID {domain}-?-{seq}, after the offset's {gtids}"
                    )
            return None
        missing = purged.retain(lambda s: s in stored.sources())
        if not missing.is_contained_within(stored):
            return f"the server purged GTIDs {purged_text} that the offset ({gtids}) has not seen"
        return None
    file = offset.get("file")
    files = myconn.binlog_files(conn)
    if file not in files:
        oldest = files[0] if files else "none"
        return f"binlog file {file} is gone (oldest is {oldest})"
    return None
