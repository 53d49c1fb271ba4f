"""Side-by-side benchmark: tidemark against the real Debezium Server and the physical limits.

    python -m bench.compare [--workloads W1,W2,...] [--rows N] [--runs 3] [--quick]

See bench/README.md for the method and docs/benchmarks.md for the figures.
"""
