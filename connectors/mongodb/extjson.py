"""Documents as MongoDB extended JSON in *strict mode*, the text Debezium puts in ``after``,
``patch``, ``filter`` and the key's ``id`` (seed §4.4.6.1, Table 4.3).

The layout follows the seed's examples, which are the Java driver's legacy strict writer:
``{"hi" : "kafka", "nums" : [10.0, 100.0, 1000.0]}``, ``{"$oid" : "…"}``,
``{"$binary" : "a2Fma2E=", "$type" : "00"}``; 32-bit integers are plain numbers, 64-bit ones
``{"$numberLong" : "…"}``, doubles print as Java prints them (``10.0``, ``1.0E20``).
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import math
import re
import uuid
from collections.abc import Mapping
from typing import Any

from bson import Binary, Code, DBRef, Decimal128, Int64, MaxKey, MinKey, ObjectId, Regex, Timestamp

_INT32 = range(-(2**31), 2**31)
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def _double(value: float) -> str:
    """Java's ``Double.toString``: plain notation for 1e-3 <= |v| < 1e7, else ``d.dddEn``,
    both with the shortest digits that read back as the same double."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    magnitude = abs(value)
    if magnitude == 0 or 1e-3 <= magnitude < 1e7:
        return repr(value)  # Python prints this range plainly, always with a '.'
    sign, digits, exp = decimal.Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exp, int)
    text = "".join(map(str, digits))
    mantissa = text[0] + "." + (text[1:] or "0")
    return f"{'-' if sign else ''}{mantissa}E{len(text) - 1 + exp}"


def _binary(data: bytes, subtype: int) -> str:
    b64 = base64.b64encode(data).decode("ascii")
    return f'{{"$binary" : "{b64}", "$type" : "{subtype:02x}"}}'


def dumps(value: Any) -> str:
    """One BSON value (a document, usually) as strict-mode extended JSON text."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, Int64):
        return f'{{"$numberLong" : "{int(value)}"}}'
    if isinstance(value, int):
        return str(value) if value in _INT32 else f'{{"$numberLong" : "{value}"}}'
    if isinstance(value, float):
        return _double(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, Mapping):
        if isinstance(value, DBRef):
            return dumps(value.as_doc())
        if not value:
            return "{}"
        return "{" + ", ".join(f"{dumps(str(k))} : {dumps(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(dumps(v) for v in value) + "]"
    if isinstance(value, ObjectId):
        return f'{{"$oid" : "{value}"}}'
    if isinstance(value, Binary):
        return _binary(bytes(value), value.subtype)
    if isinstance(value, bytes):
        return _binary(value, 0)
    if isinstance(value, uuid.UUID):
        return _binary(value.bytes, 4)
    if isinstance(value, datetime.datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=datetime.UTC)
        millis = (moment - _EPOCH) // datetime.timedelta(milliseconds=1)
        return f'{{"$date" : {millis}}}'
    if isinstance(value, Timestamp):
        return f'{{"$timestamp" : {{"t" : {value.time}, "i" : {value.inc}}}}}'
    if isinstance(value, Decimal128):
        return f'{{"$numberDecimal" : "{value}"}}'
    if isinstance(value, Regex):
        return f'{{"$regex" : {dumps(value.pattern)}, "$options" : {dumps(str(value.flags))}}}'
    if isinstance(value, re.Pattern):
        return dumps(Regex.from_native(value))
    if isinstance(value, Code):
        return f'{{"$code" : {dumps(str(value))}}}'
    if isinstance(value, MinKey):
        return '{"$minKey" : 1}'
    if isinstance(value, MaxKey):
        return '{"$maxKey" : 1}'
    raise TypeError(f"cannot write a {type(value).__name__} as MongoDB extended JSON")


def key_id(document_id: Any) -> str:
    """The key's ``id``: the ``_id`` as strict extended JSON (seed Table 4.3)."""
    return dumps(document_id)
