"""Parity first: the same change, read from both topics, compared field by field.

Before any figure is trusted, messages at the same offsets of the tidemark and the Debezium
topic (both read one slot each, in WAL order, one partition) are parsed and diffed: key and
value, schema and payload, headers. Values that legitimately differ between two processes —
timing, WAL position, versions, the topic prefix — are compared for presence and null-ness
only. Every remaining difference must match an entry of :data:`KNOWN`, each of which is
written up in docs/benchmarks.md; anything else is *suspicious* and fails the run.
"""

from __future__ import annotations

import random
import re
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from bench.compare.common import Kafka

MISSING = "<absent>"


def _same_instant(tm: Any, dbz: Any) -> bool:
    """``2024-01-01T00:00:01Z`` and ``2024-01-01T00:00:01.000000Z`` are the same value."""
    if not (isinstance(tm, str) and isinstance(dbz, str)):
        return False

    def norm(v: str) -> str:
        return re.sub(
            r"(\d{2}:\d{2}:\d{2})(\.\d*?)0*(?=Z|[+-]\d{2}:?\d{2}$)",
            lambda m: m.group(1) + (m.group(2) if m.group(2) != "." else ""),
            v,
        )

    return norm(tm) == norm(dbz)


_SNAPSHOT_TRUE = {"true", "first", "first_in_data_collection", "last_in_data_collection", "last"}


def _same_snapshot_flag(tm: Any, dbz: Any) -> bool:
    """tidemark's boolean/"last" against Debezium 3.x's enum strings."""
    if tm is False or tm == "false":
        return bool(dbz == "false")
    if tm is True or tm in ("true", "last"):
        return dbz in _SNAPSHOT_TRUE
    return tm is None and dbz is None


@dataclass(frozen=True)
class Known:
    """A documented difference. ``path`` is a regex over the diff path; ``accept``, when set,
    must also hold for the pair of values (so e.g. only *equal instants* formatted
    differently are accepted, not different timestamps). ``cls`` is ``version`` for Debezium
    1.2 → 3.x contract changes (accepted), ``tidemark`` for tidemark deviations from the real
    Debezium that are reported for fixing (accepted unless ``--strict``)."""

    id: str
    cls: str
    path: str
    kind: str  # "extra" (only Debezium has it), "missing" (only tidemark), "value", or "*"
    why: str
    accept: Callable[[Any, Any], bool] | None = None

    def matches(self, d: Difference) -> bool:
        if self.kind not in ("*", d.kind) or re.fullmatch(self.path, d.path) is None:
            return False
        return self.accept is None or self.accept(d.tidemark, d.debezium)


_ROW = r"value\.(?:payload\.(?:before|after)|schema\.fields\.(?:before|after)\.fields)"


_MARIA_JSON = (
    "MariaDB JSON columns (LONGTEXT with CHECK (json_valid(col))): tidemark's DDL parser "
    "recognises the check and names the field io.debezium.data.Json (version 1), as for a "
    "MySQL JSON column; Debezium's MariaDB connector treats the column as LONGTEXT and "
    "writes a plain string schema. The string values are identical."
)


def _uuid_trailing_zero_bug(tm: Any, dbz: Any) -> bool:
    """Debezium's MariaDB connector reads a streamed UUID from the binlog bytes after the
    binlog client stripped trailing zero bytes, so it shifts right by a byte per zero."""
    try:
        raw = uuid.UUID(str(tm)).bytes
    except ValueError:
        return False
    return raw[-1] == 0 and str(uuid.UUID(int=int.from_bytes(raw.rstrip(b"\0"), "big"))) == dbz


