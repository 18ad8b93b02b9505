"""Parse: source text → definitions, imports, references and chunks (tree-sitter per language, regex fallback)."""
