"""Retrieve: rank the repository's files for a task and fit the best of them into a token budget."""
