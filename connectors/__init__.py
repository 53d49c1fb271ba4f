"""Source connectors, one package per database."""
