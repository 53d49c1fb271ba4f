"""Kafka Connect converters: Connect schema + value to record bytes.

``JsonConverter`` needs only orjson; the Avro converter and the schema registry client live in
``cdc.converters.avro`` / ``cdc.converters.schema_registry`` and pull in fastavro and httpx (the
``avro`` extra), so importing this package stays cheap.
"""

from cdc.converters.base import ConversionError, Converter
from cdc.converters.factory import converter_from_config
from cdc.converters.json import JsonConverter

__all__ = ["ConversionError", "Converter", "JsonConverter", "converter_from_config"]
