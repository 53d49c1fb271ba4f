"""Java's text for numbers, where a transform's output must match what Kafka Connect writes
(``Cast`` to string, header values): a record compared byte for byte with the JVM's differs
otherwise (``1.0E10`` against Python's ``10000000000.0``)."""

from __future__ import annotations

import math
import struct as binary
from decimal import Decimal


def _shortest_float32(value: float) -> str:
    """The fewest significant digits that read back as the same float32 (``Float.toString``)."""
    packed = binary.pack("<f", value)
    for digits in range(1, 10):
        text = f"{value:.{digits}g}"
        try:
            if binary.pack("<f", float(text)) == packed:
                return text
        except OverflowError:  # rounded up past the largest float32
            continue
    return repr(value)


def java_float_text(value: float, float32: bool = False) -> str:
    """``Double.toString`` / ``Float.toString`` (Java 19+, shortest digits): plain notation
    with at least one decimal for 1e-3 <= |x| < 1e7, else ``d.dddE±n``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign, digits, exponent = Decimal(
        _shortest_float32(value) if float32 else repr(value)
    ).as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits)).rstrip("0") or "0"
    point = len(digits) + exponent  # digits before the decimal point
    lead = "-" if sign else ""
    if 1e-3 <= abs(value) < 1e7:
        if point <= 0:
            return f"{lead}0.{'0' * -point}{text}"
        whole, frac = text[:point].ljust(point, "0"), text[point:]
        return f"{lead}{whole}.{frac or '0'}"
    return f"{lead}{text[0]}.{text[1:] or '0'}E{point - 1}"
