"""``converter_from_config``: the key or value converter a connector's configuration names.

Apart from ``base.py`` so that the converters, which build on ``base``, are imported by this
factory only (no import circle); Avro is imported when chosen (the ``avro`` extra).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cdc.converters.base import (
    AVRO_CONVERTER_CLASS,
    JSON_CONVERTER_CLASS,
    SIMPLE_CONVERTER_CLASSES,
    Converter,
    SettingError,
)
from cdc.converters.json import JsonConverter
from cdc.converters.kafka_simple import simple_converter


def converter_from_config(cfg: Mapping[str, Any], *, is_key: bool) -> Converter:
    """Build the key or value converter from Kafka Connect-style keys.

    Reads ``key.converter`` / ``value.converter`` (full class name or ``json`` / ``avro``;
    JSON when absent) and hands the converter every ``<side>.converter.*`` key with the prefix
    stripped, exactly as a Connect worker configures its converters.
    """
    side = "key" if is_key else "value"
    prefix = f"{side}.converter."
    try:
        return _build(cfg, side, is_key)
    except SettingError as exc:  # named as the user wrote it: value.converter.schemas.enable
        raise SettingError(prefix + exc.key if exc.key else prefix[:-1], exc.reason) from None


def _build(cfg: Mapping[str, Any], side: str, is_key: bool) -> Converter:
    key = f"{side}.converter"
    name = str(cfg.get(key) or JSON_CONVERTER_CLASS).strip()
    prefix = key + "."
    sub = {k[len(prefix) :]: v for k, v in cfg.items() if k.startswith(prefix)}
    kind = name.lower()
    if name == JSON_CONVERTER_CLASS or kind == "json":
        return JsonConverter(sub, is_key=is_key)
    simple = simple_converter(name, sub)
    if simple is not None:
        return simple  # type: ignore[no-any-return]
    if name == AVRO_CONVERTER_CLASS or kind == "avro":
        from cdc.converters.avro import AvroConverter

        # Debezium's connector-level switch; it defaults to true once Avro is chosen.
        if "sanitize.field.names" not in sub and "sanitize.field.names" in cfg:
            sub["sanitize.field.names"] = cfg["sanitize.field.names"]
        return AvroConverter.from_config(sub, is_key=is_key)
    raise SettingError(
        "",
        f"names an unknown converter class {name!r}: expected {JSON_CONVERTER_CLASS} (or "
        f"'json'), {AVRO_CONVERTER_CLASS} (or 'avro'), or one of Kafka's "
        + ", ".join(SIMPLE_CONVERTER_CLASSES),
    )
