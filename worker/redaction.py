"""Scrubbing secret values out of traces without disclosing them by where the mask stands.

A trace's frame lines (``File "...", line N, in f``) hold code paths, never a value; a short
password that equals a word of an install path (``/opt/tidemark/...``) would otherwise be
masked in every frame line of every trace, and so be read off the trace.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_FRAME_LINE = re.compile(r'^[ \t]*File "[^"\n]*", line \d+, in [^\n]*$', re.MULTILINE)


def scrub(redact: Callable[[str], str], text: str) -> str:
    """``redact`` applied to everything in ``text`` but its trace frame lines. The text between
    frame lines is scrubbed in one piece, so a multi-line secret (a PEM key) is still found."""
    out: list[str] = []
    last = 0
    for m in _FRAME_LINE.finditer(text):
        out.append(redact(text[last : m.start()]))
        out.append(m.group())
        last = m.end()
    out.append(redact(text[last:]))
    return "".join(out)
