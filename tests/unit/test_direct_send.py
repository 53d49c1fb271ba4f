"""The initial snapshot's direct send (``cdc.pipeline.direct_send``): the source thread hands
a run to the delivery itself only when nothing is ahead of it, never while a commit is under
way, and counts it in the queue's totals; the dispatcher uses it only in the snapshot phase.

The delivery here is a recorder (a stand-in for ``Delivery.process``): what matters is the
order in which runs reach it and whether they went through the queue. The engine end to end
(real Kafka, kill tests) runs it in every snapshot of the integration suite."""

from __future__ import annotations

import threading
import time

import pytest

from cdc.pipeline.direct_send import DirectSend
from cdc.pipeline.queue import ChangeEventQueue, QueueClosed
from cdc.record import SourceRecord
from cdc.spi import Operation
from tests.unit.test_dispatcher import make_dispatcher


def recs(*ids: int) -> list[SourceRecord]:
    return [SourceRecord("t", None, i, None, {"id": i}, {"s": 1}, {"pos": i}) for i in ids]


def ids(batch: list[SourceRecord]) -> list[int]:
    return [r.key for r in batch]


class Recorder:
    def __init__(self) -> None:
        self.runs: list[list[int]] = []
        self.fail_next = False

    def __call__(self, batch: list[SourceRecord]) -> None:
        if self.fail_next:
            self.fail_next = False
            raise RuntimeError("Kafka rejected a record")
        self.runs.append(ids(batch))


def setup() -> tuple[ChangeEventQueue[SourceRecord], Recorder, DirectSend]:
    queue: ChangeEventQueue[SourceRecord] = ChangeEventQueue(100, 10, 10)
    rec = Recorder()
    return queue, rec, DirectSend(queue, rec)


def test_a_run_with_nothing_ahead_is_sent_at_once_and_counted() -> None:
    queue, rec, direct = setup()
    direct.hand_over(recs(1, 2, 3))
    assert rec.runs == [[1, 2, 3]]
    assert queue.size == 0 and (queue.put_total, queue.taken_total) == (3, 3)


def test_queued_records_go_first() -> None:
    queue, rec, direct = setup()
    queue.put_many(recs(1, 2))
    direct.hand_over(recs(3))  # queued behind 1 and 2, not sent
    assert rec.runs == []
    direct.task_process(queue.poll(0))
    assert rec.runs == [[1, 2, 3]]
    direct.hand_over(recs(4))  # now nothing is ahead
    assert rec.runs == [[1, 2, 3], [4]]
    assert (queue.put_total, queue.taken_total) == (4, 4)


def test_records_the_task_took_but_did_not_process_go_first() -> None:
    queue, rec, direct = setup()
    queue.put_many(recs(1, 2))
    taken = queue.poll(0)  # in the task thread's hands, not processed yet
    direct.hand_over(recs(3))
    assert rec.runs == [] and queue.size == 1  # 3 waits in the queue
    direct.task_process(taken)
    direct.task_process(queue.poll(0))
    assert rec.runs == [[1, 2], [3]]


class _TakenMeanwhile(ChangeEventQueue[SourceRecord]):
    """The task thread polls (outside the direct send's lock) just as the source decides."""

    stolen: list[SourceRecord] | None = None

    def take_directly(self, n: int, taken: int) -> bool:
        if self.stolen is None:
            self.stolen = self.poll(0)
        return super().take_directly(n, taken)


def test_records_taken_while_the_source_decides_still_go_first() -> None:
    """The check that the task processed all it took and the count of a direct run were two
    steps; a poll between them sent the run ahead of the batch the task had just taken."""
    queue = _TakenMeanwhile(100, 10, 10)
    rec = Recorder()
    direct = DirectSend(queue, rec)
    queue.put_many(recs(1, 2))
    direct.hand_over(recs(3))
    assert queue.stolen is not None and ids(queue.stolen) == [1, 2]
    assert rec.runs == []  # 3 waits behind them
    direct.task_process(queue.stolen)
    direct.task_process(queue.poll(0))
    assert rec.runs == [[1, 2], [3]]


