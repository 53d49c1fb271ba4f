"""Regular expressions a REST caller may not send: those whose matching can take exponential
time.

Table filters, column lists and the transforms' topic patterns run in Python's backtracking
``re`` (Kafka Connect's run in Java's, which backtracks the same way), on the worker's own
threads. A pattern that gives a repeated group more than one way to consume the same text
needs time exponential in the length of a name it fails on, so one config could stall every
connector of the worker. The operator's YAML file may still use any pattern; over REST such a
pattern is refused with the reason, and the worker that runs the task checks again
(``Herder._rest_policy_problems``).

Two shapes are refused inside a group repeated more than once, which between them cover the
known exponential forms: a quantifier whose count may vary (``(a+)+``, ``(\\w+\\.)*x``,
``(x{1,3})+``, ``(a?a)+``), and alternatives that may begin with the same character
(``(a|a)*``, ``(.|a)+``, ``(a|ab|b)*``), or may both match nothing (what ``(ab|ab)*`` becomes
once Python's parser factors the common prefix out), or of which one may match nothing and
another not (an optional part: ``((a|)a)+``). Classes of single characters
(``(\\w|\\d)+`` is parsed as one) are not choices. The check is conservative: some patterns of
these shapes are fast, and are refused anyway (``(a|ab|c)*``: once an ``a`` is taken, no
alternative begins with ``b``). Overlapping quantifiers in a row cost a polynomial of their
number (``.*\\..*\\..*``: cubic); more than :data:`MAX_VARIABLE` quantifiers of varying count
are refused, whether they overlap or not.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

from cdc.column_mappers import regex_values
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
    """Whether a repeat of variable count sits inside another repeat of more than one pass."""
    for op, av in parsed:
        if op in _REPEATS:
            if inside and av[0] != av[1]:
                return True
            if _nested(av[2], inside or av[1] > 1):
                return True
        elif op is sre.POSSESSIVE_REPEAT or op is sre.ATOMIC_GROUP:
            continue  # no backtracking into it
        else:
            if any(_nested(child, inside) for child in _children(op, av)):
                return True
    return False


# -- alternatives that may begin alike ----------------------------------------------------------
#: a first character a sub-pattern may begin with: ("lit", c), ("notlit", c), ("any", None) or
#: ("in", items of a character class)
Atom = tuple[str, Any]

_CATEGORIES = {
    sre.CATEGORY_DIGIT: re.compile(r"\d"),
    sre.CATEGORY_NOT_DIGIT: re.compile(r"\D"),
    sre.CATEGORY_SPACE: re.compile(r"\s"),
    sre.CATEGORY_NOT_SPACE: re.compile(r"\S"),
    sre.CATEGORY_WORD: re.compile(r"\w"),
    sre.CATEGORY_NOT_WORD: re.compile(r"\W"),
}


def _first(parsed: Any) -> tuple[set[Atom], bool]:
    """The characters a sequence may begin with (over-approximated), and whether it may
    match the empty string."""
    atoms: set[Atom] = set()
    for op, av in parsed:
        found, nullable = _first_of(op, av)
        atoms |= found
        if not nullable:
            return atoms, False
    return atoms, True


def _first_of(op: Any, av: Any) -> tuple[set[Atom], bool]:
    if op is sre.LITERAL:
        return {("lit", av)}, False
    if op is sre.NOT_LITERAL:
        return {("notlit", av)}, False
    if op is sre.ANY:
        return {("any", None)}, False
    if op is sre.IN:
        return {("in", tuple(av))}, False
    if op is sre.SUBPATTERN:
        return _first(av[3])
    if op is sre.ATOMIC_GROUP:
        return _first(av)
    if op in _REPEATS or op is sre.POSSESSIVE_REPEAT:
        atoms, nullable = _first(av[2])
        return atoms, nullable or av[0] == 0
    if op is sre.BRANCH:
        atoms, nullable = set(), False
        for alt in av[1]:
            a, n = _first(alt)
            atoms |= a
            nullable = nullable or n
        return atoms, nullable
    if op is sre.GROUPREF_EXISTS:
        atoms, nullable = _first(av[1])
        other = _first(av[2]) if av[2] is not None else (set(), True)
        return atoms | other[0], nullable or other[1]
    if op in (sre.AT, sre.ASSERT, sre.ASSERT_NOT):
        return set(), True  # zero width
    return {("any", None)}, True  # a back reference or anything unforeseen: may be anything


def _in_class(items: tuple[Any, ...], ch: int) -> bool:
    negate = False
    hit = False
    for op, av in items:
        if op is sre.NEGATE:
            negate = True
        elif op is sre.LITERAL:
            hit = hit or ch == av
        elif op is sre.RANGE:
            hit = hit or av[0] <= ch <= av[1]
        elif op is sre.CATEGORY:
            probe = _CATEGORIES.get(av)
            hit = hit or probe is None or bool(probe.match(chr(ch)))
        else:
            hit = True
    return hit != negate


def _matches(atom: Atom, ch: int) -> bool:
    kind, av = atom
    if kind == "lit":
        return bool(ch == av)
    if kind == "notlit":
        return bool(ch != av)
    if kind == "any":
        return True  # with DOTALL a newline too: over-approximated, as the rest
    return _in_class(av, ch)


def _codepoints(atoms: set[Atom]) -> set[int]:
    """The characters a class names, so the probe below includes them."""
    out: set[int] = set()
    for kind, av in atoms:
        if kind in ("lit", "notlit"):
            out.add(av)
        elif kind == "in":
            for op, v in av:
                if op is sre.LITERAL:
                    out.add(v)
                elif op is sre.RANGE:
                    out |= {v[0], v[1]}
    return out


#: the characters tried: Latin, its neighbours, and a few beyond (names are mostly ASCII)
_PROBE = set(range(0x250)) | {0x3B1, 0x416, 0x4E00, 0xFF10, 0x1F600}


def _chars(atoms: set[Atom], probe: set[int], fold: bool) -> set[int]:
    """The characters of ``probe`` that ``atoms`` may begin with (either case when folded)."""
    out = set()
    for ch in probe:
        variants = {ch}
        if fold:
            variants |= {ord(c) for c in (chr(ch).lower(), chr(ch).upper()) if len(c) == 1}
        if any(_matches(a, v) for a in atoms for v in variants):
            out.add(ch)
    return out


def _ambiguous(parsed: Any, inside: bool, fold: bool) -> bool:
    """Whether alternatives that may begin with the same character sit inside a repeat of
    more than one pass."""
    for op, av in parsed:
        if op in _REPEATS:
            if _ambiguous(av[2], inside or av[1] > 1, fold):
                return True
        elif op is sre.POSSESSIVE_REPEAT or op is sre.ATOMIC_GROUP:
            continue
        elif op is sre.BRANCH and inside:
            # Python's parser factors a common prefix out (``(ab|ab)`` is ``ab(?:|)``), so
            # two alternatives that may both be empty are as ambiguous as two that begin alike
            firsts = [_first(alt) for alt in av[1]]
            probe = _PROBE.union(*(_codepoints(a) for a, _ in firsts))
            # An empty alternative beside others is an optional part (``(a|)`` is ``a?``),
            # as variable as a quantifier: ``((a|)a)+`` takes "aa" as one pass or two.
            if any(n for _, n in firsts) and not all(n for _, n in firsts):
                return True
            seen: set[int] = set()
            empty = 0
            for atoms, nullable in firsts:
                chars = _chars(atoms, probe, fold)
                empty += nullable
                if chars & seen or empty > 1:
                    return True
                seen |= chars
            if any(_ambiguous(alt, inside, fold) for alt in av[1]):
                return True
        elif any(_ambiguous(child, inside, fold) for child in _children(op, av)):
            return True
    return False


def _variable_count(parsed: Any) -> int:
    """How many quantifiers may take a varying number of characters (more than two counts),
    outside possessive repeats and atomic groups: the degree of the polynomial a failing
    match may cost when they overlap (``.*\\..*\\..*``)."""
    n = 0
    for op, av in parsed:
        if op in _REPEATS:
            n += av[1] - av[0] > 1
            n += _variable_count(av[2])
        elif op is not sre.POSSESSIVE_REPEAT and op is not sre.ATOMIC_GROUP:
            n += sum(_variable_count(child) for child in _children(op, av))
    return n


#: at most this many varying quantifiers: five overlapping ones (``(.*)\\.`` five times) cost
#: ~3 s on one 248-character name in CPython, four ~0.1 s
MAX_VARIABLE = 4

NESTED = "nests a quantifier inside a repeated group"
MANY = f"has more than {MAX_VARIABLE} quantifiers of varying count"
AMBIGUOUS = "repeats a choice between alternatives that can match the same text"


def slow_reason(pattern: str) -> str | None:
    """Why ``pattern`` (Python syntax) may take exponential time, or None; an unparsable
    pattern is left to the config's own validation."""
    try:
        parsed = sre_parse.parse(pattern)
        if _nested(parsed, False):
            return NESTED
        fold = bool(parsed.state.flags & re.IGNORECASE)
        if _ambiguous(parsed, False, fold):
            return AMBIGUOUS
        if _variable_count(parsed) > MAX_VARIABLE:
            return MANY
    except (re.error, RecursionError):
        return None
    return None


def slow_pattern(pattern: str) -> bool:
    return slow_reason(pattern) is not None


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
        elif (mapped := regex_values(key, value)) is not None:
            patterns = mapped
        else:
            field = cdef.lookup(key) if cdef is not None else None
            if field is None or field.validator is not valid_regex_list:
                continue
            patterns = split_list(value)
        for pattern in patterns:
            reason = slow_reason(pattern)
            if reason is not None:
                fix = {
                    NESTED: "(a+)+ as a+",
                    AMBIGUOUS: "(a|ab)* as the possessive (a|ab)*+",
                    MANY: "several patterns in the list instead of one",
                }[reason]
                problems.append(
                    (
                        key,
                        f"{pattern!r} {reason}, which can take exponential time on a name it "
                        f"does not match and stall the worker; rewrite it (e.g. {fix}), or set "
                        "it in the worker's YAML file",
                    )
                )
    return problems