# Debezium 3.x (here 3.6) against tidemark, which follows the Debezium 1.2 event contract.
KNOWN: tuple[Known, ...] = (
    Known(
        "K1",
        "version",
        r"value\.payload\.(ts_us|ts_ns)|value\.schema\.fields\.(ts_us|ts_ns)",
        "extra",
        "Envelope ts_us/ts_ns (processing time in µs/ns), added in Debezium 2.6 (DBZ-7107).",
    ),
    Known(
        "K2",
        "version",
        r"value\.payload\.source\.(ts_us|ts_ns|sequence)"
        r"|value\.schema\.fields\.source\.fields\.(ts_us|ts_ns|sequence)",
        "extra",
        "source.ts_us/ts_ns (commit time in µs/ns, 2.6, DBZ-7107) and source.sequence "
        "(the [last committed LSN, current LSN] pair as a string, 1.4+).",
    ),
    Known(
        "K3",
        "version",
        r"value\.payload\.transaction|value\.schema\.fields\.transaction",
        "extra",
        "The optional transaction block (id/total_order/data_collection_order) is always "
        "declared and written as null when provide.transaction.metadata is off.",
    ),
    Known(
        "K4",
        "version",
        r"value\.payload\.source\.(origin|origin_lsn)"
        r"|value\.schema\.fields\.source\.fields\.(origin|origin_lsn)",
        "extra",
        "source.origin/origin_lsn (the replication origin of the change), new in 3.x; null here.",
    ),
    Known(
        "K5",
        "version",
        r"value\.schema\.fields\.source\.fields\.snapshot\.(type|name|version|parameters|default)",
        "*",
        "source.snapshot: tidemark declares an optional boolean (default false), as the seed "
        "does; Debezium 3.x declares an io.debezium.data.Enum string (true, first, "
        "first_in_data_collection, last_in_data_collection, last, false, incremental).",
    ),
    Known(
        "K5",
        "version",
        r"value\.payload\.source\.snapshot",
        "value",
        'source.snapshot value: false ↔ "false"; true/"last" ↔ "true"/"first"/'
        '"last"/"*_in_data_collection".',
        _same_snapshot_flag,
    ),
    Known(
        "K6",
        "version",
        r"value\.schema\.version|value\.schema\.fields\.source\.version",
        "*",
        "Schema versions: the envelope is version 2 since 2.6 (DBZ-7107) and the "
        "io.debezium.connector.postgresql.Source struct carries version 1; the seed's schemas "
        "have no version.",
    ),
    Known(
        "K7",
        "version",
        _ROW + r"\.\w+",
        "value",
        "io.debezium.time.ZonedTimestamp pads the fraction to the column's precision since "
        "2.2 (DBZ-5996): 2024-01-01T00:00:01.000000Z where 1.2 (and tidemark) write "
        "2024-01-01T00:00:01Z. Accepted only when both denote the same instant.",
        _same_instant,
    ),
    # -- MariaDB (tidemark's MySQL connector against Debezium's MariaDbConnector) --------------
    Known(
        "K8",
        "version",
        r"value\.payload\.source\.connector",
        "value",
        "MariaDB: Debezium 3.x captures MariaDB with its own connector (io.debezium.connector."
        'mariadb, split from the MySQL connector in 2.x) and writes source.connector="mariadb";'
        ' in 1.2 the MySQL connector covered MariaDB and wrote "mysql", as tidemark does.',
        lambda tm, dbz: tm == "mysql" and dbz == "mariadb",
    ),
    Known(
        "K8",
        "version",
        r"value\.schema\.fields\.source\.name",
        "value",
        "MariaDB: the source struct is io.debezium.connector.mariadb.Source in 3.x, "
        "io.debezium.connector.mysql.Source in 1.2 (and tidemark).",
        lambda tm, dbz: (
            (tm, dbz)
            == ("io.debezium.connector.mysql.Source", "io.debezium.connector.mariadb.Source")
        ),
    ),
    Known(
        "K9",
        "version",
        r"value\.schema\.fields\.(before|after)\.fields\.\w+\.type",
        "value",
        "MySQL/MariaDB FLOAT: float64 in 1.x (the documented 1.x mapping, and tidemark's), "
        "float32 since Debezium 2.0 (DBZ-3865).",
        lambda tm, dbz: tm == "double" and dbz == "float",
    ),
    Known(
        "T4",
        "tidemark",
        r"value\.schema\.fields\.(before|after)\.fields\.\w+\.(name|version)",
        "missing",
        _MARIA_JSON,
        lambda tm, _dbz: tm in ("io.debezium.data.Json", 1),
    ),
    Known(
        "D1",
        "debezium",
        _ROW + r"\.\w+",
        "value",
        "MariaDB UUID streamed by Debezium: a UUID whose last byte is 0 comes out shifted "
        "(123e4567-…-426614174000 as 00123e45-…-564266141740), because the binlog client "
        "strips a fixed-length binary value's trailing zero bytes and the connector reads the "
        "rest as the number; tidemark writes the column's text, as both snapshots do.",
        _uuid_trailing_zero_bug,
    ),
    Known(
        "D2",
        "debezium",
        _ROW + r"\.\w+(\[\d+\])?",
        "value",
        "PostgreSQL dates Debezium reads wrongly in a snapshot (JDBC) or a streamed date[]: "
        "BC dates as the same day AD ('0044-03-15 BC' as -703383, the days of 0044-03-15, "
        "instead of -735160), and in a snapshot 'infinity' / '-infinity' as -622191234 / "
        "-625821272 days where Debezium's own streaming writes -2147472692 / -2147472691. "
        "tidemark writes what Debezium streams for the scalar column, on both paths.",
        lambda tm, dbz: _bc_read_as_ad(tm, dbz) or (tm, dbz) in _JDBC_INFINITY_DATES,
    ),
    Known(
        "D3",
        "debezium",
        r"value\.schema\.fields\.(before|after)\.fields\.\w+\.items\.(type|items)",
        "*",
        "PostgreSQL int[][] (a declared 2-D array): Debezium declares a flat array<int32> "
        "and writes each inner array as null ('{{1,2},{3,4}}' arrives as [null,null], the "
        "values are lost); tidemark declares array<array<int32>> and writes [[1,2],[3,4]].",
        lambda tm, _dbz: tm == "array" or (isinstance(tm, dict) and tm.get("type") == "int32"),
    ),
    Known(
        "D3",
        "debezium",
        _ROW + r"\.\w+\[\d+\]",
        "value",
        "The values of D3: Debezium writes null for every inner array of a 2-D array.",
        lambda tm, dbz: isinstance(tm, list) and dbz is None,
    ),
)