def test_no_run_is_sent_while_a_commit_holds_the_lock() -> None:
    _queue, rec, direct = setup()
    assert direct.lock.acquire(timeout=1)
    sender = threading.Thread(target=direct.hand_over, args=(recs(1),))
    sender.start()
    time.sleep(0.2)
    assert rec.runs == []  # waiting: the commit's flush and offset write come first
    direct.lock.release()
    sender.join(5)
    assert rec.runs == [[1]]


def test_after_a_failed_send_everything_goes_through_the_queue() -> None:
    queue, rec, direct = setup()
    rec.fail_next = True
    with pytest.raises(RuntimeError, match="rejected"):
        direct.hand_over(recs(1))
    direct.hand_over(recs(2))
    assert rec.runs == [] and ids(queue.poll(0)) == [2]


def test_a_closed_queue_stops_the_source_as_a_put_would() -> None:
    queue, _rec, direct = setup()
    queue.close()
    with pytest.raises(QueueClosed):
        direct.hand_over(recs(1))


def test_the_dispatcher_sends_directly_only_in_the_snapshot_phase() -> None:
    d, queue, t = make_dispatcher()
    sent: list[list[SourceRecord]] = []
    d.snapshot_hand_over = sent.append
    row = [1, "a", "b", "c"]
    src = {"ts_ms": 1, "snapshot": True, "db": "db", "table": "customers", "pos": 1}
    with d.batched(limit=100):
        d.emit_rows(Operation.READ, t.id, [row], src, {"pos": 1})  # streaming phase
    assert sent == [] and queue.size == 1
    d.phase = d.metrics.snapshot
    with d.batched(limit=100):
        d.emit_rows(Operation.READ, t.id, [row], src, {"pos": 2})
    assert queue.size == 1 and len(sent) == 1
    assert [r.source_offset for r in sent[0]] == [{"pos": 2}]


def test_a_chunk_gate_waits_before_the_next_hand_over_not_at_the_chunk_end() -> None:
    """With the direct send, a chunk's end asks for its offset to be stored and returns: the
    source reads the next batch meanwhile, and waits for the store only before it hands that
    batch over. Without the direct send (streaming, exactly-once) the chunk end waits."""
    d, queue, t = make_dispatcher()
    rec = Recorder()
    d.snapshot_hand_over = DirectSend(queue, rec).hand_over  # counts runs as put and taken
    calls: list[tuple[str, int, bool]] = []
    d.snapshot_chunk_hook = lambda mark, wait: calls.append(("ask", mark, wait))
    d.snapshot_chunk_wait = lambda mark: calls.append(("wait", mark, True))
    d.phase = d.metrics.snapshot
    row = [1, "a", "b", "c"]
    src = {"ts_ms": 1, "snapshot": True, "db": "db", "table": "customers", "pos": 1}
    with d.batched(limit=100):
        d.emit_rows(Operation.READ, t.id, [row], src, {"pos": 1})
        d.snapshot_chunk_done()
        assert calls == [("ask", 1, False)] and rec.runs == [[{"id": 1}]]  # no wait yet
        d.emit_rows(Operation.READ, t.id, [row], src, {"pos": 2})
        d.flush()
    assert calls == [("ask", 1, False), ("wait", 1, True)]  # before the next run went out
    assert rec.runs == [[{"id": 1}], [{"id": 1}]] and queue.put_total == 2
    calls.clear()
    d.phase = d.metrics.streaming
    with d.batched(limit=100):
        d.emit_rows(Operation.READ, t.id, [row], src, {"pos": 3})
        d.snapshot_chunk_done()
    assert calls == [("ask", queue.put_total, True)]  # the queue path waits at once
