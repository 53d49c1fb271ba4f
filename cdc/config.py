"""Connector configuration: Kafka Connect's ConfigDef idea, in Python.

Connector configs are flat string maps keyed by Debezium's property names, so a declarative
table of fields (name, type, default, aliases, validator, doc) fits them better than nested
models: it validates every key at once, knows the old 1.2 names as aliases, and can answer
Kafka Connect's ``/config/validate`` with per-key errors. (The worker's own YAML, which is
nested, is a pydantic model.)
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from cdc.errors import ConfigError


class Kind(StrEnum):
    STRING = "STRING"
    INT = "INT"
    LONG = "LONG"
    BOOLEAN = "BOOLEAN"
    LIST = "LIST"
    PASSWORD = "PASSWORD"
    DOUBLE = "DOUBLE"
    CLASS = "CLASS"


_MISSING = object()

Validator = Callable[[Any], str | None]
"""Returns None when the (already typed) value is fine, else the reason it is not."""


@dataclass(frozen=True)
class ConfigField:
    name: str
    kind: Kind = Kind.STRING
    default: Any = None
    doc: str = ""
    aliases: tuple[str, ...] = ()
    required: bool = False
    validator: Validator | None = None
    group: str = "Connector"
    importance: str = "MEDIUM"
    #: values a UI offers (Kafka Connect's ``recommended_values``); enums get theirs from
    #: their :func:`one_of` validator, so only free-form keys with usual values set this.
    recommended: tuple[str, ...] = ()

    @property
    def all_names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)

    @property
    def recommended_values(self) -> list[str]:
        if self.recommended:
            return list(self.recommended)
        if isinstance(self.validator, OneOf):
            return list(self.validator.choices)
        return []


class OneOf:
    """An enum validator that also tells tooling the allowed values. Matching ignores case and
    surrounding blanks, as Debezium's enum parsing and Kafka's ``ConfigDef`` do, so a migrated
    ``snapshot.mode: INITIAL`` is accepted; ``canonical`` gives the spelling the code compares
    against, so the value the connector reads is always one of ``choices``."""

    def __init__(self, choices: Iterable[str]) -> None:
        self.choices = tuple(choices)
        self._by_folded = {c.strip().lower(): c for c in self.choices}

    def canonical(self, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        return self._by_folded.get(value.strip().lower(), value)

    def __call__(self, value: Any) -> str | None:
        if value is None or str(value).strip().lower() in self._by_folded:
            return None
        return f"must be one of {', '.join(self.choices)}"


def one_of(*choices: str) -> Validator:
    return OneOf(choices)


def at_least(minimum: int) -> Validator:
    def check(value: Any) -> str | None:
        if value is None or value >= minimum:
            return None
        return f"must be >= {minimum}"

    return check


def port_number(value: Any) -> str | None:
    if value is None or 1 <= value <= 65535:
        return None
    return "must be a TCP port, from 1 to 65535"


def broker_default_or_positive(value: Any) -> str | None:
    """Kafka's rule for a new topic's partitions and replication factor: -1 takes the broker's
    default, anything else must be at least 1."""
    if value is None or value == -1 or value >= 1:
        return None
    return "must be -1 (the broker's default) or at least 1"


def valid_regex_list(value: Any) -> str | None:
    for pattern in value or []:
        try:
            re.compile(pattern)
        except re.error as exc:
            return f"{pattern!r} is not a valid regular expression: {exc}"
    return None


def parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise ValueError("must be true or false")


def split_list(value: Any) -> list[str]:
    """Comma-separated, but commas inside a regex's ``{m,n}`` quantifier are kept."""
    if value is None:
        return []
    if isinstance(value, list | tuple):
        return [str(v).strip() for v in value if str(v).strip()]
    parts: list[str] = []
    depth = 0
    cur: list[str] = []
    for ch in str(value):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth = max(depth - 1, 0)
        if ch == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur).strip())
    return [p for p in parts if p]


_INTEGER = re.compile(r"[+-]?[0-9]+")
_RANGES = {Kind.INT: (-(2**31), 2**31 - 1), Kind.LONG: (-(2**63), 2**63 - 1)}


