"""`tidemark dev env | head -3`: the reader closing the pipe early is the user's choice, not an
error worth a traceback (two, in fact: one where the write failed, one at exit)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TIDEMARK = Path(sys.executable).with_name("tidemark")


def test_a_reader_that_stops_early_gets_no_traceback(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [str(TIDEMARK), "dev", "env"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={"PATH": "/usr/bin:/bin", "TIDEMARK_DEV_HOME": str(tmp_path / "dev")},
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # before the process has written anything: its first write fails
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(60) == 141, err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
