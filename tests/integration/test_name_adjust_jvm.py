"""Schema and field names adjusted by Debezium's own ``SchemaNameAdjuster`` on a JVM and by
tidemark (cdc/schema/name_adjust.py), for ``schema.name.adjustment.mode``,
``field.name.adjustment.mode`` and ``sanitize.field.names``.

A small Java program (compiled by ``javac``) reads names as UTF-16 hex, one per line, and prints
what ``AVRO``, ``AVRO_UNICODE``, ``AVRO_FIELD_NAMER`` and ``AVRO_UNICODE_FIELD_NAMER`` of
Debezium Server 3.6's ``debezium-connector-common`` make of each; tidemark must print the
same four names: typical topic-derived schema names, every printable ASCII character first and
inside a name, digits of other scripts, characters whose hex has one to four digits, astral
characters and random mixes.

Never skipped: if Debezium Server or its Java runtime cannot be resolved, the test fails.
"""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

from cdc.schema.name_adjust import adjust, field_name
from tests.integration.debezium_server import debezium_server

PROBE = r"""
import io.debezium.schema.SchemaNameAdjuster;
import java.io.BufferedReader;
import java.io.InputStreamReader;

public class NameProbe {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
        SchemaNameAdjuster[] all = {
            SchemaNameAdjuster.AVRO, SchemaNameAdjuster.AVRO_UNICODE,
            SchemaNameAdjuster.AVRO_FIELD_NAMER, SchemaNameAdjuster.AVRO_UNICODE_FIELD_NAMER,
        };
        StringBuilder out = new StringBuilder();
        for (String line; (line = in.readLine()) != null; ) {
            StringBuilder name = new StringBuilder();
            for (int i = 0; i < line.length(); i += 4) {
                name.append((char) Integer.parseInt(line.substring(i, i + 4), 16));
            }
            for (SchemaNameAdjuster adjuster : all) {
                String adjusted = adjuster.adjust(name.toString());
                for (int i = 0; i < adjusted.length(); i++) {
                    out.append(String.format("%04x", (int) adjusted.charAt(i)));
                }
                out.append(' ');
            }
            out.append("|\n");
        }
        System.out.print(out);
    }
}
"""


def _hex(text: str) -> str:
    return text.encode("utf-16-be", "surrogatepass").hex()


def _text(hex_text: str) -> str:
    return bytes.fromhex(hex_text).decode("utf-16-be", "surrogatepass")


def names() -> list[str]:
    printable = [chr(c) for c in range(0x20, 0x7F)]
    fixed = [
        "",
        "server1.inventory.customers.Value",
        "prod.db1.public.order_items.Envelope",
        "1-server.my-db.tab.le.Key",
        "my-server.dbo.Order Details.Value",
        "order_id",
        "1col",
        "_x",
        "é",
        "ā",
        "\t",
        "中文",
        "😀",
        "x😀y",
        "٣x",
        "x٣",
        "\x00a",
        "a\ud800b",  # a lone surrogate, as Java strings can hold
    ]
    rng = random.Random(20261128)
    alphabet = [*printable, "é", "ß", "ā", "Ω", "中", "😀", "٣", "\u0085", "\u2028", "\ufeff"]
    mixes = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12))) for _ in range(200)]
    return [*fixed, *printable, *(f"a{c}" for c in printable), *mixes]


def test_names_are_adjusted_as_debeziums_schema_name_adjuster_does(tmp_path: Path) -> None:
    home, java = debezium_server()
    lib = home / "lib"
    jars = [
        sorted(lib.glob(f"{name}-*.jar"))
        for name in (
            "debezium-connector-common",
            "debezium-api",
            "debezium-util",
            "connect-api",
            "kafka-clients",
            "slf4j-api",
        )
    ]
    assert all(jars), f"Debezium Server's lib lacks one of the jars the probe needs: {lib}"
    classpath = ":".join(str(found[0]) for found in jars)
    javac = shutil.which("javac")
    assert javac, "javac not found: install openjdk-17-jdk-headless (scripts/setup.sh does)"
    source = tmp_path / "NameProbe.java"
    source.write_text(PROBE)
    subprocess.run(
        [javac, "-cp", classpath, "-d", str(tmp_path), str(source)], check=True, timeout=120
    )
    checked = names()
    proc = subprocess.run(
        [java, "-cp", f"{classpath}:{tmp_path}", "NameProbe"],
        input="\n".join(_hex(n) for n in checked) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == len(checked)
    wrong = []
    for name, line in zip(checked, lines, strict=True):
        jvm = tuple(_text(part) for part in line.split(" ")[:4])
        ours = (
            adjust(name, "avro"),
            adjust(name, "avro_unicode"),
            field_name(name, "avro"),
            field_name(name, "avro_unicode"),
        )
        if ours != jvm:
            wrong.append(f"{name!r}: JVM {jvm}, tidemark {ours}")
    assert not wrong, f"{len(wrong)} of {len(checked)} names differ:\n" + "\n".join(wrong)
