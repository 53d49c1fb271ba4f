"""``binary.handling.mode``: how a connector writes binary column values.

Shared by every relational connector so that the modes cannot drift apart: ``bytes`` (the
Connect ``bytes`` type), or text in ``base64``, ``base64-url-safe`` (Debezium 2.x+: the URL
alphabet, ``-`` and ``_``, padded as Java's ``Base64.getUrlEncoder()`` pads) or ``hex``.
"""

from __future__ import annotations

import base64
from collections.abc import Callable

MODES = ("bytes", "base64", "base64-url-safe", "hex")


def _base64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _base64_url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode()


def _hex(data: bytes) -> str:
    return data.hex()


_TEXT: dict[str, Callable[[bytes], str]] = {
    "base64": _base64,
    "base64-url-safe": _base64_url,
    "hex": _hex,
}


def binary_text(mode: str) -> Callable[[bytes], str] | None:
    """The text a mode writes a binary value as; None for ``bytes``."""
    return _TEXT.get(mode)
