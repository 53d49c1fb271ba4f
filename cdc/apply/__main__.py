"""``python -m cdc.apply CONFIG.yaml``; also a script for ``spark-submit`` (absolute imports
only, so it runs as a plain file too)."""

import os
import sys

if not __package__:
    # Run as a file (spark-submit): Python put this directory first on sys.path, where its
    # modules (worker.py, config.py, ...) would shadow top-level packages of the same names.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]

from cdc.apply.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
