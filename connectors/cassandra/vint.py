"""Cassandra's variable-length integers (``VIntCoding``): the count of leading 1 bits of the
first byte is the number of extra bytes; the rest of the first byte and the extra bytes are
the value, big-endian. Signed vints are zig-zag encoded."""

from __future__ import annotations


def read_unsigned_vint(data: bytes, pos: int) -> tuple[int, int]:
    """(value, position after it). Raises IndexError past the end of ``data``."""
    first = data[pos]
    if first < 0x80:
        return first, pos + 1
    extra = 0
    mask = 0x80
    while first & mask:
        extra += 1
        mask >>= 1
    end = pos + 1 + extra
    if end > len(data):
        raise IndexError("vint runs past the end of the buffer")
    value = first & (0xFF >> extra)
    for b in data[pos + 1 : end]:
        value = (value << 8) | b
    return value, end


def read_signed_vint(data: bytes, pos: int) -> tuple[int, int]:
    raw, pos = read_unsigned_vint(data, pos)
    return (raw >> 1) ^ -(raw & 1), pos
