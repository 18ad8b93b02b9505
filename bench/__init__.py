"""Benchmarks, run by hand from the repository root as modules: `python -m bench.<name> ...`; numbers go to
BENCHMARKS.md. The bench uses the package, never the other way round: the ranking's fitted weights are the package's
own data (code_assistant/retrieve/fusion_weights.json), which `python -m bench.fit_ranking --write` rewrites, and
tests/test_no_bench.py fails if the package or the test suite imports bench. The bench's own tests are in
bench/tests, outside the suite (testpaths = tests): `python -m pytest bench/tests`."""
