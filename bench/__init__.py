"""Benchmarks: each module here measures one claim and prints its numbers (``python -m bench`` runs them
all; ``bench/RESULTS.md`` records the latest run and the command that produced it)."""
