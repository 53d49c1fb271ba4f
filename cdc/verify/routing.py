"""Where a table's events land when the connector routes topics with ``RegexRouter``.

The source side names a table's topic as the connector does before its transforms
(``<prefix>.<schema-or-db>.<table>``); a ``RegexRouter`` in the connector's chain (Kafka's, or
any number of them, each with its own topic predicate) moves the events elsewhere, and the
copy to compare is there. Routers that merge tables into one topic (``ByLogicalTableRouter``,
the outbox ``EventRouter``, or a ``RegexRouter`` that maps two tables to one name) leave no
topic per table: verify says so instead of comparing a table with another's events.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from cdc.record import SourceRecord
from cdc.transforms.base import Stage, TransformConfigError, build_chain
from cdc.verify.canonical import TableSpec


class RoutingError(Exception):
    """The connector's transforms send a table's events where verify cannot follow them."""


#: the transforms that move events between topics, and why verify cannot follow each
_MERGING = {
    "ByLogicalTableRouter": "it merges tables into one topic (their rows are told apart by "
    "a key field verify does not read)",
    "EventRouter": "the outbox router's topics hold events, not table rows",
}
#: the predicates a route can be decided by from the topic name alone
_TOPIC_PREDICATES = ("TopicNameMatches", "RecordIsTombstone")


def topic_route(config: Mapping[str, Any]) -> Callable[[str], str]:
    """The topic a table's events end in, from the one the connector names it by."""
    try:
        chain = build_chain(config)
    except TransformConfigError as exc:
        raise RoutingError(f"the connector's transforms are invalid: {exc}") from exc
    routers: list[Stage] = []
    try:
        for stage in chain.stages:
            kind = type(stage.transformation).__name__
            if kind in _MERGING:
                raise RoutingError(
                    f"transforms.{stage.alias} ({kind}): not supported by verify: {_MERGING[kind]}"
                )
            if kind != "RegexRouter":
                continue
            predicate = type(stage.predicate).__name__ if stage.predicate else None
            if predicate is not None and predicate not in _TOPIC_PREDICATES:
                raise RoutingError(
                    f"transforms.{stage.alias}: routed by a {predicate} predicate, which "
                    "depends on each record, not on the table"
                )
            routers.append(stage)
    except RoutingError:
        chain.close()
        raise

    def route(topic: str) -> str:
        for stage in routers:
            # a row event: a value, no headers; only its topic matters to a router
            probe = SourceRecord(topic, None, None, None, {}, {}, {})
            if stage.predicate is not None and stage.predicate.test(probe) == stage.negate:
                continue
            out = stage.transformation.apply(probe)
            if out is not None:
                topic = out.topic
        return topic

    return route


def routed(specs: Sequence[TableSpec], route: Callable[[str], str]) -> list[TableSpec]:
    """The specs with their topics routed; two tables routed to one topic are an error."""
    out = [replace(s, topic=route(s.topic)) for s in specs]
    seen: dict[str, str] = {}
    for s in out:
        other = seen.setdefault(s.topic, s.identifier)
        if other != s.identifier:
            raise RoutingError(
                f"{other} and {s.identifier} are both routed to topic {s.topic}: their rows "
                "cannot be told apart"
            )
    return out
