"""glibc's allocator, kept from returning the producer's memory to the kernel after every batch.

librdkafka copies each produced record into a message it ``malloc``s in the producing thread
(the task thread: a glibc per-thread arena) and ``free``s in its broker thread once Kafka
acknowledged it. At a snapshot's 100k+ records/s that is ~150 MB/s through one arena whose
in-flight share rises and falls with every acknowledged batch, and glibc gives the top of an
arena back to the kernel as soon as it is free (``heap_trim``: pages released, then faulted in
again on the next rise). A MariaDB snapshot spent ~9 % of its samples inside ``malloc`` under
``rd_kafka_msg_new0``. A top pad (``M_TOP_PAD``) lets each arena keep that much free memory
at its top instead: the pages are reused, not faulted again.

Tuned once per process, on glibc only, and never over the user's own setting: when
``MALLOC_TOP_PAD_`` (or ``GLIBC_TUNABLES``) is in the environment, glibc already applied it.
``TIDEMARK_MALLOC_TOP_PAD`` sets the pad in bytes; ``0`` leaves glibc's defaults alone.
The cost is memory that stays mapped after a peak: at most the pad per arena.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
import threading
from collections.abc import Mapping

log = logging.getLogger(__name__)

#: glibc's ``M_TOP_PAD`` (malloc.h)
M_TOP_PAD = -2
#: Enough for the records a producer holds between acknowledgements at snapshot speed.
DEFAULT_TOP_PAD = 32 << 20
ENV = "TIDEMARK_MALLOC_TOP_PAD"
#: mallopt takes an int
MAX_TOP_PAD = 2**31 - 1

_lock = threading.Lock()
_done: bool = False


def top_pad_setting(environ: Mapping[str, str] = os.environ) -> int | None:
    """The pad to set, or None to leave the allocator alone. Raises ValueError, naming the
    variable, for a value that is not a non-negative integer."""
    if "MALLOC_TOP_PAD_" in environ or "GLIBC_TUNABLES" in environ:
        return None
    raw = environ.get(ENV)
    if raw is None:
        return DEFAULT_TOP_PAD
    try:
        pad = int(raw)
    except ValueError:
        pad = -1
    if not 0 <= pad <= MAX_TOP_PAD:
        raise ValueError(
            f"{ENV} must be a number of bytes from 0 (the tuning off) to {MAX_TOP_PAD}, not {raw!r}"
        )
    return pad or None


def tune_for_producer() -> bool:
    """Set the top pad once per process; True when this call set it."""
    global _done
    with _lock:
        if _done:
            return False
        pad = top_pad_setting()  # a bad value raises here, for every producer until fixed
        _done = True
        if pad is None or not sys.platform.startswith("linux"):
            return False
        try:
            libc = ctypes.CDLL(None)
            libc.gnu_get_libc_version  # noqa: B018 - glibc only (musl's mallopt does nothing)
            mallopt = libc.mallopt
        except (OSError, AttributeError):
            return False
        mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
        mallopt.restype = ctypes.c_int
        ok = bool(mallopt(M_TOP_PAD, pad))
        if ok:
            log.debug("glibc malloc top pad set to %d bytes (%s)", pad, ENV)
        return ok
