"""Benchmarks, run by hand from the repository root as modules: `python -m bench.<name> ...`. Numbers go to
BENCHMARKS.md; nothing here runs in the test suite."""
