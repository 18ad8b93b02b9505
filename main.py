"""Entrance from a checkout: `python main.py --repo PATH --task "..."` runs the same CLI as `code-assistant`."""
from code_assistant.cli import entry, main  # noqa: F401 - main: the CLI as a function, for scripts

if __name__ == "__main__":
    entry()