def _coerce(kind: Kind, value: Any) -> Any:
    if value is None:
        return None
    if kind in (Kind.INT, Kind.LONG):
        if isinstance(value, bool):
            raise ValueError("must be an integer")
        text = str(value).strip()
        # ASCII digits only: Python's int() also takes "1_000" and other scripts' digits,
        # which Kafka's ConfigDef (Java's parseInt) refuses.
        if not _INTEGER.fullmatch(text):
            raise ValueError(f"must be an integer, got {value!r}")
        number = int(text)
        low, high = _RANGES[kind]
        if not low <= number <= high:
            raise ValueError(
                f"must be an integer from {low} to {high} (Kafka's {kind.value}), got {text}"
            )
        return number
    if kind is Kind.DOUBLE:
        try:
            return float(value)
        except ValueError as exc:
            raise ValueError(f"must be a number, got {value!r}") from exc
    if kind is Kind.BOOLEAN:
        return parse_bool(value)
    if kind is Kind.LIST:
        items = split_list(value)
        if not items and isinstance(value, str) and value.strip():
            # ",," is a slip, not a wish for an empty list: for an include list the empty
            # list means "everything"
            raise ValueError(f"lists no item, only separators ({value!r})")
        return items
    return str(value)


@dataclass
class Config:
    """Typed values by canonical name, plus the raw map for prefixed pass-through keys."""

    values: dict[str, Any]
    raw: dict[str, Any]
    definition: ConfigDef = field(repr=False)

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def get(self, name: str, default: Any = None) -> Any:
        value = self.values.get(name, default)
        return default if value is None else value

    def with_prefix(self, prefix: str) -> dict[str, Any]:
        """Pass-through keys such as ``database.history.producer.*`` with the prefix removed."""
        return {k[len(prefix) :]: v for k, v in self.raw.items() if k.startswith(prefix)}

    def masked(self) -> dict[str, Any]:
        """The raw config with secrets hidden, for logs and REST responses."""
        return mask_secrets(self.raw, self.definition)


SECRET_HINTS = ("password", "secret", "sasl.jaas.config", "ssl.key", "credentials", "token")


def is_secret_key(key: str, definition: ConfigDef | None = None) -> bool:
    if definition is not None:
        f = definition.lookup(key)
        if f is not None and f.kind is Kind.PASSWORD:
            return True
    low = key.lower()
    return any(h in low for h in SECRET_HINTS)


#: ``scheme://user:password@`` in any value: MongoDB connection strings, schema registry and
#: JDBC-style URLs carry a password under keys that are not secret as a whole
_URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/@:]*:)(?P<pw>[^\s/@]+)@")


#: URL options that carry a secret: ``tlsCertificateKeyFilePassword=``, and MongoDB's
#: ``authMechanismProperties=AWS_SESSION_TOKEN:...`` (its values may hold a session token)
_OPTION_SECRET = re.compile(
    r"(?P<head>[?&;](?:[A-Za-z_.]*password|authMechanismProperties)=)(?P<pw>[^&;#\s]+)",
    re.IGNORECASE,
)


def mask_url_passwords(value: str) -> str:
    """``mongodb://cdc:********@host``: the password of each URL (and options that carry
    one) hidden, the rest (hosts, options) still shown, since it is what an operator reads
    the config for."""
    if "://" not in value:
        return value
    value = _URL_PASSWORD.sub(lambda m: f"{m['head']}********@", value)
    return _OPTION_SECRET.sub(lambda m: f"{m['head']}********", value)


def url_passwords(value: str) -> set[str]:
    """The passwords in ``value``'s URLs, as written and percent-decoded (a driver's error
    message may show either)."""
    from urllib.parse import unquote

    found: set[str] = set()
    if "://" not in value:
        return found
    for m in (*_URL_PASSWORD.finditer(value), *_OPTION_SECRET.finditer(value)):
        found |= {m["pw"], unquote(m["pw"])}
    return found


def url_options(url: str) -> list[tuple[str, str]]:
    """A URL's query options in order, separated by ``&`` or ``;`` (MongoDB's driver takes
    both, so a check that splits on ``&`` alone misses every option after a ``;``)."""
    from urllib.parse import parse_qsl, urlsplit

    try:
        query = urlsplit(url).query
    except ValueError:
        return []
    return parse_qsl(query.replace(";", "&"), keep_blank_values=True)


