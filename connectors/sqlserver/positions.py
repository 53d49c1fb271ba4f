"""Whether a stored position can still be resumed: the CDC cleanup job removes change rows
older than its retention, and a position before them cannot be streamed from."""

from __future__ import annotations

from collections.abc import Callable

from cdc.spi import TableId
from connectors.sqlserver.offsets import SqlServerPosition
from connectors.sqlserver.schema import Catalog


def position_lost(
    catalog: Catalog,
    pos: SqlServerPosition,
    included: Callable[[TableId], bool] | None = None,
) -> str | None:
    """Why the stored position cannot be resumed, or None. A capture instance whose minimum
    LSN is past the position lost changes to the cleanup job if it existed at the position
    (created before the position's commit time); one created later starts where its changes
    start. When the position's commit time is gone too, the instance is taken as cleaned:
    a false alarm costs a snapshot, a wrong guess would lose changes. Only the instances of
    ``included`` tables count (all when None)."""
    from_lsn = pos.from_lsn()
    if from_lsn is None or pos.commit_lsn is None:
        return None
    committed_at = catalog.lsn_time(pos.commit_lsn)
    for inst in catalog.instances():
        if included is not None and not included(inst.table_id(catalog.database)):
            continue
        low = catalog.min_lsn(inst.name)
        if low is None or low <= from_lsn:
            continue
        created = inst.create_date
        if committed_at is not None and created is not None and created > committed_at:
            continue  # enabled after the position: nothing of it was missed
        return (
            f"the stored offset (commit_lsn {pos.commit_lsn}) is older than the minimum "
            f"LSN {low} of capture instance {inst.name}: the CDC cleanup job removed "
            "changes the connector has not read. Take a new snapshot (snapshot.mode="
            "when_needed does so by itself), or keep changes longer (sys.sp_cdc_change_job "
            "@job_type = N'cleanup', @retention = <minutes>)."
        )
    return None
