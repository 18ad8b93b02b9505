"""The bench's own tests, run by hand from the repository root: `python -m pytest bench/tests`."""
