"""Regular expressions a REST caller may not send: those whose matching can take exponential
time.

Table filters, column lists and the transforms' topic patterns run in Python's backtracking
``re`` (Kafka Connect's run in Java's, which backtracks the same way), on the worker's own
threads. A pattern with a quantified group that itself holds an unbounded quantifier, such
as ``(a+)+$`` or ``(\\w+\\.)*x``, needs time exponential in the length of a name it fails
on, so one config could stall every connector of the worker. The operator's YAML file may
still use any pattern; over REST such a pattern is refused with the reason, and the worker
that runs the task checks again (``Herder._rest_policy_problems``).

This catches nested quantifiers, the usual form; alternatives that overlap under one
quantifier (``(a|a)*``) are not detected.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

from cdc.config import ConfigDef, split_list, valid_regex_list
from cdc.transforms.base import compile_java_regex

Problem = tuple[str, str]

#: the transforms' and predicates' pattern keys (java.util.regex syntax)
_CHAIN_PATTERN = re.compile(r"^(?:transforms|predicates)\..+\.(?:regex|pattern)$")
_REPEATS = {sre.MAX_REPEAT, sre.MIN_REPEAT}


def _children(op: Any, av: Any) -> Iterator[Any]:
    """The sub-patterns of one parsed node."""
    if op in _REPEATS or op is sre.POSSESSIVE_REPEAT:
        yield av[2]
    elif op is sre.SUBPATTERN:
        yield av[3]
    elif op is sre.BRANCH:
        yield from av[1]
    elif op in (sre.ASSERT, sre.ASSERT_NOT):
        yield av[1]
    elif op is sre.ATOMIC_GROUP:
        yield av
    elif op is sre.GROUPREF_EXISTS:
        yield av[1]
        if av[2] is not None:
            yield av[2]


def _nested(parsed: Any, inside: bool) -> bool:
    """Whether an unbounded repeat sits inside another repeat of more than one pass."""
    for op, av in parsed:
        if op in _REPEATS:
            unbounded = av[1] == sre.MAXREPEAT
            if unbounded and inside:
                return True
            if _nested(av[2], inside or av[1] > 1):
                return True
        elif op is sre.POSSESSIVE_REPEAT or op is sre.ATOMIC_GROUP:
            continue  # no backtracking into it
        else:
            if any(_nested(child, inside) for child in _children(op, av)):
                return True
    return False


def slow_pattern(pattern: str) -> bool:
    """True when ``pattern`` (Python syntax) nests an unbounded quantifier in a repeated
    group; an unparsable pattern is left to the config's own validation."""
    try:
        return _nested(sre_parse.parse(pattern), False)
    except (re.error, RecursionError):
        return False


def regex_problems(config: Mapping[str, Any], cdef: ConfigDef | None) -> list[Problem]:
    """``(key, reason)`` for each pattern of ``config`` that :func:`slow_pattern` flags: the
    values of the connector's regular-expression lists and the transforms' patterns."""
    problems: list[Problem] = []
    for key, value in config.items():
        if not isinstance(value, str):
            continue
        if _CHAIN_PATTERN.match(key):
            try:
                patterns = [compile_java_regex(value).pattern]
            except re.error:
                continue
        else:
            field = cdef.lookup(key) if cdef is not None else None
            if field is None or field.validator is not valid_regex_list:
                continue
            patterns = split_list(value)
        for pattern in patterns:
            if slow_pattern(pattern):
                problems.append(
                    (
                        key,
                        f"{pattern!r} nests a quantifier inside a repeated group, which can take "
                        "exponential time on a name it does not match and stall the worker; "
                        "rewrite it without the nesting (e.g. (a+)+ as a+), or set it in the "
                        "worker's YAML file",
                    )
                )
    return problems
