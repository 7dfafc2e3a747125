"""Benchmarks, each a sub-command of `python -m spec bench` (docs/benchmarks.md lists them)."""
