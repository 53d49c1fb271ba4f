"""Debezium Server's offset file, read and written, so a connector can move between Debezium
Server and tidemark without a new snapshot.

Debezium Server (and the embedded engine) keep offsets with Kafka's
``FileOffsetBackingStore``: the file is a ``java.util.HashMap<byte[], byte[]>`` written by
Java's ``ObjectOutputStream``. Each key is the JSON ``["<engine name>", {partition}]`` and
each value the JSON offset (null once deleted): Kafka Connect's layout, the same tidemark's
Kafka offset store uses.

Only that shape is read: the stream header, one HashMap object with its two fields and its
block of (capacity, size), then ``size`` pairs of byte arrays or nulls. Anything else (another
class, a nested object, trailing bytes) is an error naming the byte where it stopped, never a
guess: deserializing arbitrary Java objects is exactly what this must not do. The writer
emits what Java's own ``HashMap.writeObject`` does for the same entries, so Debezium Server
reads it back (tested against the real one).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from cdc.errors import OffsetError
from cdc.offsets.store import offset_key, offset_value, parse_offset_key, parse_offset_value

_MAGIC = b"\xac\xed\x00\x05"
_TC_NULL, _TC_REFERENCE, _TC_CLASSDESC, _TC_OBJECT = 0x70, 0x71, 0x72, 0x73
_TC_ARRAY, _TC_BLOCKDATA, _TC_ENDBLOCKDATA = 0x75, 0x77, 0x78
_BASE_HANDLE = 0x7E0000
_HASHMAP = "java.util.HashMap"
_HASHMAP_UID = 362498820763181265
_BYTES = "[B"
_BYTES_UID = -5984413125824719648
_SC_WRITE_METHOD, _SC_SERIALIZABLE = 0x01, 0x02
#: a larger file is not an offset file of any sane engine
MAX_FILE_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class StoredOffset:
    """One entry of the file: the engine (connector) name, the source partition, and the
    offset (None where it was deleted)."""

    name: str
    partition: dict[str, Any]
    offset: dict[str, Any] | None


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0
        self.handles: list[str] = []  # what each handle names: "class:<name>" or "object"

    def fail(self, what: str) -> OffsetError:
        return OffsetError(
            f"not a Debezium Server offset file (FileOffsetBackingStore): {what} at byte {self.at}"
        )

    def take(self, n: int) -> bytes:
        if n < 0 or self.at + n > len(self.data):
            raise self.fail(f"it ends inside a value of {n} bytes")
        out = self.data[self.at : self.at + n]
        self.at += n
        return out

    def u8(self) -> int:
        return self.take(1)[0]

    def u16(self) -> int:
        return int(struct.unpack(">H", self.take(2))[0])

    def i32(self) -> int:
        return int(struct.unpack(">i", self.take(4))[0])

    def i64(self) -> int:
        return int(struct.unpack(">q", self.take(8))[0])

    def utf(self) -> str:
        raw = self.take(self.u16())
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail("a class or field name that is not text") from None

    def class_desc(self, expected: str, uid: int) -> None:
        tag = self.u8()
        if tag == _TC_REFERENCE:
            handle = self.i32() - _BASE_HANDLE
            if not 0 <= handle < len(self.handles) or self.handles[handle] != f"class:{expected}":
                raise self.fail(f"a reference that is not the class {expected}")
            return
        if tag != _TC_CLASSDESC:
            raise self.fail(f"tag 0x{tag:02x} where the class {expected} was expected")
        name = self.utf()
        if name != expected or self.i64() != uid:
            raise self.fail(f"class {name!r} where {expected} was expected")
        self.handles.append(f"class:{expected}")
        flags = self.u8()
        fields = [(chr(self.u8()), self.utf()) for _ in range(self.u16())]
        if expected == _HASHMAP:
            if flags != _SC_WRITE_METHOD | _SC_SERIALIZABLE or fields != [
                ("F", "loadFactor"),
                ("I", "threshold"),
            ]:
                raise self.fail("a HashMap class description of another layout")
        elif flags != _SC_SERIALIZABLE or fields:
            raise self.fail("a byte array class description of another layout")
        if self.u8() != _TC_ENDBLOCKDATA or self.u8() != _TC_NULL:
            raise self.fail(f"class annotations or a superclass on {expected}")

    def bytes_or_null(self) -> bytes | None:
        tag = self.u8()
        if tag == _TC_NULL:
            return None
        if tag != _TC_ARRAY:
            raise self.fail(f"tag 0x{tag:02x} where a byte array was expected")
        self.class_desc(_BYTES, _BYTES_UID)
        self.handles.append("object")
        return self.take(self.i32())

    def entries(self) -> list[tuple[bytes | None, bytes | None]]:
        if self.take(4) != _MAGIC:
            raise self.fail("no Java serialization header")
        if self.u8() != _TC_OBJECT:
            raise self.fail("no object")
        self.class_desc(_HASHMAP, _HASHMAP_UID)
        self.handles.append("object")
        self.take(8)  # loadFactor, threshold: Java recomputes both when reading
        if self.u8() != _TC_BLOCKDATA or self.u8() != 8:
            raise self.fail("no HashMap size block")
        self.i32()  # capacity
        size = self.i32()
        if size < 0:
            raise self.fail("a negative entry count")
        pairs = [(self.bytes_or_null(), self.bytes_or_null()) for _ in range(size)]
        if self.u8() != _TC_ENDBLOCKDATA:
            raise self.fail("no end of the HashMap's data")
        if self.at != len(self.data):
            raise self.fail("bytes after the HashMap")
        return pairs


def read_entries(data: bytes) -> list[tuple[bytes | None, bytes | None]]:
    """The raw (key, value) byte pairs of an offset file's content."""
    if len(data) > MAX_FILE_BYTES:
        raise OffsetError(f"offset file of {len(data)} bytes is larger than {MAX_FILE_BYTES}")
    return _Reader(data).entries()