_JDBC_INFINITY_DATES = ((-2147472692, -622191234), (-2147472691, -625821272))


def _bc_read_as_ad(tm: Any, dbz: Any) -> bool:
    """``dbz`` is the day ``tm`` (a BC date, in epoch days) would be in the same year AD."""
    from connectors.postgres.types import civil_date

    if not (isinstance(tm, int) and isinstance(dbz, int)):
        return False
    year, month, day = civil_date(tm)
    return year <= 0 and civil_date(dbz) == (1 - year, month, day)


# Compared for presence and null-ness only: these differ between any two processes.
IGNORED_VALUES = (
    r"value\.payload\.(ts_ms|ts_us|ts_ns)",
    r"value\.payload\.source\.(version|name|ts_ms|ts_us|ts_ns|lsn|txId|xmin|sequence)",
)
# MariaDB snapshots: each contender records the binlog position at *its* snapshot, and the
# contenders snapshot one after the other while other sessions may write to the shared
# server. (Streaming events carry the position of the very same binlog event on both sides,
# so there file and pos are compared exactly.)
SNAPSHOT_POSITION = (r"value\.payload\.source\.(file|pos)",)
# Which record of a table carries "first"/"last" follows the read order (see check's by_key).
SNAPSHOT_MARKER = (r"value\.payload\.source\.snapshot",)
# The topic prefix appears in schema names ("<prefix>.public.t.Value") and source.name.
PREFIX_TOKEN = "<prefix>"


@dataclass
class Difference:
    """One kind of difference at one path; ``examples`` keeps the first few occurrences."""

    path: str
    kind: str  # extra | missing | value | order
    tidemark: Any
    debezium: Any
    count: int = 0
    examples: list[tuple[str, int, Any, Any]] = field(default_factory=list)
    known: str | None = None
    cls: str | None = None

    def describe(self) -> str:
        tag = f"{self.known} {self.cls}" if self.known else "SUSPICIOUS"
        ex = "; ".join(
            f"{t}@{o}: tidemark={_short(a)} debezium={_short(b)}"
            for t, o, a, b in (self.examples[:3] if self.known else self.examples[-3:])
        )
        return f"[{tag}] {self.kind} at {self.path} (x{self.count}): {ex}"


def _short(v: Any, n: int = 160) -> str:
    s = v if isinstance(v, str) else orjson.dumps(v).decode() if v is not MISSING else v
    return s if len(s) <= n else s[: n - 1] + "…"


def _normalise(raw: bytes | None, prefix: str) -> Any:
    if raw is None:
        return None
    text = raw.decode()
    # Only the prefix as a whole name component: "<prefix>.public..." and "<prefix>" alone.
    text = text.replace(f'"{prefix}.', f'"{PREFIX_TOKEN}.').replace(
        f'"{prefix}"', f'"{PREFIX_TOKEN}"'
    )
    return orjson.loads(text)


def _is_field_list(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, dict) and "field" in x for x in v)


