"""Entrance: the incremental repository index (code in code_assistant/index/)."""
from code_assistant.index.indexer import Indexer, IndexStats, RepoIndex

__all__ = ["IndexStats", "Indexer", "RepoIndex"]
