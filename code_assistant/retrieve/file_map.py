"""The map of the ranked files a context does not show: a line per file with its top-level names, then more files
by path alone, grouped by directory - a few tokens a file, so the model can still ask to read one that ranks far
down."""
from __future__ import annotations

import posixpath
from collections.abc import Callable
from dataclasses import dataclass, field

from code_assistant import tokens
from code_assistant.index.indexer import RepoIndex

MAP_FILES = 40           # lines on the map at most, a file each with its top-level names
MAP_PATHS = 100          # then at most this many more files, only their paths, by directory
MAP_NAMES = 6            # top-level names per line

MAP_HEADER = "### More files, ranked after those above (not shown; path: its top-level names)"
LIST_HEADER = "### Further down the ranking (not shown; directory/: its files; directories in rank order)"


@dataclass
class FileMap:
    """The map of the ranked files not shown."""

    mapped: list[str] = field(default_factory=list)  # the files on its lines (path and top-level names)
    listed: list[str] = field(default_factory=list)  # then the files listed by path alone
    text: str = ""


def file_map(index: RepoIndex, paths: list[str], keep: Callable[[str], set[str]], room: int) -> FileMap:
    """The map of the ranked files not shown, in at most `room` tokens: a line per file in rank order (MAP_FILES at
    most), its path and up to MAP_NAMES top-level names, those the task names first; then the next files (MAP_PATHS
    at most) by path alone, grouped by directory (path_list) — a few tokens a file, so the model can still ask to
    read a file that ranks far down."""
    lines: list[str] = []
    mapped: list[str] = []
    used = tokens.count_tokens(MAP_HEADER) + 2
    paths = [p for p in paths if p in index.files]
    for path in paths[:MAP_FILES]:
        record = index.files[path]
        defined = {q for q, *_ in record.symbols}  # a top name's owner is not defined in the file: `Calc`, and
        tops = list(dict.fromkeys(q for q, *_ in record.symbols if q.rpartition(".")[0] not in defined))  # `res.x`
        wanted = {*keep(path), *(q.split(".", 1)[0] for q in keep(path))}
        names = [*(n for n in tops if n in wanted), *(n for n in tops if n not in wanted)][:MAP_NAMES]
        line = f"{path}: {', '.join(names)}{', …' if len(tops) > len(names) else ''}" if names else path
        cost = tokens.count_tokens(line) + 1
        if used + cost > room:
            break
        lines.append(line)
        mapped.append(path)
        used += cost
    listed = fit_paths(paths[len(mapped):len(mapped) + MAP_PATHS], room - used)

    def text(listed: list[str]) -> str:
        return "\n".join([*([MAP_HEADER, *lines] if lines else []), *([LIST_HEADER, *path_list(listed)] if listed
                                                                       else [])])

    while listed and tokens.count_tokens(text(listed)) > room:  # a seam merged differently than counted apart
        listed.pop()
    return FileMap(mapped, listed, text(listed)) if lines or listed else FileMap()


def fit_paths(paths: list[str], room: int) -> list[str]:
    """The longest prefix of paths whose path_list fits room with its header (counted piece by piece, then checked
    whole)."""
    used = tokens.count_tokens(LIST_HEADER)
    seen: set[str] = set()
    fitted: list[str] = []
    for path in paths:
        directory, name = posixpath.split(path)
        piece = f", {name}" if directory in seen else f"\n{directory or '.'}/: {name}"
        cost = tokens.count_tokens(piece)
        if used + cost > room:
            break
        seen.add(directory)
        fitted.append(path)
        used += cost
    while fitted and tokens.count_tokens("\n".join([LIST_HEADER, *path_list(fitted)])) > room:
        fitted.pop()
    return fitted


def path_list(paths: list[str]) -> list[str]:
    """Paths grouped by directory, a line each — `directory/: name, name` (`./` for the top) — the directories in
    the order of their first path, the names in the order given."""
    groups: dict[str, list[str]] = {}
    for path in paths:
        directory, name = posixpath.split(path)
        groups.setdefault(directory, []).append(name)
    return [f"{directory or '.'}/: {', '.join(names)}" for directory, names in groups.items()]
