"""Entrance from a checkout: `python main.py --repo PATH --task "..."` runs the same CLI as `code-assistant`."""
import sys

from code_assistant.cli import main

if __name__ == "__main__":
    sys.exit(main())
