"""Verify: run the user's real test command in its own process group and read its output into failing tests."""
