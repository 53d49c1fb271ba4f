"""Benchmarks, run on demand (never in the test suite except as smoke runs)."""
