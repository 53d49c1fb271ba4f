"""Where records go: Kafka."""
