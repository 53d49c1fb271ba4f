"""Java's ``hashCode`` of Connect values, and Debezium's MurmurHash3, in Python.

Debezium's ``PartitionRouting`` picks a record's Kafka partition from the hash of some of its
fields, computed by the JVM: ``Object.hashCode`` of the Connect value (``partition.hash.
function=java``) or Debezium's 32-bit cut of MurmurHash3 x64 (``murmur``). A user moving a
connector from Debezium to tidemark keeps the topic and its consumers, so every key must land
in the partition Debezium put it in, or per-key order breaks across the switch. That is why
this module reproduces the JVM's integers bit for bit rather than using any good hash:
``tests/integration/test_java_hash_jvm.py`` runs the same values through the JVM's classes.

Values are told apart by their Connect schema, as the JVM tells them apart by class: an
``int64`` is a ``Long`` even when small, a ``Decimal`` is a ``BigDecimal`` at the schema's
scale, bytes are the ``ByteBuffer`` Debezium's converters deliver, and the Connect
``Date``/``Time``/``Timestamp`` types are ``java.util.Date``. A ``Struct``'s hash includes its
schema's, which hashes a Java enum by identity and so differs in every JVM; there is nothing
stable to reproduce, and :class:`JavaHashError` says so.
"""

from __future__ import annotations

import decimal
import math
import struct as _struct
from collections.abc import Callable
from typing import Any

from cdc.schema import logical
from cdc.schema.model import Schema, Type

_M32 = 0xFFFFFFFF
_M64 = 0xFFFFFFFFFFFFFFFF
_MS_PER_DAY = 86_400_000
#: no rounding: PostgreSQL's numeric holds up to 131072 digits before the point
_EXACT = decimal.Context(prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)


class JavaHashError(ValueError):
    """A value whose Java hash is not reproducible (a struct), or not what its schema says."""


def int32(value: int) -> int:
    """``value`` wrapped to a Java ``int`` (two's complement, 32 bits)."""
    value &= _M32
    return value - 0x1_0000_0000 if value & 0x8000_0000 else value


def _long_hash(value: int) -> int:
    """``Long.hashCode``: the two halves of the 64-bit value XORed."""
    value &= _M64
    return int32(value ^ (value >> 32))


def _string_hash(text: str) -> int:
    """``String.hashCode`` over UTF-16 code units (a character outside the BMP is two)."""
    h = 0
    units = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & _M32
    return int32(h)


def _double_hash(value: float) -> int:
    """``Double.hashCode``: ``doubleToLongBits`` (one canonical NaN) folded to 32 bits."""
    if math.isnan(value):
        return _long_hash(0x7FF8000000000000)
    return _long_hash(int(_struct.unpack(">q", _struct.pack(">d", value))[0]))


def _float_hash(value: float) -> int:
    """``Float.hashCode``: ``floatToIntBits`` (one canonical NaN)."""
    if math.isnan(value):
        return 0x7FC00000
    return int(_struct.unpack(">i", _struct.pack(">f", value))[0])


def _big_integer_hash(value: int) -> int:
    """``BigInteger.hashCode``: 31-polynomial over the magnitude's 32-bit words, big end
    first, times the sign."""
    magnitude = abs(value)
    words = []
    while magnitude:
        words.append(magnitude & _M32)
        magnitude >>= 32
    h = 0
    for word in reversed(words):
        h = (31 * h + word) & _M32
    return int32(int32(h) * (1 if value > 0 else -1 if value < 0 else 0))


def _decimal_hash(value: decimal.Decimal, scale: int | None) -> int:
    """``BigDecimal.hashCode``: ``31 * unscaled.hashCode() + scale``. The scale is the
    schema's where it has one (Debezium rescales to the column's), else the value's own."""
    if not value.is_finite():
        raise JavaHashError(f"{value} has no BigDecimal value")
    if scale is None:
        scale = -int(value.as_tuple().exponent)
    unscaled = int(value.scaleb(scale, context=_EXACT))
    return int32(31 * _big_integer_hash(unscaled) + scale)


