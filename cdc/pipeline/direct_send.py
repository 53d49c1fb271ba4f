"""An initial snapshot's records sent by the source thread itself, when that keeps order.

Why: a snapshot reads and converts rows on the source thread and encodes and produces them
on the task thread, and the two share one interpreter lock. Measured on W4-mariadb
(docs/benchmarks.md, ninth session), the hand-over between them costs more than it overlaps:
the task thread is the slower stage, and every time it waits for the lock or for the queue,
the work under the lock does not get done faster. Letting the source thread send each run of
records itself, whenever the task thread has nothing queued or in hand, removes those
hand-overs (1M-row snapshots, alternated: W4-mariadb +11 %, W4 PostgreSQL +16 %).

One thing does move: a failure while sending (a record Kafka refuses with the failure mode
``fail``) is raised on the source thread, which hands it to the task thread as the source's
failure; the engine stops with the same exception, logged as the source's.

What stays the same, so no guarantee moves:
- order: a run goes straight to the delivery only when the queue is empty and every record
  the task thread took is processed (checked under the lock the task thread processes under);
  otherwise it is queued as before;
- offsets: the same ``Delivery.process`` tracks them, and the task thread's commits (flush,
  then store) take the same lock, so an offset is never stored while records before it are
  still being handed to the producer;
- the chunk gate and the other record counts: a run sent here counts as put and taken in the
  queue's totals, so ``put_total`` marks and ``stored(taken)`` mean what they did.

Only for the initial snapshot (the dispatcher asks for it only then) and only with
at-least-once delivery: streaming and the transactional mode keep the queue.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from cdc.pipeline.queue import ChangeEventQueue
from cdc.record import SourceRecord


class DirectSend:
    def __init__(
        self,
        queue: ChangeEventQueue[SourceRecord],
        process: Callable[[list[SourceRecord]], None],
    ) -> None:
        self.queue = queue
        self._process = process
        #: held while records are handed to the producer and while offsets are committed
        self.lock = threading.Lock()
        #: the queue's taken_total once the task thread processed what it took
        self._processed = 0

    # -- task thread -----------------------------------------------------------------------
    def task_process(self, batch: list[SourceRecord]) -> None:
        with self.lock:
            self._process(batch)
            self._processed = self.queue.taken_total

    # -- source thread ---------------------------------------------------------------------
    def hand_over(self, held: list[SourceRecord]) -> None:
        """Send ``held`` now if nothing is ahead of it, else queue it."""
        with self.lock:
            if self.queue.take_directly(len(held), self._processed):
                try:
                    self._process(held)
                except BaseException:
                    # the engine's end (it reaches the task thread as the source's failure);
                    # anything after it goes through the queue
                    self._processed = -1
                    raise
                self._processed = self.queue.taken_total
                return
        self.queue.put_many(held)
