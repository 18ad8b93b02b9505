"""The docs hold together: the README is the door to every page of docs/, and every relative link in the README and
the pages leads to a file that exists — and to a heading of it, where the link names one (GitHub's anchors)."""
from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

from tests.repos import ROOT

README = ROOT / "README.md"
PAGES = sorted((ROOT / "docs").glob("*.md"))
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def prose(text: str) -> str:
    """The text without its fenced blocks and inline code, where brackets and parentheses are not links."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
    return re.sub(r"`[^`\n]*`", "", text)


def anchors(page: Path) -> set[str]:
    """The anchors GitHub makes of a page's headings: lower case, punctuation dropped, spaces as hyphens, a repeated
    one numbered."""
    seen: dict[str, int] = {}
    found = set()
    for line in prose(page.read_text()).splitlines():
        if heading := re.match(r"^#{1,6}\s+(.*?)\s*#*$", line):
            slug = re.sub(r"[^\w\- ]", "", heading.group(1).replace("`", "").lower()).replace(" ", "-")
            found.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
            seen[slug] = seen.get(slug, 0) + 1
    return found


def links(page: Path) -> list[str]:
    return [target for target in LINK.findall(prose(page.read_text()))
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target)]  # http:, https:, mailto: lead elsewhere


def test_anchors_are_githubs() -> None:
    assert anchors(ROOT / "docs" / "runs.md") >= {"best-of-n---candidates", "what-you-see", "when-the-tests-cannot-run"}
    assert "approvals-a-repositorys-server-and-its-mcp-servers" in anchors(ROOT / "docs" / "sandbox-and-secrets.md")


def test_every_docs_page_is_linked_from_the_readme() -> None:
    linked = {(README.parent / unquote(target.split("#")[0])).resolve() for target in links(README)}
    assert len(PAGES) >= 8
    assert [page.name for page in PAGES if page.resolve() not in linked] == []


@pytest.mark.parametrize("page", [README, *PAGES], ids=lambda p: p.name)
def test_every_relative_link_leads_to_a_file_and_its_heading(page: Path) -> None:
    broken = []
    for target in links(page):
        path, _, anchor = unquote(target).partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no heading #{anchor} in {file.name}")
    assert broken == []
