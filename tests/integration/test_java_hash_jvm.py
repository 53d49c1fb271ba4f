"""The JVM hashes PartitionRouting routes by, computed by a running JVM and by tidemark.

A small Java program (compiled by the JDK's ``javac``, which setup installs) reads one value per
line, builds the Java object Debezium's converters deliver for it (``String``, ``Integer``,
``Long``, ``Double``, ``BigDecimal``, ``ByteBuffer``, ``java.util.Date``, ``List``), prints its
``hashCode()`` and Debezium's own ``io.debezium.util.MurmurHash3.hash`` from Debezium Server
3.6's ``debezium-util`` jar. tidemark's :func:`java_hash` and :func:`murmur_hash` must give the
same two integers for every value: strings of every length from 0 to 40 (murmur's 16-byte
blocks and each tail length), non-ASCII, astral and lone-surrogate text, integer edges, NaN and
negative zero, decimals of several scales and sizes, bytes with the high bit set.

Never skipped: if Debezium Server or its Java runtime cannot be resolved, the test fails.
"""

from __future__ import annotations

import decimal
import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any

from cdc.schema import logical
from cdc.schema.model import (
    BOOLEAN,
    BYTES,
    FLOAT32,
    FLOAT64,
    INT16,
    INT32,
    INT64,
    STRING,
    Schema,
    array,
)
from cdc.transforms.java_hash import hash_map_order, java_hash, murmur_hash
from tests.integration.debezium_server import debezium_server

PROBE = r"""
import io.debezium.util.MurmurHash3;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;

public class HashProbe {
    static String utf16(String hex) {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < hex.length(); i += 4) {
            b.append((char) Integer.parseInt(hex.substring(i, i + 4), 16));
        }
        return b.toString();
    }

    static Object value(String kind, String text) {
        switch (kind) {
            case "string": return utf16(text);
            case "int16": return Short.valueOf(text);
            case "int32": return Integer.valueOf(text);
            case "int64": return Long.valueOf(text);
            case "boolean": return Boolean.valueOf(text);
            case "float64": return Double.longBitsToDouble(Long.parseUnsignedLong(text, 16));
            case "float32": return Float.intBitsToFloat(Integer.parseUnsignedInt(text, 16));
            case "decimal": {
                String[] p = text.split(":");
                return new BigDecimal(new BigInteger(p[0]), Integer.parseInt(p[1]));
            }
            case "bytes": return ByteBuffer.wrap(HexFormat.of().parseHex(text));
            case "timestamp": return new java.util.Date(Long.parseLong(text));
            case "ints": {
                List<Object> out = new ArrayList<>();
                for (String s : text.split(",")) out.add(Integer.valueOf(s));
                return out;
            }
            default: throw new IllegalArgumentException(kind);
        }
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
        MurmurHash3 murmur = MurmurHash3.getInstance();
        String line;
        while ((line = in.readLine()) != null) {
            int space = line.indexOf(' ');
            if (line.startsWith("order ")) {
                java.util.Map<String, Long> m = new java.util.HashMap<>();
                for (String k : line.substring(space + 1).split(",")) m.put(k, 1L);
                System.out.println(String.join(",", m.keySet()));
                continue;
            }
            Object o = value(line.substring(0, space), line.substring(space + 1));
            System.out.println(o.hashCode() + " " + murmur.hash(o));
        }
    }
}
"""


def _utf16_hex(text: str) -> str:
    return text.encode("utf-16-be", "surrogatepass").hex()