def _byte_buffer_hash(data: bytes) -> int:
    """``ByteBuffer.hashCode``: 31-polynomial over the signed bytes, last byte first."""
    h = 1
    for b in reversed(data):
        h = (31 * h + (b - 256 if b > 127 else b)) & _M32
    return int32(h)


def _date_hash(schema: Schema, value: Any) -> int | None:
    """``java.util.Date.hashCode`` (``Long.hashCode`` of its milliseconds) for Connect's
    ``Date`` (days), ``Time`` and ``Timestamp`` (milliseconds); None for other schemas."""
    name = schema.name
    if name == logical.CONNECT_DATE:
        return _long_hash(int(value) * _MS_PER_DAY)
    if name in (logical.CONNECT_TIME, logical.CONNECT_TIMESTAMP):
        return _long_hash(int(value))
    return None


def java_hash(schema: Schema | None, value: Any) -> int:
    """``value.hashCode()`` as the JVM computes it for the Connect value ``schema`` describes;
    without a schema, by the Python type (schemaless records: ``int`` is a ``Long``)."""
    if value is None:
        return 0
    if schema is None:
        return _schemaless_hash(value)
    dated = _date_hash(schema, value)
    if dated is not None:
        return dated
    kind = schema.type
    if kind in (Type.INT8, Type.INT16, Type.INT32):
        return int32(int(value))
    if kind is Type.INT64:
        return _long_hash(int(value))
    if kind is Type.BOOLEAN:
        return 1231 if value else 1237
    if kind is Type.STRING:
        return _string_hash(str(value))
    if kind is Type.FLOAT64:
        return _double_hash(float(value))
    if kind is Type.FLOAT32:
        return _float_hash(float(value))
    if kind is Type.BYTES:
        if schema.name == logical.CONNECT_DECIMAL:
            params = schema.parameters or {}
            scale = params.get("scale")
            return _decimal_hash(decimal.Decimal(value), int(scale) if scale else None)
        return _byte_buffer_hash(bytes(value))
    if kind is Type.ARRAY and schema.value_schema is not None:
        h = 1
        for item in value:
            h = (31 * h + java_hash(schema.value_schema, item)) & _M32
        return int32(h)
    if kind is Type.MAP and schema.key_schema is not None and schema.value_schema is not None:
        total = 0
        for k, v in value.items():
            total += java_hash(schema.key_schema, k) ^ java_hash(schema.value_schema, v)
        return int32(total)
    raise JavaHashError(
        f"a {kind.value} value (schema {schema.name or kind.value}) has no Java hash that "
        "is the same in every JVM"
    )


def _schemaless_hash(value: Any) -> int:
    if isinstance(value, bool):
        return 1231 if value else 1237
    if isinstance(value, int):
        return _long_hash(value)
    if isinstance(value, float):
        return _double_hash(value)
    if isinstance(value, str):
        return _string_hash(value)
    if isinstance(value, decimal.Decimal):
        return _decimal_hash(value, None)
    if isinstance(value, bytes | bytearray | memoryview):
        return _byte_buffer_hash(bytes(value))
    if isinstance(value, list):
        h = 1
        for item in value:
            h = (31 * h + _schemaless_hash(item)) & _M32
        return int32(h)
    raise JavaHashError(f"a {type(value).__name__} value has no Java hash to reproduce")


# -- Debezium's MurmurHash3 (io.debezium.util.MurmurHash3, seed 9001) ---------------------------

_SEED = 9001
_C1 = 0x87C37B91114253D5
_C2 = 0x4CF5AD432745937F


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M64


