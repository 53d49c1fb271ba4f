"""tidemark core: the engine every connector plugs into."""

__version__ = "0.1.0"
