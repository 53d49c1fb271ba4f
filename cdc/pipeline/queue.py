"""ChangeEventQueue: the bounded hand-off between a source thread and the task loop.

Bounded by count (``max.queue.size``) and optionally bytes (``max.queue.size.in.bytes``), so
a slow Kafka slows the source down instead of filling memory. A source failure is stored and
raised to the consumer on its next poll, so it surfaces in the task, not in a dying thread.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class QueueClosed(RuntimeError):
    """The consumer stopped; the producer should unwind."""


class ChangeEventQueue(Generic[T]):
    def __init__(
        self,
        max_size: int = 8192,
        max_batch_size: int = 2048,
        poll_interval_ms: int = 1000,
        max_bytes: int = 0,
        size_of: Callable[[T], int] | None = None,
    ) -> None:
        if max_size <= max_batch_size:
            raise ValueError("max.queue.size must be larger than max.batch.size")
        self.max_size = max_size
        self.max_batch_size = max_batch_size
        self.poll_interval = poll_interval_ms / 1000.0
        self.max_bytes = max_bytes
        self.size_of = size_of if max_bytes > 0 else None
        self._items: deque[T] = deque()
        # Item sizes, kept only with a byte bound (a parallel deque, so the count-bounded
        # queue, the usual one, stores the items alone).
        self._sizes: deque[int] | None = deque() if self.size_of is not None else None
        self._bytes = 0
        self._lock = threading.Lock()
        self._not_empty = threading.Condition(self._lock)
        self._not_full = threading.Condition(self._lock)
        self._error: BaseException | None = None
        self._closed = False
        self.blocked_seconds = 0.0
        #: items ever put and ever taken: a position in the stream of records both threads
        #: can name (a resumable snapshot waits until the offsets of its earlier chunks are
        #: stored, counted in records taken; see ``SourceCoordinator.snapshot_chunk_done``)
        self.put_total = 0
        self.taken_total = 0

    # -- producer side ----------------------------------------------------------------------
    def put(self, item: T) -> None:
        if self._sizes is not None:
            self._put_sized(item)
            return
        items = self._items
        with self._lock:
            if len(items) >= self.max_size:
                t0 = time.monotonic()
                while not self._closed and len(items) >= self.max_size:
                    self._not_full.wait(0.5)
                self.blocked_seconds += time.monotonic() - t0
            if self._closed:
                raise QueueClosed("the change event queue is closed")
            items.append(item)
            self.put_total += 1
            if len(items) == 1 or len(items) >= self.max_batch_size:
                self._not_empty.notify()

    def put_many(self, batch: list[T]) -> None:
        """``put`` of each item in order, taking the lock once per run of items that fit (a
        source hands over what it decoded in one go, instead of paying a lock round trip and
        a notify check per record). Blocks the same way, so the count bound holds exactly."""
        if self._sizes is not None:
            for item in batch:
                self._put_sized(item)
            return
        items = self._items
        done, total = 0, len(batch)
        with self._lock:
            while done < total:
                if len(items) >= self.max_size:
                    t0 = time.monotonic()
                    while not self._closed and len(items) >= self.max_size:
                        self._not_full.wait(0.5)
                    self.blocked_seconds += time.monotonic() - t0
                if self._closed:
                    raise QueueClosed("the change event queue is closed")
                was_empty = not items
                room = self.max_size - len(items)
                if done == 0 and room >= total:
                    items.extend(batch)
                    done = total
                else:
                    items.extend(batch[done : done + room])
                    done += min(room, total - done)
                if was_empty or len(items) >= self.max_batch_size:
                    self._not_empty.notify()
            self.put_total += total

    def take_directly(self, n: int, taken: int) -> bool:
        """Count ``n`` items as put and taken at once, when the queue is empty and no item was
        taken since ``taken_total`` was ``taken`` (the consumer processed all it took): the
        source handed them to the consumer's processing itself (``cdc.pipeline.direct_send``),
        and positions named in these totals must still count them. False (nothing counted)
        otherwise: items queued or taken but not yet processed must go first. One check under
        the queue's lock, so a take cannot slip in between."""
        with self._lock:
            if self._closed:
                raise QueueClosed("the change event queue is closed")
            if self._items or self.taken_total != taken:
                return False
            self.put_total += n
            self.taken_total += n
            return True

    def _put_sized(self, item: T) -> None:
        assert self.size_of is not None and self._sizes is not None
        size = self.size_of(item)
        with self._lock:
            if len(self._items) >= self.max_size or (
                self._bytes + size > self.max_bytes and self._items
            ):
                t0 = time.monotonic()
                while not self._closed and (
                    len(self._items) >= self.max_size
                    or (self._bytes + size > self.max_bytes and self._items)
                ):
                    self._not_full.wait(0.5)
                self.blocked_seconds += time.monotonic() - t0
            if self._closed:
                raise QueueClosed("the change event queue is closed")
            self._items.append(item)
            self._sizes.append(size)
            self._bytes += size
            self.put_total += 1
            if len(self._items) == 1 or len(self._items) >= self.max_batch_size:
                self._not_empty.notify()

    def fail(self, error: BaseException) -> None:
        """Record a producer-side failure; the next ``poll`` raises it."""
        with self._lock:
            self._error = error
            self._not_empty.notify_all()

    # -- consumer side ----------------------------------------------------------------------
    def poll(self, timeout: float | None = None) -> list[T]:
        """Up to ``max.batch.size`` items, waiting at most ``poll.interval.ms`` for the first.
        Returns as soon as something is there: latency matters more than batch fullness."""
        wait = self.poll_interval if timeout is None else timeout
        items = self._items
        with self._lock:
            if not items and self._error is None and not self._closed:
                self._not_empty.wait(wait)
            if self._error is not None and not items:
                err, self._error = self._error, None
                raise err
            n = min(len(items), self.max_batch_size)
            if n == len(items):
                batch = list(items)
                items.clear()
            else:
                popleft = items.popleft
                batch = [popleft() for _ in range(n)]
            sizes = self._sizes
            if sizes is not None:
                pop = sizes.popleft
                self._bytes -= sum(pop() for _ in range(n))
            if n:
                self.taken_total += n
                self._not_full.notify_all()
            return batch

    def wake(self) -> None:
        """End a ``poll`` that waits on an empty queue now (it returns nothing), so the
        consumer serves a request made meanwhile without waiting for its timeout."""
        with self._lock:
            self._not_empty.notify_all()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._not_full.notify_all()
            self._not_empty.notify_all()

    # -- metrics ----------------------------------------------------------------------------
    @property
    def size(self) -> int:
        return len(self._items)

    @property
    def remaining_capacity(self) -> int:
        return max(self.max_size - len(self._items), 0)

    @property
    def current_bytes(self) -> int:
        return self._bytes