def write_entries(pairs: Iterable[tuple[bytes | None, bytes | None]]) -> bytes:
    """What ``HashMap<byte[], byte[]>.writeObject`` writes for ``pairs``."""
    pairs = list(pairs)
    capacity = 16
    while len(pairs) > capacity * 0.75:
        capacity *= 2
    out = bytearray(_MAGIC)
    out += bytes([_TC_OBJECT, _TC_CLASSDESC])
    out += _utf(_HASHMAP) + struct.pack(">qB", _HASHMAP_UID, _SC_WRITE_METHOD | _SC_SERIALIZABLE)
    out += struct.pack(">H", 2) + b"F" + _utf("loadFactor") + b"I" + _utf("threshold")
    out += bytes([_TC_ENDBLOCKDATA, _TC_NULL])
    out += struct.pack(">fi", 0.75, int(capacity * 0.75))
    out += bytes([_TC_BLOCKDATA, 8]) + struct.pack(">ii", capacity, len(pairs))
    handle = _BASE_HANDLE + 2  # the HashMap's class and the map itself come first
    bytes_class: int | None = None
    for key, value in pairs:
        for item in (key, value):
            if item is None:
                out.append(_TC_NULL)
                continue
            out.append(_TC_ARRAY)
            if bytes_class is None:
                bytes_class = handle
                handle += 1
                out.append(_TC_CLASSDESC)
                out += _utf(_BYTES) + struct.pack(">qBH", _BYTES_UID, _SC_SERIALIZABLE, 0)
                out += bytes([_TC_ENDBLOCKDATA, _TC_NULL])
            else:
                out.append(_TC_REFERENCE)
                out += struct.pack(">i", bytes_class)
            handle += 1
            out += struct.pack(">i", len(item)) + item
    out.append(_TC_ENDBLOCKDATA)
    return bytes(out)


def _utf(text: str) -> bytes:
    raw = text.encode("utf-8")
    return struct.pack(">H", len(raw)) + raw


def parse_offsets(data: bytes) -> list[StoredOffset]:
    """The file's entries as names, partitions and offsets, in Kafka Connect's JSON layout:
    read with the offset stores' own key and value parsers."""
    out = []
    for i, (key, value) in enumerate(read_entries(data)):
        if key is None:
            raise OffsetError(f"entry {i + 1} of the offset file has no key")
        try:
            name, partition = parse_offset_key(key)
            offset = parse_offset_value(value)
        except OffsetError as exc:
            raise OffsetError(f"entry {i + 1} of the offset file: {exc}") from None
        out.append(StoredOffset(name, partition, offset))
    return out


def render_offsets(offsets: Iterable[StoredOffset]) -> bytes:
    """An offset file holding ``offsets``, encoded as the offset stores encode them."""
    return write_entries((offset_key(o.name, o.partition), offset_value(o.offset)) for o in offsets)
