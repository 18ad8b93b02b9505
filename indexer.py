"""Entrance: the incremental repository index (code in code_assistant/index/)."""
from code_assistant.index.indexer import IndexStats, Indexer, RepoIndex

__all__ = ["IndexStats", "Indexer", "RepoIndex"]
