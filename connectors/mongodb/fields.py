"""``field.exclude.list`` and ``field.renames``: nested fields removed or renamed in every
document the connector writes (``after``, ``before``, ``patch``, update descriptions).

Paths are ``<db>.<collection>.<field>.<nested>``; ``*`` stands for any database or
collection. Inside a patch, an operator's keys are dotted paths themselves (``$set: {"a.b":
1}``), so the same rules apply to them as paths, and to their values as sub-documents.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any


def _split(entry: str) -> tuple[str, str, str]:
    db, coll, path = entry.split(".", 2)
    return db, coll, path


def _matches(pattern: str, name: str) -> bool:
    return pattern == "*" or pattern == name


class FieldSelector:
    """The per-collection rules, chosen once per collection (cached)."""

    def __init__(self, excludes: Iterable[str], renames: Iterable[str]) -> None:
        self.excludes = [_split(e) for e in excludes]
        self.renames = []
        for entry in renames:
            path, _, new = entry.partition(":")
            self.renames.append((*_split(path), new))
        self.for_collection = lru_cache(maxsize=1024)(self._for_collection)

    def _for_collection(self, db: str, coll: str) -> CollectionFields | None:
        excluded = frozenset(
            p for d, c, p in self.excludes if _matches(d, db) and _matches(c, coll)
        )
        renames = tuple(
            (p, new) for d, c, p, new in self.renames if _matches(d, db) and _matches(c, coll)
        )
        if not excluded and not renames:
            return None
        return CollectionFields(excluded, renames)


class CollectionFields:
    def __init__(self, excluded: frozenset[str], renames: tuple[tuple[str, str], ...]) -> None:
        self.excluded = excluded
        self.renames = renames

    def is_excluded(self, path: str) -> bool:
        if path in self.excluded:
            return True
        return any(path.startswith(e + ".") for e in self.excluded)

    def rename(self, path: str) -> str:
        """The path after every rename, in configuration order."""
        for old, new in self.renames:
            if path == old or path.startswith(old + "."):
                head = old.rpartition(".")[0]
                path = (f"{head}.{new}" if head else new) + path[len(old) :]
        return path

    def document(self, doc: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in doc.items():
            path = f"{prefix}{key}"
            if self.is_excluded(path):
                continue
            out[self.rename(path).rpartition(".")[2]] = self._value(value, path)
        return out

    def _value(self, value: Any, path: str) -> Any:
        if isinstance(value, Mapping):
            return self.document(value, path + ".")
        if isinstance(value, list):
            return [self._value(v, path) for v in value]
        return value

    def paths(self, updates: Mapping[str, Any]) -> dict[str, Any]:
        """Dotted path → value (``$set`` bodies, ``updatedFields``)."""
        return {
            self.rename(p): self._value(v, p) for p, v in updates.items() if not self.is_excluded(p)
        }

    def path_list(self, paths: Iterable[str]) -> list[str]:
        return [self.rename(p) for p in paths if not self.is_excluded(p)]

    def patch(self, patch: Mapping[str, Any]) -> dict[str, Any]:
        """An oplog update: operators with dotted-path bodies, or a replacement document."""
        if not any(k.startswith("$") for k in patch):
            return self.document(patch)
        out: dict[str, Any] = {}
        for op, body in patch.items():
            # {"$v": 2, "diff": ...} (MongoDB 5+ oplog) passes through unchanged
            out[op] = self.paths(body) if op.startswith("$") and isinstance(body, Mapping) else body
        return out
