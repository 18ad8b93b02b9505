"""Rank the repository's files for a task (ranking.py) and fit the best of them into a token budget."""
from __future__ import annotations

import posixpath
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from code_assistant import languages, tokens
from code_assistant.index.indexer import FileRecord, RepoIndex
from code_assistant.parse.chunker import skeleton
from code_assistant.parse.code_parser import parse_source
from code_assistant.retrieve.counterparts import counterparts
from code_assistant.retrieve.mentions import traceback_frames
from code_assistant.retrieve.ranking import RankedFile, Ranking, rank
from code_assistant.settings import EMBED_BUDGETS

MIN_USEFUL_TOKENS = 120
CORE_FILES = 6           # the top-ranked files that all get into the context in some form
OUTLINE_MAX_TOKENS = 1500
FULL_SLACK = 64         # a rendered file is its indexed text and a header; the seam may merge a token or two
MAX_SHARE = 0.4          # of the budget, for any one core file but the first
MAP_SHARE = 0.15         # of the budget at most, kept for the map: the ranked files after those shown
MAP_FILES = 40           # lines on the map at most, a file each with its top-level names
MAP_PATHS = 100          # then at most this many more files, only their paths, by directory
MAP_NAMES = 6            # top-level names per line
MAP_MIN_BUDGET = 1000    # below this every token goes to code: no map


@dataclass
class ContextFile:
    path: str
    mode: str  # "full" | "skeleton" | "outline"
    text: str
    tokens: int


@dataclass
class Context:
    ranking: list[RankedFile]
    files: list[ContextFile]
    tokens: int
    budget: int
    budget_log: list[str]
    embedded: int = 0  # chunks the model embedded for this query
    map: list[str] = field(default_factory=list)  # ranked files after those shown: a line each, shown on request
    map_text: str = ""  # the map: its lines, then its list of paths
    listed: list[str] = field(default_factory=list)  # ranked files after the map's lines: their paths only

    @property
    def paths(self) -> list[str]:
        return [f.path for f in self.files]

    def render(self) -> str:
        return "\n\n".join([*(f.text for f in self.files), *([self.map_text] if self.map_text else [])])


def build_context(index: RepoIndex, task: str, budget: int = 12000, *, extra_text: str = "",
                  must_include: list[str] | None = None, numbered: bool = False,
                  embed_budget: int | None = EMBED_BUDGETS["local"], ranked: Ranking | None = None,
                  with_tests: bool = False) -> Context:
    """The ranked files in the budget: first a seat for each of the top CORE_FILES in its cheapest form (an
    outline of its definitions), then in rank order each upgraded to a skeleton keeping the relevant definitions,
    then to the whole file, where that still fits; then further files while room is left. `ranked`: a ranking
    already made for this task (the bench's), not made again. With with_tests, the test counterpart of the
    top-ranked source file (its tests by the language's naming convention) follows it. Last, the map: the ranked
    files after those shown, a line each with its top-level names, then the next ones by path alone, so the model
    can ask to see one (the "read" action). The code leaves the map what a map of every ranked file but the first
    would take, at most MAP_SHARE of the budget (so a repository of a few files keeps nearly all of it for code)."""
    if ranked is None:
        frames = traceback_frames(extra_text, index.repo, set(index.files)) if extra_text else []
        ranked = rank(index, task + ("\n" + extra_text if extra_text else ""), frames, embed_budget=embed_budget)
    order = _order(index, ranked, must_include or [], with_tests)

    def keep(path: str) -> set[str]:
        return ranked.hit_symbols.get(path, set()) | _symbols_named(index, path, ranked.mentions.identifiers) | (
            _symbols_at(index, path, [line for p, line in ranked.frames if p == path]))

    reserve = 0
    if budget >= MAP_MIN_BUDGET:  # what a map of every file but the first takes, up to MAP_SHARE: a repository
        most = file_map(index, order[1:], keep, int(budget * MAP_SHARE)).text  # of a few files keeps its budget
        reserve = tokens.count_tokens(most) if most else 0
    log = [f"budget {budget} tokens" + (f" ({reserve} kept for the map of more files)" if reserve else "")]
    files = _choose(index, order, keep, numbered, budget - reserve, log)  # the code gets the budget but the reserve
    used = sum(f.tokens for f in files)
    running = 0
    for f in files:
        running += f.tokens
        log.append(f"+ {f.path} ({f.mode}, {f.tokens} tokens) -> {running}/{budget}")
    chosen = {f.path for f in files}
    for path in order[:CORE_FILES]:
        if path not in chosen:
            log.append(f"skip {path}: even its outline does not fit")
    more = file_map(index, [p for p in order if p not in chosen], keep, budget - used) if reserve else FileMap()
    map_tokens = tokens.count_tokens(more.text) if more.text else 0
    if more.text:
        log.append(f"+ map of {len(more.mapped)} more files and {len(more.listed)} paths ({map_tokens} tokens) -> "
                   f"{used + map_tokens}/{budget}")
    return Context(ranking=ranked.files, files=files, tokens=used + map_tokens, budget=budget, budget_log=log,
                   embedded=ranked.embedded, map=more.mapped, map_text=more.text, listed=more.listed)


