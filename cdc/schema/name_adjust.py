"""Debezium's ``SchemaNameAdjuster``, character for character: what Avro cannot hold in a
schema or field name, and what replaces it.

Checked against Debezium 3.6's own class on a JVM (``AVRO``, ``AVRO_UNICODE``,
``AVRO_FIELD_NAMER``, ``AVRO_UNICODE_FIELD_NAMER``). Its quirks are kept, since names are
identity for consumers and schema registries: the name is walked as Java's UTF-16 code units
(an emoji is two replacements); ``avro`` keeps a leading digit behind a ``_`` (``1col`` →
``_1col``); ``avro_unicode`` takes only ASCII letters as a first character and counts ``_``
as invalid too (``order_id`` → ``order_u005fid``), and writes ``_u`` plus the unit's hex
padded with ``00`` only when it has at most two digits (``ā`` → ``_u101``, tab → ``_u009``).
Schema names keep ``.``; field names do not.
"""

from __future__ import annotations

import string
from functools import lru_cache

MODES = ("avro", "avro_unicode", "none")

_LETTERS = frozenset(string.ascii_letters)
_AVRO_FIRST = _LETTERS | {"_"}
_DIGITS = frozenset(string.digits)


def _units(name: str) -> list[int]:
    raw = name.encode("utf-16-be", "surrogatepass")
    return [int.from_bytes(raw[i : i + 2], "big") for i in range(0, len(raw), 2)]


def _java_hex(unit: int) -> str:
    digits = format(unit, "x")
    return "_u" + ("00" + digits if len(digits) <= 2 else digits)


@lru_cache(maxsize=8192)
def adjust(name: str, mode: str = "avro", *, dots: bool = True) -> str:
    """``name`` as Debezium's adjuster for ``mode`` writes it; ``dots`` for schema names
    (``.`` separates namespaces), not for field names."""
    if mode == "none" or not name:
        return name
    unicode = mode == "avro_unicode"
    first_ok = _LETTERS if unicode else _AVRO_FIRST
    rest_ok = first_ok | _DIGITS | ({"."} if dots else frozenset())
    out: list[str] = []
    for i, unit in enumerate(_units(name)):
        c = chr(unit)
        if c in (rest_ok if i else first_ok):
            out.append(c)
        elif unicode:
            out.append(_java_hex(unit))
        else:
            # a leading digit stays behind the '_' (Java's Character.isDigit: any Nd digit)
            out.append("_" + c if i == 0 and c.isdecimal() else "_")
    return "".join(out)


def field_name(name: str, mode: str = "avro") -> str:
    """A field name (``sanitize.field.names``, ``field.name.adjustment.mode``)."""
    return adjust(name, mode, dots=False)