def mask_secrets(raw: Mapping[str, Any], definition: ConfigDef | None = None) -> dict[str, Any]:
    return {
        k: (
            "********"
            if is_secret_key(k, definition)
            else mask_url_passwords(v)
            if isinstance(v, str)
            else v
        )
        for k, v in raw.items()
    }


PassThroughRule = Callable[[str, Mapping[str, Any]], bool]
"""(key, raw config) -> the key belongs to a namespace some component reads as a whole."""


class ConfigDef:
    """An ordered set of fields; ``parse`` validates a raw map and reports every problem.

    Keys the definition does not know are passed through, as in Kafka Connect (transforms,
    converters and producer overrides read whole namespaces). :meth:`unknown_keys` turns the
    likely typos among them into warnings, never errors.
    """

    def __init__(
        self, fields: Iterable[ConfigField] = (), *, passthrough: Iterable[str] = ()
    ) -> None:
        self.fields: dict[str, ConfigField] = {}
        self._by_alias: dict[str, ConfigField] = {}
        self.checks: list[Callable[[dict[str, Any], dict[str, Any]], list[tuple[str, str]]]] = []
        #: key prefixes read as a whole by some component (``transforms.``, ``producer.``...)
        self.passthrough: list[str] = list(passthrough)
        #: pass-through keys whose names depend on other values (MySQL's ``<converter>.type``)
        self.passthrough_rules: list[PassThroughRule] = []
        #: Debezium properties known not to be implemented: a warning says they do nothing
        self.unsupported: set[str] = set()
        #: key prefixes with no effect here, each with what to use instead
        self.unsupported_prefixes: dict[str, str] = {}
        #: defined (shared) keys this connector does not read, each with what it does instead
        self.inert: dict[str, str] = {}
        self.define(*fields)

    def define(self, *fields: ConfigField) -> ConfigDef:
        for f in fields:
            self.fields[f.name] = f
            for n in f.all_names:
                self._by_alias[n] = f
        return self

    def extend(self, other: ConfigDef) -> ConfigDef:
        merged = ConfigDef([*self.fields.values(), *other.fields.values()])
        merged.checks = [*self.checks, *other.checks]
        merged.passthrough = list(dict.fromkeys([*self.passthrough, *other.passthrough]))
        merged.passthrough_rules = [*self.passthrough_rules, *other.passthrough_rules]
        merged.unsupported = self.unsupported | other.unsupported
        merged.unsupported_prefixes = {**self.unsupported_prefixes, **other.unsupported_prefixes}
        merged.inert = {**self.inert, **other.inert}
        return merged

    def check(
        self, func: Callable[[dict[str, Any], dict[str, Any]], list[tuple[str, str]]]
    ) -> Callable[[dict[str, Any], dict[str, Any]], list[tuple[str, str]]]:
        """Register a cross-field rule: (values, raw) -> [(key, reason)]."""
        self.checks.append(func)
        return func

    def lookup(self, key: str) -> ConfigField | None:
        return self._by_alias.get(key)

    def names(self) -> list[str]:
        """Every accepted name: canonical names and their aliases."""
        return list(self._by_alias)

    def unknown_keys(self, raw: Mapping[str, Any]) -> list[tuple[str, str]]:
        """Warnings for keys that are neither defined nor pass-through and look like a typo of
        a known key (``databse.port`` -> ``database.port``). Other unknown keys pass through
        silently, as in Kafka Connect: they may be meant for a newer version or a tool. Also
        for shared keys this connector does not read (``inert``): a user who sets
        ``binary.handling.mode=hex`` on Cassandra must learn it changes nothing."""
        out: list[tuple[str, str]] = []
        for key in raw:
            field = self._by_alias.get(key)
            if field is not None and field.name in self.inert:
                out.append((key, f"has no effect on this connector: {self.inert[field.name]}"))
                continue
            if field is not None:
                continue
            if key in self.unsupported:
                out.append((key, "is a Debezium property tidemark does not implement; ignored"))
                continue
            prefix = next((p for p in self.unsupported_prefixes if key.startswith(p)), None)
            if prefix is not None:
                out.append((key, f"is ignored: {self.unsupported_prefixes[prefix]}"))
                continue
            suggestion = self.suggest(key, raw)
            if suggestion is not None:
                hint = f"did you mean `{suggestion}`? (passed through as is)"
                out.append((key, f"is not a known key; {hint}"))
        return out

    def suggest(self, key: str, raw: Mapping[str, Any] | None = None) -> str | None:
        """The known key ``key`` is most likely a misspelling of, or None."""
        names = self.names()
        prefix = next((p for p in self.passthrough if key.startswith(p)), None)
        if prefix is not None or any(rule(key, raw or {}) for rule in self.passthrough_rules):
            # Inside a pass-through namespace only its own defined keys are candidates
            # (``topic.creation.default.partiton``); the rest belongs to whoever reads it.
            names = [n for n in names if prefix is not None and n.startswith(prefix)]
            return _closest(key, names)
        folded = {n.lower(): n for n in names}
        if key.lower() in folded:
            return folded[key.lower()]
        found = _closest(key, names)
        if found is not None:
            return found
        # A misspelt namespace: ``tranforms.unwrap.type`` -> ``transforms.unwrap.type``.
        for p in self.passthrough:
            head = ".".join(key.split(".")[: p.count(".")]) + "."
            if head != p and _closest(head, [p]) is not None:
                return p + key[len(head) :]
        return None

    def validate(self, raw: Mapping[str, Any]) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        problems: list[tuple[str, str]] = []
        values: dict[str, Any] = {}
        for f in self.fields.values():
            given = [(n, raw[n]) for n in f.all_names if n in raw and raw[n] is not None]
            if len({str(v) for _, v in given}) > 1:
                names = ", ".join(n for n, _ in given)
                problems.append((f.name, f"set more than once with different values ({names})"))
            key, value = given[0] if given else (f.name, _MISSING)
            if value is _MISSING or (isinstance(value, str) and not value.strip() and f.required):
                if f.required:
                    problems.append((f.name, "is required"))
                values[f.name] = f.default
                continue
            try:
                typed = _coerce(f.kind, value)
            except ValueError as exc:
                problems.append((key, str(exc)))
                values[f.name] = f.default
                continue
            if f.validator is not None and (reason := f.validator(typed)):
                problems.append((key, reason))
            elif isinstance(f.validator, OneOf):
                typed = f.validator.canonical(typed)
            values[f.name] = typed
        written = self._names_as_written(raw)
        for rule in self.checks:
            for key, reason in rule(values, dict(raw)):
                for name, alias in written.items():  # the names the user wrote, not ours
                    reason = re.sub(rf"(?<![\w.]){re.escape(name)}(?![\w.])", alias, reason)
                problems.append((written.get(key, key), reason))
        return values, dedupe(problems)

    def _names_as_written(self, raw: Mapping[str, Any]) -> dict[str, str]:
        """Canonical name -> the alias ``raw`` uses for it, for fields set only by an alias
        (``collection.include.list`` for ``table.include.list``)."""
        out = {}
        for f in self.fields.values():
            if f.name not in raw:
                alias = next((a for a in f.aliases if a in raw), None)
                if alias is not None:
                    out[f.name] = alias
        return out

    def parse(self, raw: Mapping[str, Any]) -> Config:
        values, problems = self.validate(raw)
        if problems:
            raise ConfigError(problems)
        return Config(values, {k: v for k, v in raw.items()}, self)


def _closest(key: str, names: list[str]) -> str | None:
    found = difflib.get_close_matches(key, names, n=1, cutoff=0.85)
    return found[0] if found else None


def dedupe(problems: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Problems in order, each once (two rules may find the same one)."""
    return list(dict.fromkeys(problems))


def exclusive(
    *pairs: tuple[str, str],
) -> Callable[[dict[str, Any], dict[str, Any]], list[tuple[str, str]]]:
    """Include and exclude lists of one level may not both be set (the seed's rule)."""

    def rule(values: dict[str, Any], raw: dict[str, Any]) -> list[tuple[str, str]]:
        out = []
        for inc, exc in pairs:
            if values.get(inc) and values.get(exc):
                out.append((exc, f"cannot be used together with {inc}; set only one of them"))
        return out

    return rule
