"""The transaction metadata topic (``provide.transaction.metadata=true``) of tidemark's
PostgreSQL connector against Debezium 3.6's, under ``envelope.version=3``.

Debezium's PostgreSQL connector runs in a real Kafka Connect worker and tidemark beside it
over the same tables (``smt_parity.py``): a snapshot, then a transaction over two tables with
an insert, an update and another insert, a delete alone, and the sentinel. The
``<prefix>.transaction`` topics must hold the same BEGIN and END records (key, value,
schemas: statuses, event counts, per-table counts), and the data topics the same events.

One documented difference is normalized: Debezium 3.6 writes a PostgreSQL transaction's id
as ``<txid>:<LSN>`` with the LSN of the event at hand (``PostgresTransactionMonitor``), so
one transaction's BEGIN, its events and its END carry different ids, and a consumer cannot
match them; tidemark writes ``<txid>`` everywhere. Ids are compared up to the ``:``. The
data events' ``transaction`` blocks are left out, as every run-specific field is in this
harness.

Never skipped: if Kafka Connect or its Java runtime cannot be resolved, the test fails.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import PgInfo
from tests.integration.smt_parity import Scenario, run_parity

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]


def _txid_only(topic: str, doc: Any) -> Any:
    """A transaction record's ``id`` without Debezium's ``:<LSN>`` suffix."""
    if topic != "<prefix>.transaction" or not isinstance(doc, dict):
        return doc
    payload = doc.get("payload")
    if isinstance(payload, dict) and isinstance(payload.get("id"), str):
        payload = {**payload, "id": payload["id"].split(":", 1)[0]}
        return {**doc, "payload": payload}
    return doc


def test_transaction_topic_matches_debezium(
    postgres: PgInfo, kafka: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    scenario = Scenario(
        {"tx_a": "id int PRIMARY KEY, v text", "tx_b": "id int PRIMARY KEY, v text"},
        ["INSERT INTO tx_a VALUES (1, 'a')"],
        [
            [
                "INSERT INTO tx_a VALUES (2, 'b')",
                "INSERT INTO tx_b VALUES (1, 'c')",
                "UPDATE tx_a SET v = 'z' WHERE id = 1",
            ],
            ["DELETE FROM tx_b WHERE id = 1"],
            ["INSERT INTO tx_a VALUES (9999, 'sentinel')"],
        ],
        1,
        1,
        tidemark_config={"envelope.version": "3"},
        normalize=_txid_only,
    )
    chain = {"provide.transaction.metadata": "true"}
    diffs = run_parity(postgres, kafka, tmp_path, request, chain, scenario, jvm="kafka-connect")
    assert not diffs, "transaction metadata differs:\n\n" + "\n\n".join(diffs)
