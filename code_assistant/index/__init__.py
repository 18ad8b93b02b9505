"""Index: which files a repository has, what they define and import, their BM25 postings and chunk vectors, kept
incrementally in one SQLite file per repository plus a ChromaDB collection."""
