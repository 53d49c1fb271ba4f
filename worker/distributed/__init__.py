"""Distributed mode: several ``tidemark run`` workers sharing connectors through Kafka.

No coordinator of tidemark's own: the cluster's state lives in compacted topics in Kafka
Connect's record formats (:mod:`.config_store`, :mod:`.status_store`, the offsets topic of
:mod:`cdc.offsets.kafka`), and which worker runs which task is decided by a Kafka consumer
group (:mod:`.membership`). :mod:`.herder` ties them to the standalone herder's REST contract.
See docs/distributed.md.
"""
