"""``python -m bench.compare``: see :mod:`bench.compare.cli`."""

from __future__ import annotations

import sys

from bench.compare.cli import main
from bench.compare.common import BenchError, install_signal_handlers

if __name__ == "__main__":
    install_signal_handlers()
    try:
        main()
    except BenchError as exc:
        print(f"bench.compare failed: {exc}", file=sys.stderr)
        sys.exit(1)
