"""The sort keys the apply job compares Cassandra range deletes by where Spark's own order of
the lake's value is not Cassandra's (cdc/apply/ranges.py ``sort_key``), computed by Spark and
checked against Python's order of the same values: a ``decimal``/``varint`` held as exact text
must order as a number (``-1.55 < -1.5 < -0.001 < 0 < 0.001 < 1.5 < 1.55 < 10``), and an
``inet`` by its address bytes as Cassandra's InetAddressType does, whichever of tidemark's and
Debezium's texts the lake holds. The end-to-end checks against the node's own deletes are in
test_apply_cassandra.py and test_apply_debezium_cassandra.py."""

from __future__ import annotations

import decimal
import ipaddress
import random
from typing import Any

import pytest

from cdc.apply import ranges

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


def _keys(spark: Any, texts: list[str | None], key: str) -> list[str | None]:
    from pyspark.sql import functions as F

    df = spark.createDataFrame([(i, t) for i, t in enumerate(texts)], "i int, v string")
    rows = df.select("i", ranges.sort_key(F.col("v"), key).alias("k")).collect()
    return [r["k"] for r in sorted(rows, key=lambda r: r["i"])]


def _decimal_texts(rng: random.Random) -> list[str]:
    fixed = ["0", "-0", "0.000", "-0.0", "1", "1.0", "1.00", "10", "-10", "0.001", "-0.001"]
    fixed += ["1.5", "1.55", "-1.5", "-1.55", "12345678901234567890123456789012345678901"]
    fixed += ["-12345678901234567890.5", "0." + "0" * 40 + "1", "-" + "9" * 45, "99.99"]
    out = list(fixed)
    for _ in range(300):
        digits = str(rng.randint(0, 10 ** rng.randint(1, 25)))
        scale = rng.randint(0, 30)
        value = decimal.Decimal(digits).scaleb(-scale) * rng.choice((1, -1))
        out.append(format(value, "f"))
    return out


def test_decimal_text_keys_order_as_numbers(spark: Any) -> None:
    texts = _decimal_texts(random.Random(25))
    keys = _keys(spark, [*texts, None], "number")
    assert keys[-1] is None
    values = [decimal.Decimal(t) for t in texts]
    for i in range(len(texts)):
        for j in range(i + 1, len(texts)):
            a, b, ka, kb = values[i], values[j], keys[i], keys[j]
            assert ka is not None and kb is not None
            expected = (a > b) - (a < b)
            assert (ka > kb) - (ka < kb) == expected, (texts[i], texts[j], ka, kb)


def _inet_texts(rng: random.Random) -> list[tuple[str, bytes]]:
    """(a text as the lake may hold it, the bytes Cassandra stores)."""
    out = []
    v4 = [ipaddress.IPv4Address(rng.getrandbits(32)) for _ in range(40)]
    v4 += [ipaddress.IPv4Address(a) for a in ("0.0.0.0", "10.0.0.1", "255.255.255.255")]
    v6 = [ipaddress.IPv6Address(rng.getrandbits(128)) for _ in range(40)]
    v6 += [ipaddress.IPv6Address(a) for a in ("::", "::1", "1::", "fe80::1:2", "0a00:1::")]
    v6 += [ipaddress.IPv6Address(a) for a in ("::ffff:10.0.0.1", "::10.0.0.1", "2001:db8::")]
    v6 += [ipaddress.IPv6Address((rng.getrandbits(32) << 96) | rng.getrandbits(16)) for _ in "ab"]
    for a in [*v4, *v6]:
        out.append((str(a), a.packed))  # tidemark's (Python's compressed text)
        if isinstance(a, ipaddress.IPv6Address):
            java = ":".join(f"{int(g, 16):x}" for g in a.exploded.split(":"))
            out.append(("/" + java, a.packed))  # Debezium's (Java's InetAddress.toString)
            if a.ipv4_mapped is None:
                out.append((a.exploded.upper(), a.packed))
        else:
            out.append(("/" + str(a), a.packed))
    mapped = ipaddress.IPv6Address("::ffff:10.1.2.3").packed
    out.append(("::ffff:10.1.2.3", mapped))  # Python 3.13's form of a mapped address
    out.append(("1:2:3:4:5:6:1.2.3.4", ipaddress.IPv6Address("1:2:3:4:5:6:1.2.3.4").packed))
    return out


def test_inet_keys_order_as_cassandra_compares_the_bytes(spark: Any) -> None:
    cases = _inet_texts(random.Random(25))
    keys = _keys(spark, [t for t, _ in cases], "inet")
    for (text, packed), key in zip(cases, keys, strict=True):
        assert key == packed.hex(), text
    # and so the order of the keys as text is the bytes' unsigned order (shorter first on a
    # common prefix): an IPv6 address below 0a00:: sorts before 10.0.0.1
    by_key = [p for _, p in sorted(zip(keys, (p for _, p in cases), strict=True))]
    assert by_key == sorted(p for _, p in cases)
