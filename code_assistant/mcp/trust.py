"""Which of a repository's MCP servers a person approved: the approval is kept per repository and per command line
(its command, arguments, variables or address — a changed one asks again), in the repository's state beside the
assistant's journals. The user's own servers need none."""
from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

from code_assistant.mcp.config import ServerConfig

logger = logging.getLogger(__name__)


def key(server: ServerConfig) -> str:
    return hashlib.sha256(json.dumps(server.identity(), sort_keys=True).encode()).hexdigest()


class Approvals:
    def __init__(self, path: Path) -> None:
        self.path = path

    def _keys(self) -> set[str]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            return {str(k) for k in data.get("approved", [])}
        except FileNotFoundError:
            return set()
        except (OSError, ValueError, AttributeError) as exc:
            logger.warning("the MCP approvals at %s cannot be read (%s); asking again", self.path, exc)
            return set()

    def approved(self, server: ServerConfig) -> bool:
        return key(server) in self._keys()

    def approve(self, server: ServerConfig) -> None:
        keys = self._keys() | {key(server)}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"approved": sorted(keys)}), encoding="utf-8")
        tmp.replace(self.path)
