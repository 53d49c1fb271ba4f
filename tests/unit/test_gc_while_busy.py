"""The collector settings while engines snapshot or stream (``coordinator._frozen_heap``):
frozen heap and higher thresholds while any engine is busy, the process's own settings back
when the last one stops, and a higher threshold of the process's own never lowered."""

from __future__ import annotations

import gc
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
