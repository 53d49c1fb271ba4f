"""Kafka Connect-style schemas, Debezium's logical types, and the table schema builder."""
