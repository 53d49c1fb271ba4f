"""GTID sets of both dialects, source filters and restart sets (connectors/mysql/gtid.py)."""

from __future__ import annotations

import pytest

from connectors.mysql.gtid import (
    GtidError,
    GtidSourceFilter,
    MariaDbGtidSet,
    MySqlGtidSet,
    parse_gtid_set,
    restart_gtid_set,
)

A = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
B = "19d69c1e-ae97-4b8c-a1ef-9e12ba966457"


def test_mysql_parse_print_and_normalise() -> None:
    s = MySqlGtidSet(f"{A.upper()}:1-3:5:4,\n{B}:7-9:10")
    assert str(s) == f"{B}:7-10,{A}:1-5"
    assert s.sources() == sorted([A, B])
    assert MySqlGtidSet("").is_empty() and str(MySqlGtidSet(None)) == ""


def test_mysql_tagged_gtids() -> None:
    s = MySqlGtidSet(f"{A}:1-3:tag1:5-6")
    assert s.contains(f"{A}:2") and s.contains(f"{A}:tag1:6") and not s.contains(f"{A}:5")
    assert str(s) == f"{A}:1-3:tag1:5-6"


def test_mysql_contains_add_and_containment() -> None:
    s = MySqlGtidSet(f"{A}:1-3")
    assert s.contains(f"{A}:3") and not s.contains(f"{A}:4") and not s.contains(f"{B}:1")
    s.add(f"{A}:4")
    s.add(f"{B}:1")
    assert str(s) == f"{B}:1,{A}:1-4"
    assert MySqlGtidSet(f"{A}:2-3").is_contained_within(s)
    assert not MySqlGtidSet(f"{A}:2-5").is_contained_within(s)
    assert not MySqlGtidSet(f"{A}:1").is_contained_within(MariaDbGtidSet("0-1-5"))


def test_mysql_with_union_and_retain() -> None:
    server = MySqlGtidSet(f"{A}:1-100,{B}:1-50")
    stored = MySqlGtidSet(f"{A}:1-40")
    assert str(server.with_(stored)) == f"{B}:1-50,{A}:1-40"
    assert str(stored.union(MySqlGtidSet(f"{A}:41-45,{B}:3"))) == f"{B}:3,{A}:1-45"
    assert str(server.retain(lambda s: s == A)) == f"{A}:1-100"


@pytest.mark.parametrize("bad", ["nonsense", f"{A}:0", f"{A}:5-3", f"{A}:x-y"])
def test_mysql_rejects_bad_text(bad: str) -> None:
    with pytest.raises(GtidError):
        MySqlGtidSet(bad)


def test_mariadb_positions() -> None:
    p = MariaDbGtidSet("0-1-10,1-2-5")
    assert p.contains("0-1-10") and p.contains("0-3-2") and not p.contains("0-1-11")
    assert not p.contains("2-1-1")
    p.add("0-1-11")
    p.add("2-7-1")
    p.add("1-2-3")  # an older sequence number does not move the position back
    assert str(p) == "0-1-11,1-2-5,2-7-1"
    assert MariaDbGtidSet("0-1-9").is_contained_within(p)
    assert not MariaDbGtidSet("0-1-12").is_contained_within(p)
    assert not MariaDbGtidSet("3-1-1").is_contained_within(p)
    assert str(p.with_(MariaDbGtidSet("1-9-99"))) == "0-1-11,1-9-99,2-7-1"
    assert p.sources() == ["0-1", "1-2", "2-7"]
    with pytest.raises(GtidError):
        MariaDbGtidSet("0-1")


def test_dialect_detection() -> None:
    assert isinstance(parse_gtid_set("0-1-5"), MariaDbGtidSet)
    assert isinstance(parse_gtid_set(f"{A}:1-5"), MySqlGtidSet)
    assert isinstance(parse_gtid_set("", mariadb=True), MariaDbGtidSet)


def test_source_filter() -> None:
    inc = GtidSourceFilter(includes=[A[:8] + ".*"])
    assert inc.active and inc(A) and not inc(B)
    exc = GtidSourceFilter(excludes=[B])
    assert exc(A) and not exc(B)
    assert not GtidSourceFilter().active
    # MariaDB: domain-server pairs, or just the domain
    p = MariaDbGtidSet("0-1-5,1-2-7")
    assert str(p.retain(GtidSourceFilter(includes=["1"]))) == "1-2-7"
    assert str(p.retain(GtidSourceFilter(excludes=["0-1"]))) == "1-2-7"


def test_restart_set_latest_and_earliest() -> None:
    """gtid.new.channel.position: a source the offset never saw starts at the server's newest
    transaction (latest) or its oldest available one (earliest); excluded sources count as
    read."""
    c = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
    stored = MySqlGtidSet(f"{A}:1-40,{B}:1-10")
    server = MySqlGtidSet(f"{A}:1-100,{B}:1-50,{c}:1-30")
    purged = MySqlGtidSet(f"{c}:1-20")
    latest = restart_gtid_set(stored, server, purged, new_channel_position="latest")
    assert str(latest) == f"{B}:1-10,{A}:1-40,{c}:1-30"
    earliest = restart_gtid_set(stored, server, purged, new_channel_position="earliest")
    assert str(earliest) == f"{B}:1-10,{A}:1-40,{c}:1-20"
    only_a = restart_gtid_set(
        stored,
        server,
        purged,
        source_filter=GtidSourceFilter(includes=[A]),
        new_channel_position="latest",
    )
    assert str(only_a) == f"{B}:1-50,{A}:1-40,{c}:1-30"
    maria = restart_gtid_set(
        MariaDbGtidSet("0-1-10"),
        MariaDbGtidSet("0-1-20,1-5-9"),
        MariaDbGtidSet(""),
        new_channel_position="latest",
    )
    assert str(maria) == "0-1-10,1-5-9"
    maria_early = restart_gtid_set(
        MariaDbGtidSet("0-1-10"),
        MariaDbGtidSet("0-1-20,1-5-9"),
        MariaDbGtidSet(""),
        new_channel_position="earliest",
    )
    assert str(maria_early) == "0-1-10"


def test_mariadb_add_parts_gives_the_text_add_gives() -> None:
    """The binlog commit path adds parsed GTIDs and reuses the GTID's text for a one-domain
    position; every step must print exactly what ``add`` + ``str`` print."""
    steps = [(0, 1, 5), (0, 1, 6), (0, 2, 7), (0, 1, 3), (1, 9, 2), (0, 1, 8), (1, 9, 1)]
    for start in ("", "0-1-4", "2-3-10,0-1-1"):
        fast, slow = MariaDbGtidSet(start), MariaDbGtidSet(start)
        for domain, server, seq in steps:
            gtid = f"{domain}-{server}-{seq}"
            slow.add(gtid)
            assert fast.add_parts(domain, server, seq, gtid) == str(slow)
            assert str(fast) == str(slow) and fast.contains(gtid) == slow.contains(gtid)
        copied = fast.copy()
        copied.add("0-1-99")
        assert str(copied).startswith("0-1-99") and "0-1-99" not in str(fast)
    one = MariaDbGtidSet()
    assert one.add_parts(0, 1, 5, "0-1-5") == "0-1-5"
    assert one.with_(MariaDbGtidSet("0-2-9")).__str__() == "0-2-9" and str(one) == "0-1-5"
    assert str(one.retain(lambda s: False)) == ""
