"""Entrance: the token-budgeted context for a task (code in code_assistant/retrieve/)."""
from code_assistant.retrieve.context import Context, ContextFile, build_context

__all__ = ["Context", "ContextFile", "build_context"]
