"""Cassandra's variable-length integers (``VIntCoding``): the count of leading 1 bits of the
first byte is the number of extra bytes; the rest of the first byte and the extra bytes are
the value, big-endian. Signed vints are zig-zag encoded."""

from __future__ import annotations

#: extra bytes after a first byte (its leading 1 bits), by first byte
VINT_EXTRA = bytes(8 - (b ^ 0xFF).bit_length() for b in range(256))
#: the value bits of a vint with n extra bytes, read whole as one big-endian integer: the
#: first byte's bits after the length prefix (none when n is 8) and the n bytes
VINT_MASK = tuple((1 << (8 * n + max(0, 7 - n))) - 1 for n in range(9))


def read_unsigned_vint(data: bytes, pos: int) -> tuple[int, int]:
    """(value, position after it). Raises IndexError past the end of ``data``."""
    first = data[pos]
    if first < 0x80:
        return first, pos + 1
    extra = VINT_EXTRA[first]
    end = pos + 1 + extra
    if end > len(data):
        raise IndexError("vint runs past the end of the buffer")
    return int.from_bytes(data[pos:end], "big") & VINT_MASK[extra], end


def read_signed_vint(data: bytes, pos: int) -> tuple[int, int]:
    raw, pos = read_unsigned_vint(data, pos)
    return (raw >> 1) ^ -(raw & 1), pos