def _fmix(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & _M64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & _M64
    return k ^ (k >> 33)


def _murmur64(data: bytes, seed: int = _SEED) -> int:
    """``MurmurHash3_x64_64``: Debezium's variant, whose mixing constants change per block
    (``bmix``) and whose tail bytes are sign-extended, as Java's ``(long) byte`` is."""
    h1 = (0x9368E53C2F6AF274 ^ seed) & _M64
    h2 = (0x586DCD208F7CD3FD ^ seed) & _M64
    c1, c2 = _C1, _C2

    def bmix(k1: int, k2: int) -> None:
        nonlocal h1, h2, c1, c2
        k1 = (_rotl((k1 * c1) & _M64, 23) * c2) & _M64
        h1 = ((h1 ^ k1) + h2) & _M64
        h2 = _rotl(h2, 41)
        k2 = (_rotl((k2 * c2) & _M64, 23) * c1) & _M64
        h2 = ((h2 ^ k2) + h1) & _M64
        h1 = (h1 * 3 + 0x52DCE729) & _M64
        h2 = (h2 * 3 + 0x38495AB5) & _M64
        c1 = (c1 * 5 + 0x7B7D159C) & _M64
        c2 = (c2 * 5 + 0x6BCE6396) & _M64

    n = len(data)
    full = n // 16 * 16
    for i in range(0, full, 16):
        bmix(
            int.from_bytes(data[i : i + 8], "little"),
            int.from_bytes(data[i + 8 : i + 16], "little"),
        )
    tail = data[full:]
    if tail:
        k1 = k2 = 0
        for j, b in enumerate(tail):
            signed = (b - 256 if b > 127 else b) & _M64  # Java's (long) byte
            if j < 8:
                k1 ^= (signed << (8 * j)) & _M64
            else:
                k2 ^= (signed << (8 * (j - 8))) & _M64
        bmix(k1, k2)
    h2 ^= n
    h1 = (h1 + h2) & _M64
    h2 = (h2 + h1) & _M64
    h1, h2 = _fmix(h1), _fmix(h2)
    h1 = (h1 + h2) & _M64
    return h1


def _murmur32(data: bytes) -> int:
    """``MurmurHash3_x64_32``: the high half of the 64-bit hash, as a Java ``int``."""
    return int32(_murmur64(data) >> 32)


def _java_utf8(text: str) -> bytes:
    """The bytes Debezium's string murmur hashes: UTF-8 of each code point, with an unpaired
    surrogate as ``?`` (its ``INVALID_CHAR``)."""
    try:
        return text.encode()
    except UnicodeEncodeError:
        # pair up what Java would read as surrogate pairs, then mark the lone ones
        paired = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
        return "".join("?" if 0xD800 <= ord(c) <= 0xDFFF else c for c in paired).encode()


def murmur_hash(schema: Schema | None, value: Any) -> int:
    """Debezium's ``MurmurHash3.hash(Object)``: a ``String`` by its UTF-8 bytes, anything
    else by the murmur of its Java ``hashCode`` (four little-endian bytes). Bytes arrive from
    Debezium's converters as a ``ByteBuffer``, not a ``byte[]``, so they take the second
    path too."""
    if value is None:
        return _murmur32((0).to_bytes(4, "little"))
    if isinstance(value, str) and (schema is None or schema.type is Type.STRING):
        return _murmur32(_java_utf8(value))
    return _murmur32((java_hash(schema, value) & _M32).to_bytes(4, "little"))


HASH_FUNCTIONS: dict[str, Callable[[Schema | None, Any], int]] = {
    "java": java_hash,
    "murmur": murmur_hash,
}


def hash_map_order(keys: list[str]) -> list[str]:
    """The order a ``java.util.HashMap`` built by putting ``keys`` in turn iterates them:
    by bucket (``hashCode ^ hashCode >>> 16`` masked to the table size, which doubles past
    three quarters full from 16), insertion order within a bucket. Debezium counts a
    transaction's events per table in a HashMap, so its END record lists them in this
    order."""
    size = 16
    while len(keys) > size * 3 // 4:
        size *= 2

    def bucket(key: str) -> int:
        h = _string_hash(key) & _M32
        return (h ^ (h >> 16)) & (size - 1)

    return sorted(keys, key=bucket)  # stable: insertion order within a bucket