def _order(index: RepoIndex, ranked: Ranking, must_include: list[str], with_tests: bool) -> list[str]:
    """The files in the order they get a seat: those that must be shown, the ranking, the traceback's files; with
    with_tests the top source file's test after it; never a secret."""
    order = list(dict.fromkeys([*must_include, *(r.path for r in ranked.files), *(f for f, _ in ranked.frames)]))
    if with_tests:
        order = with_test_counterpart(order, set(index.files))
    return [p for p in order if not languages.is_secret_path(p)]


def _choose(index: RepoIndex, order: list[str], keep: Callable[[str], set[str]], numbered: bool, budget: int,
            log: list[str]) -> list[ContextFile]:
    """The forms of the files shown, in `order`, within budget: 1. a seat for each core file in its cheapest form,
    2. upgrades in rank order, every core file to a skeleton before any goes whole, 3. more files while room is
    left."""
    chosen: dict[str, ContextFile] = {}
    used = 0

    def options(path: str) -> list[ContextFile]:
        text = _read(index.repo / path)
        return file_forms(path, text, keep(path), numbered, index) if text is not None else []

    forms = {}
    for path in order[:CORE_FILES]:  # 1: a seat for each core file
        forms[path] = options(path)
        cheapest = forms[path][-1] if forms[path] else None
        if cheapest and used + cheapest.tokens <= budget:
            chosen[path] = cheapest
            used += cheapest.tokens
    for mode in ("skeleton", "full"):  # 2: upgrades in rank order, every core file to a skeleton before any whole
        for position, path in enumerate(list(chosen)):
            form = next((f for f in forms[path] if f.mode == mode), None)
            extra = form.tokens - chosen[path].tokens if form else 0
            share = 1.0 if position == 0 else MAX_SHARE
            if form and extra > 0 and used + extra <= budget and form.tokens <= share * budget:
                chosen[path] = form
                used += extra
    for path in order[CORE_FILES:]:  # 3: more files while room is left
        if budget - used < MIN_USEFUL_TOKENS:
            log.append(f"stop: {budget - used} tokens left")
            break
        text = _read(index.repo / path)
        form = fitting_form(path, text, keep(path), numbered, index, budget - used) if text is not None else None
        if form:
            chosen[path] = form
            used += form.tokens
        else:
            log.append(f"skip {path}: no form fits in {budget - used} left")
    return [chosen[p] for p in order if p in chosen]


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
        tops = list(dict.fromkeys(q for q, *_ in record.symbols if "." not in q))
        wanted = {q.split(".", 1)[0] for q in keep(path)}
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


