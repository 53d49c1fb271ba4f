"""GTID sets of both dialects: MySQL's ``uuid:1-5:7-9,uuid2:1-3``, MariaDB's ``domain-server-seq``.

They mean different things. A MySQL set lists every transaction executed (intervals per source
UUID, with gaps allowed); a MariaDB *position* holds, per replication domain, only the last
transaction, because sequence numbers within a domain are strictly ordered. The connector needs
the same few operations on both: "is this transaction already done" (resume and history
replay), "add the transaction just committed" (offsets), "is this set behind that one"
(position comparison), and the ``gtid.source.includes/excludes`` and
``gtid.new.channel.position`` rules applied when building the position to reconnect from.

Sets are small and mutable: :meth:`add` runs once per committed transaction, so it updates in
place instead of copying.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass

SourcePredicate = Callable[[str], bool]
"""Called with a source key: a MySQL server UUID, or a MariaDB ``domain-server`` pair."""

_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_MARIADB_GTID = re.compile(r"^\s*(\d+)-(\d+)-(\d+)\s*$")
_MARIADB_SOURCE = re.compile(r"^\d+-\d+$")
_TAG = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,31}$")


class GtidError(ValueError):
    """Text that is not a GTID or GTID set of the expected dialect."""


class GtidSet(ABC):
    """Operations shared by both dialects."""

    mariadb: bool

    @abstractmethod
    def contains(self, gtid: str) -> bool:
        """True when the single transaction ``gtid`` is part of this set/position."""

    @abstractmethod
    def add(self, gtid: str) -> None:
        """Record one more committed transaction (in place)."""

    @abstractmethod
    def is_contained_within(self, other: GtidSet) -> bool:
        """Every transaction of this set is also in ``other``."""

    @abstractmethod
    def with_(self, other: GtidSet) -> GtidSet:
        """A copy in which every source present in ``other`` takes ``other``'s value."""

    @abstractmethod
    def retain(self, keep: SourcePredicate) -> GtidSet:
        """A copy with only the sources ``keep`` accepts."""

    @abstractmethod
    def sources(self) -> list[str]:
        """The source keys (UUIDs, or ``domain-server`` pairs)."""

    @abstractmethod
    def copy(self) -> GtidSet: ...

    @abstractmethod
    def is_empty(self) -> bool: ...

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GtidSet) and str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self)!r})"


# -- MySQL ------------------------------------------------------------------------------------


@dataclass
class _Interval:
    start: int
    end: int


