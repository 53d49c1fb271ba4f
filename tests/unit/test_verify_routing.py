"""The topic verify reads a table's copy from when the connector routes its events
(cdc.verify.routing)."""

from __future__ import annotations

import pytest

from cdc.verify.canonical import TableSpec
from cdc.verify.routing import RoutingError, routed, topic_route

ROUTER = "org.apache.kafka.connect.transforms.RegexRouter"


def spec(identifier: str, topic: str) -> TableSpec:
    return TableSpec(identifier, topic, (), ("id",))


def test_no_transforms_or_no_router_keep_the_topic() -> None:
    assert topic_route({})("srv.public.a") == "srv.public.a"
    unwrap = {
        "transforms": "u",
        "transforms.u.type": "io.debezium.transforms.ExtractNewRecordState",
    }
    assert topic_route(unwrap)("srv.public.a") == "srv.public.a"


def test_routers_apply_in_order_and_only_where_their_predicate_holds() -> None:
    route = topic_route(
        {
            "transforms": "one,two",
            "transforms.one.type": ROUTER,
            "transforms.one.regex": r"srv\.public\.(.*)",
            "transforms.one.replacement": "cdc.$1",
            "transforms.two.type": ROUTER,
            "transforms.two.regex": r"cdc\.(.*)",
            "transforms.two.replacement": "lake.$1",
            "transforms.two.predicate": "orders",
            "transforms.two.negate": "true",
            "predicates": "orders",
            "predicates.orders.type": "org.apache.kafka.connect.transforms.predicates."
            "TopicNameMatches",
            "predicates.orders.pattern": r"cdc\.orders",
        }
    )
    assert route("srv.public.customers") == "lake.customers"
    assert route("srv.public.orders") == "cdc.orders"  # negated: the second router skips it
    assert route("srv.inventory.x") == "srv.inventory.x"  # not matched: unchanged


def test_routes_verify_cannot_follow_are_refused_with_the_reason() -> None:
    with pytest.raises(RoutingError, match=r"transforms\.r \(ByLogicalTableRouter\)"):
        topic_route(
            {
                "transforms": "r",
                "transforms.r.type": "io.debezium.transforms.ByLogicalTableRouter",
                "transforms.r.topic.regex": "(.*)",
                "transforms.r.topic.replacement": "all",
            }
        )
    with pytest.raises(RoutingError, match="HasHeaderKey predicate"):
        topic_route(
            {
                "transforms": "r",
                "transforms.r.type": ROUTER,
                "transforms.r.regex": "(.*)",
                "transforms.r.replacement": "x.$1",
                "transforms.r.predicate": "h",
                "predicates": "h",
                "predicates.h.type": "org.apache.kafka.connect.transforms.predicates.HasHeaderKey",
                "predicates.h.name": "k",
            }
        )
    merge = topic_route(
        {
            "transforms": "r",
            "transforms.r.type": ROUTER,
            "transforms.r.regex": r"srv\.public\.(a|b)",
            "transforms.r.replacement": "ab",
        }
    )
    with pytest.raises(RoutingError, match=r"public\.a and public\.b are both routed to topic ab"):
        routed([spec("public.a", "srv.public.a"), spec("public.b", "srv.public.b")], merge)
    assert [s.topic for s in routed([spec("public.c", "srv.public.c")], merge)] == ["srv.public.c"]
