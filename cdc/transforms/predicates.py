"""Kafka Connect's built-in predicates (KIP-585), which gate a transform per record.

They exist so one transform can apply to part of a stream (``transforms.x.predicate=p``,
optionally ``negate``) without every SMT growing its own topic filter.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from cdc.record import SourceRecord
from cdc.transforms.base import PluginConfig, Predicate


class TopicNameMatches(Predicate):
    """True when the whole topic name matches ``pattern`` (Java ``matches()``)."""

    #: answers kept per topic name: a stream has few, and a match is paid once per name
    CACHE_SIZE = 4096

    def __init__(self) -> None:
        self._pattern: re.Pattern[str] | None = None
        self._seen: dict[str, bool] = {}

    def configure(self, config: Mapping[str, str]) -> None:
        cfg = PluginConfig(config)
        self._pattern = cfg.regex("pattern", required=True)
        cfg.check()
        self._seen.clear()

    def test(self, record: SourceRecord) -> bool:
        assert self._pattern is not None, "configure() first"
        topic = record.topic
        if topic is None:
            return False
        hit = self._seen.get(topic)
        if hit is None:
            if len(self._seen) >= self.CACHE_SIZE:
                self._seen.clear()
            hit = self._seen[topic] = self._pattern.fullmatch(topic) is not None
        return hit


class HasHeaderKey(Predicate):
    """True when the record has at least one header called ``name``."""

    def __init__(self) -> None:
        self._name = ""

    def configure(self, config: Mapping[str, str]) -> None:
        cfg = PluginConfig(config)
        self._name = cfg.required("name")
        cfg.check()

    def test(self, record: SourceRecord) -> bool:
        name = self._name
        return any(key == name for key, _ in record.headers)


class RecordIsTombstone(Predicate):
    """True for tombstones: records whose value is null."""

    def test(self, record: SourceRecord) -> bool:
        return record.value is None
