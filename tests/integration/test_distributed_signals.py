"""``POST /connectors/{c}/signals`` in distributed mode: two `tidemark run` workers in one group.

The worker that receives the signal does not run the task: it forwards the call to the one that
does (the worker id in the status topic) and returns its answer, so the incremental snapshot
runs. A call marked ``forward=false`` (a forwarded one) is answered where it arrives; an
unknown connector is 404 and a stopped one 409 (its task runs nowhere).
"""

from __future__ import annotations

from typing import Any

import pytest

from cdc.testing.kafka_reader import read_topic
from tests.integration.test_distributed import (
    Cluster,
    cluster,  # noqa: F401 (the module's fixture)
    running_on,
    start_workers,
)
from tests.integration.test_worker_rest import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.mariadb, pytest.mark.kafka]

SIGNAL_DDL = (
    "CREATE TABLE dbz_signal (id varchar(64) PRIMARY KEY, type varchar(32), data varchar(2048))"
)


def test_rest_signal_is_forwarded_to_the_worker_running_the_task(cluster: Cluster) -> None:  # noqa: F811
    c = cluster
    c.sql(
        c.db1,
        SIGNAL_DDL,
        "CREATE TABLE sg (id int PRIMARY KEY, v text)",
        "INSERT INTO sg SELECT g, 'v' || g FROM generate_series(1, 5) g",
    )
    group = f"{c.tag}-gs"
    workers = start_workers(c, group, 2)
    try:
        extra = {
            "table.include.list": "public.sg,public.dbz_signal",
            "signal.data.collection": "public.dbz_signal",
            "signal.enabled.channels": "source,rest",
            "snapshot.mode": "no_data",
        }
        name = f"{c.tag}-ps"
        config = {**c.pg_connector("ps", c.db1, "sg"), **extra}
        code, doc = workers[0].client.request(
            "POST", "/connectors", {"name": name, "config": config}
        )
        assert code == 201, doc
        wait_for(lambda: bool(running_on(workers, name)()), 60, f"{name} running")
        owner = next(w for w in workers if w.id == running_on(workers, name)())
        other = next(w for w in workers if w is not owner)
        path = f"/connectors/{name}/signals"
        body = {
            "id": "s-1",
            "type": "execute-snapshot",
            "data": {"data-collections": ["public.sg"]},
        }

        answers: list[tuple[int, Any]] = []

        def sent() -> bool:
            # 409 from the owner until its task streams (it takes signals from then on)
            answers.append(other.client.request("POST", path, body))
            return answers[-1][0] != 409

        wait_for(sent, 60, "the task to take signals")
        code, doc = answers[-1]
        assert code == 202, doc
        assert doc["id"] == "s-1" and doc["type"] == "execute-snapshot"
        events = read_topic(c.kafka, c.topic("ps", "sg"), min_count=5, timeout=60)
        assert sorted(e.value["after"]["id"] for e in events if e.op == "r") == [1, 2, 3, 4, 5]
        assert "signal 's-1' execute-snapshot via rest" in owner.log()  # run by the owner
        print(f"\nforwarded signal accepted after {len(answers)} call(s)")

        code, doc = other.client.request("POST", f"{path}?forward=false", body)
        assert code == 409 and "no running task here" in doc["message"], doc
        code, doc = other.client.request("POST", f"/connectors/{c.tag}-nope/signals", body)
        assert code == 404, doc

        assert other.client.request("PUT", f"/connectors/{name}/stop")[0] < 300
        code, doc = other.client.request("POST", path, body)
        assert code == 409 and "not running on any worker" in doc["message"], doc
    finally:
        for w in workers:
            w.end()
        c.drop_slots()
