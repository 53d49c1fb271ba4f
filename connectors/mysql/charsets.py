"""Python codecs for MySQL/MariaDB character sets whose Python namesake decodes differently.

MySQL's ``latin1`` is Windows-1252, except that the five bytes Windows-1252 leaves unassigned
(0x81, 0x8D, 0x8F, 0x90, 0x9D) are kept as the C1 controls U+0081, U+008D, ... The server
stores and converts them; Python's ``cp1252`` codec rejects them, so a binlog row image with
one of them would stop capture. ``mysql_latin1`` is cp1252 with those five mapped through.
"""

from __future__ import annotations

import codecs
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # collections.abc.Buffer from Python 3.12
    from typing_extensions import Buffer

MYSQL_LATIN1 = "mysql_latin1"


def _latin1_table() -> str:
    chars = []
    for b in range(256):
        try:
            chars.append(bytes([b]).decode("cp1252"))
        except UnicodeDecodeError:
            chars.append(chr(b))  # unassigned in Windows-1252: MySQL keeps the C1 control
    return "".join(chars)


_DECODING = _latin1_table()
_ENCODING = codecs.charmap_build(_DECODING)


def _decode(data: Buffer, errors: str = "strict", /) -> tuple[str, int]:
    return codecs.charmap_decode(data, errors, _DECODING)


def _encode(text: str, errors: str = "strict", /) -> tuple[bytes, int]:
    return codecs.charmap_encode(text, errors, _ENCODING)


def _search(name: str) -> codecs.CodecInfo | None:
    if name != MYSQL_LATIN1:
        return None
    return codecs.CodecInfo(_encode, _decode, name=MYSQL_LATIN1)


codecs.register(_search)


def python_codec(encoding: str) -> str:
    """The codec to decode a column with, given the Python encoding the replication library
    names for its character set."""
    return MYSQL_LATIN1 if encoding.replace("-", "").lower() == "cp1252" else encoding
