"""The tidemark worker: the daemon that hosts connectors, its CLI and its REST API."""