def diff(
    tm: Any,
    dbz: Any,
    path: str,
    out: list[Difference],
    ignored: tuple[str, ...] = IGNORED_VALUES,
) -> None:
    """Structural diff; schema ``fields`` arrays are matched by field name (and their order
    compared separately), so one extra field does not shift every later one."""
    if any(re.fullmatch(p, path) for p in ignored):
        if (tm is None) != (dbz is None):
            out.append(Difference(path, "value", tm, dbz))
        return
    if isinstance(tm, dict) and isinstance(dbz, dict):
        for k in tm.keys() | dbz.keys():
            sub = f"{path}.{k}" if path else str(k)
            if k not in dbz:
                out.append(Difference(sub, "missing", tm[k], MISSING))
            elif k not in tm:
                out.append(Difference(sub, "extra", MISSING, dbz[k]))
            else:
                diff(tm[k], dbz[k], sub, out, ignored)
        return
    if _is_field_list(tm) and _is_field_list(dbz):
        tm_by = {x["field"]: x for x in tm}
        dbz_by = {x["field"]: x for x in dbz}
        for name in tm_by.keys() | dbz_by.keys():
            sub = f"{path}.{name}"
            if name not in dbz_by:
                out.append(Difference(sub, "missing", tm_by[name], MISSING))
            elif name not in tm_by:
                out.append(Difference(sub, "extra", MISSING, dbz_by[name]))
            else:
                diff(tm_by[name], dbz_by[name], sub, out, ignored)
        common = [x["field"] for x in tm if x["field"] in dbz_by]
        common_dbz = [x["field"] for x in dbz if x["field"] in tm_by]
        if common != common_dbz:
            out.append(Difference(f"{path}[order]", "order", common, common_dbz))
        return
    if isinstance(tm, list) and isinstance(dbz, list) and len(tm) == len(dbz):
        for i, (a, b) in enumerate(zip(tm, dbz, strict=True)):
            diff(a, b, f"{path}[{i}]", out, ignored)
        return
    if tm != dbz or type(tm) is not type(dbz):
        out.append(Difference(path, "value", tm, dbz))


def compare_message(
    tm_msg: Any,
    dbz_msg: Any,
    tm_prefix: str,
    dbz_prefix: str,
    ignored: tuple[str, ...] = IGNORED_VALUES,
) -> list[Difference]:
    out: list[Difference] = []
    tm_doc = {
        "key": _normalise(tm_msg.key(), tm_prefix),
        "value": _normalise(tm_msg.value(), tm_prefix),
        "headers": sorted(k for k, _ in (tm_msg.headers() or [])),
    }
    dbz_doc = {
        "key": _normalise(dbz_msg.key(), dbz_prefix),
        "value": _normalise(dbz_msg.value(), dbz_prefix),
        "headers": sorted(k for k, _ in (dbz_msg.headers() or [])),
    }
    diff(tm_doc, dbz_doc, "", out, ignored)
    return out


@dataclass
class ParityReport:
    compared: int = 0
    tables: dict[str, int] = field(default_factory=dict)
    differences: dict[tuple[str, str], Difference] = field(default_factory=dict)
    avg_value_bytes: dict[str, float] = field(default_factory=dict)
    strict: bool = False
    #: accept the ``version`` entries (1.2 -> 3.x); off when tidemark writes the 3.x envelope
    allow_version: bool = True

    def failing(self) -> list[Difference]:
        """Suspicious differences; with ``strict`` the reported tidemark deviations too."""
        return [
            d
            for d in self.differences.values()
            if d.known is None or (self.strict and d.cls == "tidemark")
        ]

    @property
    def ok(self) -> bool:
        return self.compared > 0 and not self.failing()

    def merge(self, found: Iterable[Difference], table: str, offset: int) -> None:
        """Fold one message pair's differences in. A (path, kind) is known only if *every*
        occurrence matches the same documented entry."""
        for d in found:
            known = next(
                (k for k in KNOWN if (self.allow_version or k.cls != "version") and k.matches(d)),
                None,
            )
            key = (d.path, d.kind)
            entry = self.differences.get(key)
            if entry is None:
                entry = self.differences[key] = Difference(d.path, d.kind, d.tidemark, d.debezium)
                entry.known, entry.cls = (known.id, known.cls) if known else (None, None)
            elif entry.known is not None and (known is None or known.id != entry.known):
                entry.known = entry.cls = None
            entry.count += 1
            if len(entry.examples) < 3 or (known is None and len(entry.examples) < 10):
                entry.examples.append((table, offset, d.tidemark, d.debezium))

    def summary(self) -> str:
        diffs = sorted(self.differences.values(), key=lambda d: (d.known or "~", d.path))
        n_failing = len(self.failing())
        lines = [
            f"parity: {self.compared} message pairs compared "
            f"({', '.join(f'{t}: {n}' for t, n in self.tables.items())}); "
            f"{len(diffs)} difference kinds, {n_failing} failing"
        ]
        lines += [f"  {d.describe()}" for d in diffs]
        if self.avg_value_bytes:
            lines.append(
                "  average bench_rows value size: "
                + ", ".join(f"{k} {v:.0f} B" for k, v in self.avg_value_bytes.items())
            )
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        return {
            "compared": self.compared,
            "tables": self.tables,
            "ok": self.ok,
            "avg_value_bytes": self.avg_value_bytes,
            "differences": [
                {
                    "path": d.path,
                    "kind": d.kind,
                    "known": d.known,
                    "class": d.cls,
                    "count": d.count,
                    "examples": [
                        {
                            "table": t,
                            "offset": o,
                            "tidemark": None if a is MISSING else a,
                            "debezium": None if b is MISSING else b,
                        }
                        for t, o, a, b in d.examples
                    ],
                }
                for d in self.differences.values()
            ],
        }


