"""Test support shared by every connector: the conformance suite and an in-memory source."""
