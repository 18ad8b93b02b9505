"""What a person approved for one repository: a repository's MCP servers, the model server a repository's .env names.
An approval is kept, in the repository's state beside the assistant's journals, as the hash of what it covers (an
identity: a JSON object), never the values themselves, so that a secret it covers is never written in clear and
anything changed in it asks again. Asked on a terminal; with nobody to ask, nothing is approved."""
from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)


class Approval(StrEnum):
    KNOWN = "known"  # approved before, for exactly this
    APPROVED = "approved"  # asked now: yes (kept from now on)
    REFUSED = "refused"  # asked now: no
    UNASKED = "unasked"  # not approved before, and nobody to ask (no terminal)

    @property
    def granted(self) -> bool:
        return self in (Approval.KNOWN, Approval.APPROVED)


def digest(data: str | bytes) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def key(identity: dict[str, Any]) -> str:
    return digest(json.dumps(identity, sort_keys=True))


class Approvals:
    """One kind of approval of one repository, in one file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _keys(self) -> set[str]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            return {str(k) for k in data.get("approved", [])}
        except FileNotFoundError:
            return set()
        except (OSError, ValueError, AttributeError) as exc:
            logger.warning("the approvals at %s cannot be read (%s); asking again", self.path, exc)
            return set()

    def approved(self, identity: dict[str, Any]) -> bool:
        return key(identity) in self._keys()

    def approve(self, identity: dict[str, Any]) -> None:
        keys = self._keys() | {key(identity)}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"approved": sorted(keys)}), encoding="utf-8")
        tmp.replace(self.path)

    def ask(self, identity: dict[str, Any], question: str, confirm: Callable[[str], bool] | None) -> Approval:
        """Approved before, else asked (`confirm`: a yes/no question to the person; None: nobody to ask) and kept
        when the answer is yes."""
        if self.approved(identity):
            return Approval.KNOWN
        if confirm is None:
            return Approval.UNASKED
        if not confirm(question):
            return Approval.REFUSED
        self.approve(identity)
        return Approval.APPROVED