class MySqlGtidSet(GtidSet):
    """``uuid[:tag]:a-b[:c-d...]`` per source, comma separated (``gtid_executed`` form)."""

    mariadb = False

    def __init__(self, text: str | None = None) -> None:
        # source key (uuid, or uuid:tag) -> sorted, non-overlapping, non-adjacent intervals
        self._sets: dict[str, list[_Interval]] = {}
        if text:
            for item in text.replace("\n", "").split(","):
                item = item.strip()
                if item:
                    self._parse_item(item)

    def _parse_item(self, item: str) -> None:
        parts = item.split(":")
        uuid = parts[0].strip().lower()
        if not _UUID.match(uuid):
            raise GtidError(f"{item!r} is not a MySQL GTID set entry (expected uuid:interval)")
        key = uuid
        for part in parts[1:]:
            part = part.strip()
            if _TAG.match(part) and not part.isdigit():
                key = f"{uuid}:{part.lower()}"
                continue
            lo, sep, hi = part.partition("-")
            try:
                start = int(lo)
                end = int(hi) if sep else start
            except ValueError as exc:
                raise GtidError(f"bad interval {part!r} in GTID set entry {item!r}") from exc
            if start < 1 or end < start:
                raise GtidError(f"bad interval {part!r} in GTID set entry {item!r}")
            self._add_interval(key, start, end)
        self._sets.setdefault(key, [])

    def _add_interval(self, key: str, start: int, end: int) -> None:
        intervals = self._sets.setdefault(key, [])
        if intervals and intervals[-1].end + 1 >= start and intervals[-1].start <= start:
            last = intervals[-1]  # the common case: extends the newest interval
            last.end = max(last.end, end)
            return
        intervals.append(_Interval(start, end))
        intervals.sort(key=lambda i: i.start)
        merged: list[_Interval] = []
        for iv in intervals:
            if merged and merged[-1].end + 1 >= iv.start:
                merged[-1].end = max(merged[-1].end, iv.end)
            else:
                merged.append(_Interval(iv.start, iv.end))
        self._sets[key] = merged

    @staticmethod
    def split_gtid(gtid: str) -> tuple[str, int]:
        """``uuid[:tag]:n`` → (source key, n)."""
        head, sep, number = gtid.strip().rpartition(":")
        if not sep or not number.isdigit():
            raise GtidError(f"{gtid!r} is not a MySQL GTID (uuid:number)")
        uuid = head.split(":")[0]
        if not _UUID.match(uuid):
            raise GtidError(f"{gtid!r} is not a MySQL GTID (uuid:number)")
        return head.lower(), int(number)

    def contains(self, gtid: str) -> bool:
        key, n = self.split_gtid(gtid)
        return any(iv.start <= n <= iv.end for iv in self._sets.get(key, ()))

    def add(self, gtid: str) -> None:
        key, n = self.split_gtid(gtid)
        self._add_interval(key, n, n)

    def is_contained_within(self, other: GtidSet) -> bool:
        if not isinstance(other, MySqlGtidSet):
            return False
        for key, intervals in self._sets.items():
            theirs = other._sets.get(key, [])
            for iv in intervals:
                if not any(o.start <= iv.start and iv.end <= o.end for o in theirs):
                    return False
        return True

    def with_(self, other: GtidSet) -> MySqlGtidSet:
        if not isinstance(other, MySqlGtidSet):
            raise GtidError("cannot combine a MySQL GTID set with a MariaDB GTID position")
        out = self.copy()
        for key, intervals in other._sets.items():
            out._sets[key] = [_Interval(i.start, i.end) for i in intervals]
        return out

    def union(self, other: MySqlGtidSet) -> MySqlGtidSet:
        out = self.copy()
        for key, intervals in other._sets.items():
            for iv in intervals:
                out._add_interval(key, iv.start, iv.end)
        return out

    def retain(self, keep: SourcePredicate) -> MySqlGtidSet:
        out = MySqlGtidSet()
        for key, intervals in self._sets.items():
            if keep(key.split(":")[0]):
                out._sets[key] = [_Interval(i.start, i.end) for i in intervals]
        return out

    def sources(self) -> list[str]:
        return sorted({k.split(":")[0] for k in self._sets})

    def copy(self) -> MySqlGtidSet:
        out = MySqlGtidSet()
        out._sets = {k: [_Interval(i.start, i.end) for i in v] for k, v in self._sets.items()}
        return out

    def is_empty(self) -> bool:
        return not any(self._sets.values())

    def __str__(self) -> str:
        # MySQL prints untagged intervals first, then tags, all under one uuid entry
        by_uuid: dict[str, list[str]] = {}
        for key in sorted(self._sets, key=lambda k: (k.split(":")[0], ":" in k, k)):
            intervals = self._sets[key]
            if not intervals:
                continue
            uuid, _, tag = key.partition(":")
            ranges = ":".join(
                f"{i.start}-{i.end}" if i.end != i.start else str(i.start) for i in intervals
            )
            by_uuid.setdefault(uuid, []).append(f"{tag}:{ranges}" if tag else ranges)
        return ",".join(f"{u}:{':'.join(parts)}" for u, parts in by_uuid.items())


# -- MariaDB ----------------------------------------------------------------------------------


class MariaDbGtidSet(GtidSet):
    """A GTID *position*: per domain the last ``domain-server-seq`` (``gtid_binlog_pos``)."""

    mariadb = True

    def __init__(self, text: str | None = None) -> None:
        self._domains: dict[int, tuple[int, int]] = {}
        #: the text of a one-domain position, kept by :meth:`add_parts` (None: build it)
        self._text: str | None = None
        if text:
            for item in text.replace("\n", "").split(","):
                if item.strip():
                    domain, server, seq = self.split_gtid(item)
                    self._domains[domain] = (server, seq)

    @staticmethod
    def split_gtid(gtid: str) -> tuple[int, int, int]:
        m = _MARIADB_GTID.match(gtid)
        if m is None:
            raise GtidError(f"{gtid!r} is not a MariaDB GTID (domain-server-sequence)")
        return int(m.group(1)), int(m.group(2)), int(m.group(3))

    def contains(self, gtid: str) -> bool:
        domain, _server, seq = self.split_gtid(gtid)
        mine = self._domains.get(domain)
        return mine is not None and seq <= mine[1]

    def add(self, gtid: str) -> None:
        domain, server, seq = self.split_gtid(gtid)
        mine = self._domains.get(domain)
        if mine is None or seq >= mine[1]:
            self._domains[domain] = (server, seq)
            self._text = None

    def add_parts(self, domain: int, server: int, seq: int, gtid: str) -> str:
        """:meth:`add` of an already parsed GTID (``gtid`` is its ``domain-server-seq``
        text), returning the position's text: with one domain that is ``gtid`` itself, so
        the binlog's commit path builds no string per transaction."""
        domains = self._domains
        mine = domains.get(domain)
        if mine is None or seq >= mine[1]:
            domains[domain] = (server, seq)
            self._text = gtid if len(domains) == 1 else None
        return str(self)

    def is_contained_within(self, other: GtidSet) -> bool:
        if not isinstance(other, MariaDbGtidSet):
            return False
        for domain, (_server, seq) in self._domains.items():
            theirs = other._domains.get(domain)
            if theirs is None or seq > theirs[1]:
                return False
        return True

    def with_(self, other: GtidSet) -> MariaDbGtidSet:
        if not isinstance(other, MariaDbGtidSet):
            raise GtidError("cannot combine a MariaDB GTID position with a MySQL GTID set")
        out = self.copy()
        out._domains.update(other._domains)
        return out

    def retain(self, keep: SourcePredicate) -> MariaDbGtidSet:
        out = MariaDbGtidSet()
        out._domains = {d: v for d, v in self._domains.items() if keep(f"{d}-{v[0]}")}
        return out

    def sources(self) -> list[str]:
        return [f"{d}-{s}" for d, (s, _) in sorted(self._domains.items())]

    def domains(self) -> dict[int, tuple[int, int]]:
        return dict(self._domains)

    def copy(self) -> MariaDbGtidSet:
        out = MariaDbGtidSet()
        out._domains = dict(self._domains)
        return out

    def is_empty(self) -> bool:
        return not self._domains

    def __str__(self) -> str:
        text = self._text
        if text is None or len(self._domains) != 1:
            text = ",".join(f"{d}-{s}-{q}" for d, (s, q) in sorted(self._domains.items()))
            if len(self._domains) == 1:
                self._text = text
        return text


