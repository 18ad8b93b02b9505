"""Entrance: search/replace edits with backups and byte-exact rollback (code in code_assistant/edit/)."""
from code_assistant.edit.editor import FileEditor
from code_assistant.edit.edits import EditOperation, EditResult, PathError

__all__ = ["EditOperation", "EditResult", "FileEditor", "PathError"]