def cases() -> list[tuple[str, str, Schema, Any]]:
    """(kind, the probe's text, schema, tidemark's value) for every value checked."""
    out: list[tuple[str, str, Schema, Any]] = []
    texts = ["x" * n for n in range(41)]
    texts += ["héllo wörld", "日本語のテキスト", "😀 emoji 🎉", "a\ud800b", "\udc00", "\ud83d"]
    texts += ["€" * n for n in range(1, 20)]  # 3 UTF-8 bytes each: every tail again
    out += [("string", _utf16_hex(t), STRING, t) for t in texts]
    for v in (0, 1, -1, 32767, -32768):
        out.append(("int16", str(v), INT16, v))
    for v in (0, 1, -1, 2**31 - 1, -(2**31), 123456789):
        out.append(("int32", str(v), INT32, v))
    for v in (0, 1, -1, 2**32, 2**63 - 1, -(2**63), 9000000000, -123456789012345):
        out.append(("int64", str(v), INT64, v))
    out += [("boolean", "true", BOOLEAN, True), ("boolean", "false", BOOLEAN, False)]
    for f in (0.0, -0.0, 1.5, -3.9, 1e10, 1e-300, float("inf"), float("nan"), 0.1):
        bits = struct.unpack(">Q", struct.pack(">d", f))[0]
        out.append(("float64", f"{bits:x}", FLOAT64, f))
    for f in (0.0, 2.5, -1.25, float("nan")):
        bits = struct.unpack(">I", struct.pack(">f", f))[0]
        out.append(("float32", f"{bits:x}", FLOAT32, f))
    for text, scale in (
        ("10.50", 2),
        ("-10.50", 2),
        ("0", 0),
        ("0.00", 2),
        ("123456789012345678901234567890.123", 3),
        ("-99999999999999999999.9", 1),
        ("4294967296", 0),
        ("-4294967295", 0),
        ("9" * 1500 + ".25", 2),  # beyond any default context's precision
    ):
        d = decimal.Decimal(text)
        unscaled = int(d.scaleb(scale, context=decimal.Context(prec=10_000)))
        out.append(("decimal", f"{unscaled}:{scale}", logical.connect_decimal(scale), d))
    for raw in (b"", b"\x00", b"\x01\x02", b"\xff\x80\x7f", bytes(range(256))):
        out.append(("bytes", raw.hex(), BYTES, raw))
    for ms in (0, 1704450030123, -1, 2**40):
        out.append(("timestamp", str(ms), logical.connect_timestamp(), ms))
    out.append(("ints", "1,2,3", array(INT32), [1, 2, 3]))
    return out


def test_java_and_murmur_hashes_match_the_jvm(tmp_path: Path) -> None:
    home, java = debezium_server()
    util = sorted((home / "lib").glob("debezium-util-*.jar"))
    assert util, f"no debezium-util jar in {home / 'lib'}"
    javac = shutil.which("javac")
    assert javac, "javac not found: install openjdk-17-jdk-headless (scripts/setup.sh does)"
    source = tmp_path / "HashProbe.java"
    source.write_text(PROBE)
    subprocess.run(
        [javac, "-cp", str(util[0]), "-d", str(tmp_path), str(source)], check=True, timeout=120
    )
    checked = cases()
    proc = subprocess.run(
        [java, "-cp", f"{util[0]}:{tmp_path}", "HashProbe"],
        input="\n".join(f"{kind} {text}" for kind, text, _, _ in checked) + "\n",
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == len(checked)
    wrong = []
    for (kind, text, schema, value), line in zip(checked, lines, strict=True):
        jvm = tuple(int(part) for part in line.split())
        ours = (java_hash(schema, value), murmur_hash(schema, value))
        if ours != jvm:
            wrong.append(f"{kind} {text[:60]}: JVM {jvm}, tidemark {ours}")
    assert not wrong, f"{len(wrong)} of {len(checked)} values hash differently:\n" + "\n".join(
        wrong
    )


def test_hash_map_order_is_the_jvms(tmp_path: Path) -> None:
    """Debezium lists a transaction's per-table counts in its HashMap's order."""
    home, java = debezium_server()
    util = sorted((home / "lib").glob("debezium-util-*.jar"))
    javac = shutil.which("javac")
    assert util and javac
    source = tmp_path / "HashProbe.java"
    source.write_text(PROBE)
    subprocess.run(
        [javac, "-cp", str(util[0]), "-d", str(tmp_path), str(source)], check=True, timeout=120
    )
    sets = [
        ["public.tx_a", "public.tx_b"],
        ["s1.a", "s2.a"],
        [f"inventory.t{i}" for i in range(40)],  # past two resizes
        ["rs0.db.orders", "rs0.db.customers", "rs0.db.items"],
    ]
    proc = subprocess.run(
        [java, "-cp", f"{util[0]}:{tmp_path}", "HashProbe"],
        input="".join(f"order {','.join(keys)}\n" for keys in sets),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert proc.stdout.splitlines() == [",".join(hash_map_order(keys)) for keys in sets]