# -- helpers ----------------------------------------------------------------------------------


def parse_gtid_set(text: str | None, *, mariadb: bool | None = None) -> GtidSet:
    """Parse either dialect. ``mariadb=None`` guesses from the text (empty text → MySQL)."""
    if mariadb is None:
        first = (text or "").split(",")[0]
        mariadb = bool(_MARIADB_GTID.match(first)) if first.strip() else False
    return MariaDbGtidSet(text) if mariadb else MySqlGtidSet(text)


def is_mariadb_gtid(gtid: str) -> bool:
    return bool(_MARIADB_GTID.match(gtid))


class GtidSourceFilter:
    """``gtid.source.includes`` / ``gtid.source.excludes``: anchored, case-insensitive regexes
    matched against a source key (MySQL server UUID; MariaDB ``domain-server`` or ``domain``)."""

    def __init__(self, includes: Iterable[str] = (), excludes: Iterable[str] = ()) -> None:
        self.includes = [re.compile(p, re.IGNORECASE) for p in includes]
        self.excludes = [re.compile(p, re.IGNORECASE) for p in excludes]

    @property
    def active(self) -> bool:
        return bool(self.includes or self.excludes)

    def __call__(self, source: str) -> bool:
        candidates = [source]
        if _MARIADB_SOURCE.match(source):
            candidates.append(source.split("-")[0])  # a MariaDB domain on its own
        if self.includes:
            return any(p.fullmatch(c) for p in self.includes for c in candidates)
        return not any(p.fullmatch(c) for p in self.excludes for c in candidates)


def restart_gtid_set(
    stored: GtidSet,
    server_available: GtidSet,
    server_purged: GtidSet | None,
    *,
    source_filter: GtidSourceFilter | None = None,
    new_channel_position: str = "latest",
) -> GtidSet:
    """The set to send when reconnecting (Debezium's ``fixRestoredGtidSet``).

    The stored set is first narrowed to the sources ``gtid.source.*`` select. Sources the
    server knows but the offset does not ("new channels", e.g. after a failover to a replica
    with another upstream) start at the server's newest transaction with ``latest`` and at the
    oldest one still in the binlog with ``earliest``. Excluded sources count as fully read.
    """
    relevant = stored.retain(source_filter) if source_filter and source_filter.active else stored
    if new_channel_position == "earliest":
        known = set(relevant.sources())
        if isinstance(relevant, MariaDbGtidSet):
            # A domain the position leaves out is streamed from its beginning.
            return relevant.copy()
        assert isinstance(server_available, MySqlGtidSet)
        base = server_available.retain(lambda s: s not in known and not _kept(source_filter, s))
        merged = base.with_(relevant)
        if isinstance(server_purged, MySqlGtidSet):
            new_sources = server_purged.retain(lambda s: s not in known)
            merged = merged.union(new_sources) if isinstance(merged, MySqlGtidSet) else merged
        return merged
    return server_available.with_(relevant)


def _kept(source_filter: GtidSourceFilter | None, source: str) -> bool:
    return source_filter is None or not source_filter.active or source_filter(source)
