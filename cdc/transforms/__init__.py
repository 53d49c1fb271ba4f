"""Single message transforms (SMTs): Kafka Connect's per-record rewrite step, in Python.

The worker builds one :class:`TransformChain` per connector with :func:`build_chain` from the
connector's flat config (``transforms=...``, ``predicates=...``) and runs every record through
it before conversion. The concrete transforms are imported lazily by the chain, so importing
this package stays cheap.
"""

from cdc.transforms.base import (
    PluginConfig,
    Predicate,
    Stage,
    Transformation,
    TransformChain,
    TransformConfigError,
    TransformError,
    build_chain,
    register_predicate,
    register_transformation,
)

__all__ = [
    "PluginConfig",
    "Predicate",
    "Stage",
    "TransformChain",
    "TransformConfigError",
    "TransformError",
    "Transformation",
    "build_chain",
    "register_predicate",
    "register_transformation",
]
