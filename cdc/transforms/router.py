"""Topic routing: Kafka Connect's RegexRouter and Debezium's ByLogicalTableRouter.

Both keep Java's semantics because users copy configs from Debezium docs: the regex must match
the *whole* topic (``Matcher.matches()``), then the first match is replaced
(``replaceFirst``), with ``$1`` / ``${name}`` group references and ``\\`` escapes as in
``Matcher.appendReplacement``. Rewritten topic names are memoised; topics are few.

ByLogicalTableRouter merges physical tables (shards) into one topic. Their keys may collide, so
by default it appends the original topic to the key (``__dbz__physicalTableIdentifier``), and
renames the key, envelope and row schemas after the new topic. Row values are plain dicts, so
the envelope value is reused as is; only schemas are rebuilt, once per (schema, topic).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping

from cdc.record import SourceRecord
from cdc.schema.model import STRING, Schema, struct
from cdc.schema.name_adjust import MODES, adjust
from cdc.transforms.base import (
    PluginConfig,
    SchemaCache,
    Transformation,
    TransformError,
    is_envelope,
)

LOG = logging.getLogger("tidemark.transforms.router")

_TOPIC_CACHE_SIZE = 4096


class JavaReplacement:
    """A ``Matcher.replaceFirst`` replacement string, parsed once against its pattern; invalid
    group references raise ValueError at configuration time, as Java would on first use."""

    __slots__ = ("_constant", "_parts")

    def __init__(self, template: str, pattern: re.Pattern[str]) -> None:
        parts: list[str | int] = []
        literal: list[str] = []
        i, n = 0, len(template)
        while i < n:
            c = template[i]
            if c == "\\":
                if i + 1 >= n:
                    raise ValueError("character to be escaped is missing")
                literal.append(template[i + 1])
                i += 2
                continue
            if c != "$":
                literal.append(c)
                i += 1
                continue
            i += 1
            if i >= n:
                raise ValueError("illegal group reference: group index is missing")
            if template[i] == "{":
                end = template.find("}", i)
                if end == -1:
                    raise ValueError("named capturing group is missing trailing '}'")
                name = template[i + 1 : end]
                if name not in pattern.groupindex:
                    raise ValueError(f"no group with name {{{name}}}")
                group = pattern.groupindex[name]
                i = end + 1
            elif "0" <= template[i] <= "9":
                group = int(template[i])
                if group > pattern.groups:
                    raise ValueError(f"no group {group}")
                i += 1
                # Java takes further digits only while they still name an existing group.
                while i < n and "0" <= template[i] <= "9":
                    longer = group * 10 + int(template[i])
                    if longer > pattern.groups:
                        break
                    group = longer
                    i += 1
            else:
                raise ValueError("illegal group reference")
            if literal:
                parts.append("".join(literal))
                literal = []
            parts.append(group)
        if literal:
            parts.append("".join(literal))
        self._parts = tuple(parts)
        literals = [p for p in parts if isinstance(p, str)]
        self._constant = "".join(literals) if len(literals) == len(parts) else None

    def __call__(self, match: re.Match[str]) -> str:
        if self._constant is not None:
            return self._constant
        return "".join(p if isinstance(p, str) else (match.group(p) or "") for p in self._parts)


class TopicRewriter:
    """``regex`` + ``replacement`` applied the Java way; None when the topic does not match."""

    __slots__ = ("_cache", "_pattern", "_replacement")

    def __init__(self, pattern: re.Pattern[str], replacement: JavaReplacement) -> None:
        self._pattern = pattern
        self._replacement = replacement
        self._cache: dict[str, str | None] = {}

    @classmethod
    def from_config(
        cls,
        cfg: PluginConfig,
        regex_key: str,
        replacement_key: str,
        *,
        default_regex: str | None = None,
        default_replacement: str | None = None,
    ) -> TopicRewriter | None:
        """Read a regex/replacement pair; both are required unless given defaults."""
        pattern = cfg.regex(regex_key, default_regex, required=default_regex is None)
        if default_replacement is None:
            replacement = cfg.required(replacement_key, allow_empty=True)
        else:
            replacement = cfg.string(replacement_key, default_replacement) or default_replacement
        if pattern is None:
            return None
        try:
            return cls(pattern, JavaReplacement(replacement, pattern))
        except ValueError as exc:
            cfg.error(replacement_key, f"invalid replacement {replacement!r}: {exc}")
            return None

    def rewrite(self, topic: str) -> str | None:
        try:
            return self._cache[topic]
        except KeyError:
            pass
        result = None
        if self._pattern.fullmatch(topic):
            result = self._pattern.sub(self._replacement, topic, count=1)
        if len(self._cache) >= _TOPIC_CACHE_SIZE:
            self._cache.clear()
        self._cache[topic] = result
        return result


class RegexRouter(Transformation):
    def __init__(self) -> None:
        self._rewriter: TopicRewriter | None = None

    def configure(self, config: Mapping[str, str]) -> None:
        cfg = PluginConfig(config)
        self._rewriter = TopicRewriter.from_config(cfg, "regex", "replacement")
        cfg.check()

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        assert self._rewriter is not None, "configure() first"
        topic = self._rewriter.rewrite(record.topic)
        if topic is None or topic == record.topic:
            return record
        return record.with_(topic=topic)


class ByLogicalTableRouter(Transformation):
    def __init__(self) -> None:
        self._topics: TopicRewriter | None = None
        self._key_ids: TopicRewriter | None = None
        self._enforce_uniqueness = True
        self._key_field = "__dbz__physicalTableIdentifier"
        self._name_mode = "avro"
        self._key_schemas: SchemaCache[Schema] = SchemaCache()
        self._envelope_schemas: SchemaCache[Schema] = SchemaCache()

    def configure(self, config: Mapping[str, str]) -> None:
        cfg = PluginConfig(config)
        self._topics = TopicRewriter.from_config(cfg, "topic.regex", "topic.replacement")
        self._enforce_uniqueness = cfg.boolean("key.enforce.uniqueness", True)
        self._key_field = cfg.string("key.field.name") or "__dbz__physicalTableIdentifier"
        replacement = cfg.raw("key.field.replacement")  # read either way: a known setting
        if cfg.raw("key.field.regex"):
            if not replacement:
                cfg.error("key.field.replacement", "must be non-empty if key.field.regex is set")
            else:
                self._key_ids = TopicRewriter.from_config(
                    cfg, "key.field.regex", "key.field.replacement"
                )
        self._name_mode = cfg.choice("schema.name.adjustment.mode", MODES, "avro")
        cfg.check()

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        assert self._topics is not None, "configure() first"
        old_topic = record.topic
        topic = self._topics.rewrite(old_topic)
        if topic is None:
            return record
        if not topic:
            LOG.warning(
                "topic.regex turned %r into an empty topic name; record not rerouted", old_topic
            )
            return record

        key_schema, key = record.key_schema, record.key
        if key is not None:
            if not isinstance(key, dict):
                raise TransformError(f"cannot reroute {old_topic}: the key is not a struct")
            if key_schema is not None:
                key_schema = self._key_schemas.get(key_schema, topic) or self._key_schemas.put(
                    key_schema, self._new_key_schema(key_schema, topic), topic
                )
            if self._enforce_uniqueness:
                key = {**key, self._key_field: self._physical_id(old_topic)}

        value_schema = record.value_schema
        if record.value is not None and value_schema is not None and is_envelope(value_schema):
            value_schema = self._envelope_schemas.get(
                value_schema, topic
            ) or self._envelope_schemas.put(
                value_schema, self._new_envelope_schema(value_schema, topic), topic
            )
        return record.with_(topic=topic, key_schema=key_schema, key=key, value_schema=value_schema)

    def _physical_id(self, old_topic: str) -> str:
        if self._key_ids is None:
            return old_topic
        return self._key_ids.rewrite(old_topic) or old_topic

    def _name(self, name: str) -> str:
        return adjust(name, self._name_mode)

    def _renamed(self, schema: Schema, name: str, extra: list[tuple[str, Schema]]) -> Schema:
        fields = [(f.name, f.schema) for f in schema.fields] + extra
        try:
            built = struct(
                fields,
                name=self._name(name),
                optional=schema.optional,
                version=schema.version,
                doc=schema.doc,
                parameters=schema.parameters,
            )
        except ValueError as exc:
            raise TransformError(f"cannot reroute to {name}: {exc}") from exc
        return built

    def _new_key_schema(self, key_schema: Schema, topic: str) -> Schema:
        extra = [(self._key_field, STRING)] if self._enforce_uniqueness else []
        return self._renamed(key_schema, f"{topic}.Key", extra)

    def _new_envelope_schema(self, envelope: Schema, topic: str) -> Schema:
        before = envelope.field("before")
        if before is None:
            raise TransformError(f"envelope {envelope.name} has no 'before' field")
        row = self._renamed(before.schema, f"{topic}.Value", [])
        fields: list[tuple[str, Schema]] = [
            (f.name, row if f.name in ("before", "after") else f.schema) for f in envelope.fields
        ]
        return struct(
            fields,
            name=self._name(f"{topic}.Envelope"),
            optional=envelope.optional,
            version=envelope.version,
            doc=envelope.doc,
            parameters=envelope.parameters,
        )