def _key_order(msg: Any) -> str:
    """A record's key payload as canonical JSON (the schema half names the topic prefix)."""
    raw = msg.key()
    if raw is None:
        return ""
    key = orjson.loads(raw)
    if isinstance(key, dict) and "payload" in key and "schema" in key:
        key = key["payload"]
    return orjson.dumps(key, option=orjson.OPT_SORT_KEYS).decode()


def sample_offsets(n: int, sample: int, seed: int = 8) -> list[int]:
    """The first and last messages plus an even random spread in between."""
    if n <= sample:
        return list(range(n))
    edge = min(20, sample // 4)
    rng = random.Random(seed)
    middle = rng.sample(range(edge, n - edge), sample - 2 * edge)
    return sorted({*range(edge), *range(n - edge, n), *middle})


def check(
    kafka: Kafka,
    tables: dict[str, int],
    tm_prefix: str,
    dbz_prefix: str,
    sample: int = 200,
    strict: bool = False,
    namespace: str = "public",
    also_ignored: tuple[str, ...] = (),
    allow_version: bool = True,
    by_key: bool = False,
) -> ParityReport:
    """Diff ``sample`` messages per table (all of them for small topics). ``namespace`` is
    the topic's middle part: the PostgreSQL schema, or the MariaDB database.
    ``also_ignored`` adds paths compared for presence only (e.g. :data:`SNAPSHOT_POSITION`).
    ``by_key``: a topic read whole is paired by record key, not by position. For snapshots:
    tidemark reads a table in primary-key order (its resumable offsets need one), Debezium
    in the table's physical order, so after an update the two orders differ; both hold
    one record per row. The first/last markers then sit on different rows, so
    ``source.snapshot`` is compared for presence only there. Sampled (large) topics are
    still paired by position."""
    ignored = IGNORED_VALUES + also_ignored
    rep = ParityReport(strict=strict, allow_version=allow_version)
    for table, count in tables.items():
        tm_topic = f"{tm_prefix}.{namespace}.{table}"
        dbz_topic = f"{dbz_prefix}.{namespace}.{table}"
        offsets = sample_offsets(count, sample)
        paths = ignored
        if len(offsets) == count:
            tm_msgs = kafka.read(tm_topic, 0, count)
            dbz_msgs = kafka.read(dbz_topic, 0, count)
            if by_key:
                tm_msgs = sorted(tm_msgs, key=_key_order)
                dbz_msgs = sorted(dbz_msgs, key=_key_order)
                paths = ignored + SNAPSHOT_MARKER
        else:
            tm_msgs = [kafka.read(tm_topic, o, 1)[0] for o in offsets]
            dbz_msgs = [kafka.read(dbz_topic, o, 1)[0] for o in offsets]
        for off, a, b in zip(offsets, tm_msgs, dbz_msgs, strict=True):
            rep.merge(compare_message(a, b, tm_prefix, dbz_prefix, paths), table, off)
        rep.compared += len(offsets)
        rep.tables[table] = rep.tables.get(table, 0) + len(offsets)
        if table == "bench_rows":
            for name, msgs in (("tidemark", tm_msgs), ("debezium", dbz_msgs)):
                sizes = [len(m.value()) for m in msgs if m.value() is not None]
                if sizes:
                    rep.avg_value_bytes[name] = sum(sizes) / len(sizes)
    return rep
