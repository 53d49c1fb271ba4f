"""The contract a connector implements to take part in ``tidemark verify``.

A connector's verify side (``connectors/<db>/verify.py``) describes its tables as
:class:`~cdc.verify.canonical.TableSpec` and computes, *in the database*, what the core asks of
one primary-key range: the checksum of a chunk (row count, sum of row hashes) and, for a chunk
that differs, each row's key and hash. The core never sees a row of a table whose chunks are
equal, so a large table is not pulled through Python.

A target (the topic, a Delta table) answers the same questions from its own copy; the core
compares the two.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from cdc.verify.canonical import KeyTexts, TableSpec


@dataclass(frozen=True)
class Boundary:
    """A chunk edge: the key as the database takes it as a parameter, and its canonical
    texts (how the core sorts the target's keys into the same chunks)."""

    raw: tuple[Any, ...]
    texts: KeyTexts


@dataclass(frozen=True)
class Checksum:
    rows: int
    total: int


class SourceSide(Protocol):
    """One database's side. Ranges are ``lo < key <= hi``; None is open."""

    def tables(self, selected: Sequence[str]) -> list[TableSpec]:
        """The captured tables (``selected``: ``schema.table`` / ``db.table`` names, empty for
        all the connector captures), with their compared columns."""
        ...

    def boundaries(self, spec: TableSpec, chunk_rows: int) -> list[Boundary]:
        """Every ``chunk_rows``-th key in key order."""
        ...

    def checksum(self, spec: TableSpec, lo: Boundary | None, hi: Boundary | None) -> Checksum: ...

    def row_hashes(
        self, spec: TableSpec, lo: Boundary | None, hi: Boundary | None
    ) -> dict[KeyTexts, int]: ...

    def close(self) -> None: ...


class TargetSide(Protocol):
    """A downstream copy: the live rows per key of each table, as row hashes."""

    name: str

    def refresh(self, specs: Sequence[TableSpec]) -> None:
        """Catch up with the copy (read the topic to its current end, reload the table)."""
        ...

    def rows(self, spec: TableSpec) -> Mapping[KeyTexts, int]: ...

    def close(self) -> None: ...
