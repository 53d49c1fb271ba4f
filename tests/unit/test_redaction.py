"""Traces are scrubbed of secret values everywhere but in their frame lines."""

from __future__ import annotations

import traceback

from worker import redaction
from worker.herder import Secrets

PEM = "-----BEGIN KEY-----\nAAAAsecretline1\nBBBBsecretline2\n-----END KEY-----"


def secrets() -> Secrets:
    s = Secrets()
    s.add_config({"database.password": "tidemark", "ssl.key": PEM, "database.user": "u"}, None)
    return s


def test_frame_lines_keep_their_paths_and_the_rest_is_scrubbed() -> None:
    def fail() -> None:
        raise ValueError("password tidemark refused")

    try:
        fail()
    except ValueError as exc:
        trace = "".join(traceback.format_exception(exc)).replace(__file__, "/opt/tidemark/t.py")
    out = redaction.scrub(secrets().redact, trace)
    assert 'File "/opt/tidemark/t.py", line' in out
    assert out.rstrip().endswith("ValueError: password ******** refused")
    assert "tidemark refused" not in out


def test_a_multi_line_secret_between_frames_is_still_found() -> None:
    text = f'Traceback:\n  File "/x.py", line 1, in f\nbad key:\n{PEM}\nend'
    out = redaction.scrub(secrets().redact, text)
    assert "secretline" not in out
    assert out == 'Traceback:\n  File "/x.py", line 1, in f\nbad key:\n********\nend'


def test_a_line_only_shaped_like_a_frame_in_a_message_is_still_scrubbed() -> None:
    text = 'error: File "tidemark", line 1, in x'
    assert redaction.scrub(secrets().redact, text) == 'error: File "********", line 1, in x'
