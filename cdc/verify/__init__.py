"""``tidemark verify``: source <-> topic <-> lake reconciliation.

The core compares a table chunk by chunk (primary-key ranges) through checksums both sides
compute over the canonical text of the values (:mod:`cdc.verify.canonical`), drills into the
chunks that differ to name keys missing, extra or stale (:mod:`cdc.verify.compare`), and
reports (:mod:`cdc.verify.report`). A connector takes part by implementing
:class:`cdc.verify.contract.SourceSide`, usually through :mod:`cdc.verify.sql_side`; targets
are the topic (:mod:`cdc.verify.kafka_target`) and Delta tables (:mod:`cdc.verify.delta_target`).
"""