def with_test_counterpart(order: list[str], files: set[str]) -> list[str]:
    """order with the nearest test of its first source file moved (or added) right after that file, unless a test
    of that file is among the core files already: a request that writes a test sees how the project writes them."""
    source = next((p for p in order[:CORE_FILES] if not languages.is_test_file(p)), None)
    tests = counterparts(source, files) if source else []
    if not tests or any(t in order[:CORE_FILES] for t in tests):
        return order
    at = order.index(source) + 1  # type: ignore[arg-type]
    return [*order[:at], tests[0], *(p for p in order[at:] if p != tests[0])]


def file_forms(path: str, text: str, keep: set[str], numbered: bool, index: RepoIndex) -> list[ContextFile]:
    """The file whole, as a skeleton and as an outline, richest first, each only if cheaper than the one before."""
    forms = [_form(path, _numbered(text) if numbered else text, "full")]
    parsed = parse_source(path, text)
    if parsed.symbols:
        forms.append(_form(path, skeleton(path, text, parsed, keep=keep), "skeleton"))
        record = index.files.get(path)
        heads = [f"{start:>5}  {sig or qual}" for qual, _kind, start, _end, sig in (record.symbols if record else [])]
        outline = _form(path, "\n".join(heads), "outline")
        while outline.tokens > OUTLINE_MAX_TOKENS and heads:
            heads = heads[: len(heads) * 3 // 4]
            outline = _form(path, "\n".join([*heads, "⋮"]), "outline")
        forms.append(outline)
    cheaper = [forms[0]]
    for form in forms[1:]:
        if form.tokens < cheaper[-1].tokens:
            cheaper.append(form)
    return cheaper


def fitting_form(path: str, text: str, keep: set[str], numbered: bool, index: RepoIndex,
                  room: int) -> ContextFile | None:
    """The first form of `file_forms` other than the outline that fits in room, building no more than needed: the
    file is not parsed when it fits whole, nor when even its skeleton's floor does not fit."""
    record = index.files.get(path)
    full = None
    if not (record and record.tokens > room + FULL_SLACK):  # its indexed size (a lower bound) rules it out
        full = _form(path, _numbered(text) if numbered else text, "full")
        if full.tokens <= room:
            return full
    if record and _skeleton_floor(record) > room:
        return None
    parsed = parse_source(path, text)
    if not parsed.symbols:
        return None
    form = _form(path, skeleton(path, text, parsed, keep=keep), "skeleton")
    return form if form.tokens <= room and (full is None or form.tokens < full.tokens) else None


def _skeleton_floor(record: FileRecord) -> int:
    """Fewest tokens a skeleton of the file can have: it shows every definition's header lines."""
    per_line: dict[int, int] = {}
    for _qualname, _kind, start, _end, signature in record.symbols:
        per_line[start] = max(per_line.get(start, 0), tokens.min_tokens(signature or ""))
    return sum(per_line.values())


def _form(path: str, text: str, mode: str) -> ContextFile:
    piece = _render_file(path, text, mode)
    return ContextFile(path, mode, piece, tokens.count_tokens(piece))


def _symbols_named(index: RepoIndex, path: str, identifiers: set[str]) -> set[str]:
    record = index.files.get(path)
    if not record or not identifiers:
        return set()
    lowered = {i.lower() for i in identifiers}
    return {q for q, *_ in record.symbols if q.rsplit(".", 1)[-1].lower() in lowered}


def _symbols_at(index: RepoIndex, path: str, lines: list[int]) -> set[str]:
    record = index.files.get(path)
    if not record or not lines:
        return set()
    return {q for q, _kind, start, end, _sig in record.symbols for line in lines if start <= line <= end}


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _numbered(text: str) -> str:
    return "\n".join(f"{i:>5}  {line}" for i, line in enumerate(text.splitlines(), start=1))


def _render_file(path: str, text: str, mode: str) -> str:
    fence = "````" if "```" in text else "```"
    label = path if mode == "full" else f"{path} ({mode})"
    return f"### {label}\n{fence}\n{text.rstrip()}\n{fence}"
