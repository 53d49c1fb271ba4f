"""The collector settings while engines snapshot or stream (``coordinator._frozen_heap``):
frozen heap and higher thresholds while any engine is busy, the process's own settings back
when the last one stops, and a higher threshold of the process's own never lowered."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from cdc.pipeline import coordinator


@pytest.fixture(autouse=True)
def _restore_gc() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)
    gc.unfreeze()


def test_two_engines_share_the_busy_settings_and_the_last_hands_them_back() -> None:
    gc.set_threshold(700, 10, 10)
    with coordinator._frozen_heap():
        assert gc.get_threshold() == coordinator.BUSY_THRESHOLDS
        assert gc.get_freeze_count() > 0
        with coordinator._frozen_heap():
            assert gc.get_threshold() == coordinator.BUSY_THRESHOLDS
        assert gc.get_threshold() == coordinator.BUSY_THRESHOLDS  # one engine still busy
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0


def test_a_higher_threshold_of_the_process_is_kept() -> None:
    gc.set_threshold(50_000, 5, 100)
    with coordinator._frozen_heap():
        assert gc.get_threshold() == (50_000, 20, 100)
    assert gc.get_threshold() == (50_000, 5, 100)


def test_the_settings_come_back_when_the_engine_fails() -> None:
    gc.set_threshold(700, 10, 10)
    with pytest.raises(RuntimeError), coordinator._frozen_heap():
        raise RuntimeError("source failed")
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0


class _Engine:
    """Stands for a stopped engine's objects: they refer to each other (callbacks, threads),
    so only the collector can free them."""

    def __init__(self) -> None:
        self.me = self


def test_garbage_of_a_stopped_engine_is_collected_before_the_heap_is_frozen() -> None:
    """Freezing moves every tracked object out of the collector's view, garbage included: a
    task restarted while another engine streams would otherwise keep its predecessor's cycles
    (and what they hold) for as long as the worker is busy."""
    gc.disable()  # no collection may happen by chance between the drop and the freeze
    try:
        with coordinator._frozen_heap():  # another engine is busy
            stopped = _Engine()
            gone = weakref.ref(stopped)
            del stopped
            with coordinator._frozen_heap():  # the restarted task starts streaming
                assert gone() is None
    finally:
        gc.enable()
