"""tidemark core: the engine every connector plugs into."""
