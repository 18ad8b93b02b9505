"""Entrance: the settings of a run (code in code_assistant/settings.py)."""
from code_assistant.errors import ConfigError
from code_assistant.settings import DEFAULT_MODEL, DEFAULT_TEST_COMMAND, Settings, load_settings

__all__ = ["DEFAULT_MODEL", "DEFAULT_TEST_COMMAND", "ConfigError", "Settings", "load_settings"]
