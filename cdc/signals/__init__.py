"""Signals: commands sent to a running connector (Debezium's signalling)."""
