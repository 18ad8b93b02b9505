"""Rank the repository's files for a task (ranking.py) and fit the best of them into a token budget."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from code_assistant import languages, tokens
from code_assistant.index.indexer import RepoIndex
from code_assistant.retrieve.counterparts import counterparts, nearest_test
from code_assistant.retrieve.file_map import FileMap, file_map
from code_assistant.retrieve.forms import (
    OUTLINE_MAX_TOKENS,
    ContextFile,
    FileForm,
    file_forms,
    fitting_form,
    head_form,
    numbered_text,
    outline_within,
    pair_form,
    read_text,
)
from code_assistant.retrieve.mentions import FileKind, kind_of, traceback_frames
from code_assistant.retrieve.ranking import RankedFile, Ranking, rank
from code_assistant.settings import EMBED_BUDGETS, EmbeddingBackend

MIN_USEFUL_TOKENS = 120
CORE_FILES = 6           # the top-ranked files that all get into the context in some form
SEAT_TOKENS = 1250       # of the budget a seat: a small budget seats fewer files (at least one), so that the
#                          outlines of six files do not take the room the first file's code needs; at 2,500 two
#                          seats, not one: gold shown 0.73 -> 0.82 (dev) and 0.73 -> 0.84 (multilang), BENCHMARKS
SMALL_BUDGET = 3000      # below it an excerpt is not traded for a skeleton's every header: a small local model
#                          copies outlines and headers as if they were code
CORE_MAX = 10            # ... or up to this many when the ranking cannot tell them apart (core_count)
CLOSE = 1.5              # scores this close to the second file's (the fitted model's units) count as a tie with it
MAX_SHARE = 0.4          # of the budget, for any one core file but the first
MAP_SHARE = 0.15         # of the budget at most, kept for the map: the ranked files after those shown
MAP_MIN_BUDGET = 1000    # below this every token goes to code: no map
TEST_PAIRS = 3           # the top source files among the core files whose tests are shown beside them
PAIR_MAX_TOKENS = 800    # a paired test's form at most: whole when that small, else its skeleton, outline or head


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
    tests: dict[str, str] = field(default_factory=dict)  # source -> its test shown beside it (test_pairs)

    @property
    def paths(self) -> list[str]:
        return [f.path for f in self.files]

    def render(self) -> str:
        return "\n\n".join([*(f.text for f in self.files), *([self.map_text] if self.map_text else [])])


def build_context(index: RepoIndex, task: str, budget: int = 12000, *, extra_text: str = "",
                  must_include: list[str] | None = None, numbered: bool = False,
                  embed_budget: int | None = EMBED_BUDGETS[EmbeddingBackend.LOCAL], ranked: Ranking | None = None,
                  with_tests: bool = False, tests_paired: bool = True, map_files: bool = True) -> Context:
    """The ranked files in the budget: first a seat for each of the top CORE_FILES (more when the ranking cannot
    tell them apart: core_count) in its cheapest form (an outline of its definitions), then in rank order each
    upgraded to an excerpt of the relevant definitions, then to a skeleton keeping them; the tests of the top
    TEST_PAIRS source files beside them (test_pairs; tests_paired=False: none), each in at most PAIR_MAX_TOKENS;
    then the files upgraded to whole where that still fits; then further files while room is left. `ranked`: a
    ranking already made for this task (the bench's), not made again. With with_tests, the test counterpart of the
    top-ranked source file (its tests by the language's naming convention) follows it as a core file. Last, the map:
    the ranked files after those shown, a line each with its top-level names, then the next ones by path alone, so
    the model can ask to see one (the "read" action). The code leaves the map what a map of every ranked file but
    the first would take, at most MAP_SHARE of the budget (so a repository of a few files keeps nearly all of it for
    code). `map_files=False`: no map (the model has no way to ask for a file: SEARCH/REPLACE blocks and no tools)."""
    if ranked is None:
        frames = traceback_frames(extra_text, index.repo, set(index.files)) if extra_text else []
        ranked = rank(index, task + ("\n" + extra_text if extra_text else ""), frames, embed_budget=embed_budget)
    order = _order(index, ranked, must_include or [], with_tests)
    pairs = test_pairs(order, set(index.files)) if tests_paired else {}
    order = with_pairs(order, pairs)

    def keep(path: str) -> set[str]:
        return ranked.hit_symbols.get(path, set()) | _symbols_named(index, path, ranked.mentions.identifiers) | (
            _symbols_at(index, path, [line for p, line in ranked.frames if p == path]))

    reserve = 0
    if budget >= MAP_MIN_BUDGET and map_files:  # what a map of every file but the first takes, up to MAP_SHARE:
        most = file_map(index, order[1:], keep, int(budget * MAP_SHARE)).text  # a few files keep the budget
        reserve = tokens.count_tokens(most) if most else 0
    log = [f"budget {budget} tokens" + (f" ({reserve} kept for the map of more files)" if reserve else "")]
    seats = core_count(ranked.files)
    if seats > CORE_FILES:
        log.append(f"{seats} core files: the scores of ranks 2-{seats} are within {CLOSE:g} of each other")
    if (afforded := max(1, budget // SEAT_TOKENS)) < seats:
        seats = afforded
        log.append(f"{seats} core file{'s' if seats > 1 else ''}: a seat for every {SEAT_TOKENS} tokens of the budget")
    files = _choose(index, order, keep, numbered, budget - reserve, log, pairs, seats,
                    mapped=reserve > 0)  # the code: the budget less the map's
    used = sum(f.tokens for f in files)
    running = 0
    tested = {test: source for source, test in pairs.items()}
    for f in files:
        running += f.tokens
        paired = f", the test of {tested[f.path]}" if f.path in tested else ""
        log.append(f"+ {f.path} ({f.mode}, {f.tokens} tokens{paired}) -> {running}/{budget}")
    chosen = {f.path for f in files}
    for path in [p for p in order if p not in tested][:seats]:
        if path not in chosen:
            log.append(f"skip {path}: even its outline does not fit")
    more = file_map(index, [p for p in order if p not in chosen], keep, budget - used) if reserve else FileMap()
    map_tokens = tokens.count_tokens(more.text) if more.text else 0
    if more.text:
        log.append(f"+ map of {len(more.mapped)} more files and {len(more.listed)} paths ({map_tokens} tokens) -> "
                   f"{used + map_tokens}/{budget}")
    return Context(ranking=ranked.files, files=files, tokens=used + map_tokens, budget=budget, budget_log=log,
                   embedded=ranked.embedded, map=more.mapped, map_text=more.text, listed=more.listed,
                   tests={s: t for s, t in pairs.items() if t in chosen})


def _order(index: RepoIndex, ranked: Ranking, must_include: list[str], with_tests: bool) -> list[str]:
    """The files in the order they get a seat: those that must be shown, the ranking, the traceback's files; with
    with_tests the top source file's test after it; a file the index does not hold only where the read gate admits
    it (never outside the tree, never a secret)."""
    order = list(dict.fromkeys([*must_include, *(r.path for r in ranked.files), *(f for f, _ in ranked.frames)]))
    if with_tests:
        order = with_test_counterpart(order, set(index.files))
    return [p for p in order if p in index.files or index.gate.admits(p)]


def _choose(index: RepoIndex, order: list[str], keep: Callable[[str], set[str]], numbered: bool, budget: int,
            log: list[str], pairs: dict[str, str] | None = None, seats: int = CORE_FILES,
            mapped: bool = False) -> list[ContextFile]:
    """The forms of the files shown, in `order`, within budget: 1. a seat for each of the `seats` core files in its
    cheapest form (its first lines when it has no definitions and does not fit whole), 2. upgrades in rank order of
    every core file to an excerpt (the definitions that matter, whole), then to a skeleton (under SMALL_BUDGET, an
    excerpt stays one), 3. the test paired with a core file (`pairs`: source -> test) in its richest form up to
    PAIR_MAX_TOKENS (whole, skeleton, excerpt, outline, else its first lines), 4. upgrades of core files to the whole
    file in rank order (the first may take the budget unless the seats were widened: then no file takes more than
    MAX_SHARE), 5. without a map of the files not shown (`mapped`: a budget too small for one), a core file with no
    seat yet (even its outline too long) shown by the outline of its first definitions that fits what is left,
    6. more files while room is left."""
    pairs = pairs or {}
    tests = set(pairs.values())
    core = [p for p in order if p not in tests][:seats]
    chosen: dict[str, ContextFile] = {}
    used = 0

    def upgrade(mode: FileForm, unless: FileForm | None = None) -> None:
        nonlocal used
        for position, path in enumerate(p for p in chosen if p in forms):
            if chosen[path].mode == unless:
                continue
            form = next((f for f in forms[path] if f.mode == mode), None)
            extra = form.tokens - chosen[path].tokens if form else 0
            share = 1.0 if position == 0 and seats <= CORE_FILES else MAX_SHARE  # close: no file takes it all
            if form and extra > 0 and used + extra <= budget and form.tokens <= share * budget:
                chosen[path] = form
                used += extra

    forms = {}
    for path in core:  # 1: a seat for each core file
        text = read_text(index, path)
        forms[path] = file_forms(path, text, keep(path), numbered, index) if text is not None else []
        cheapest = forms[path][-1] if forms[path] else None
        if text and cheapest and used + cheapest.tokens > budget and len(forms[path]) == 1:
            room = min(OUTLINE_MAX_TOKENS, budget - used)  # no definitions to outline (a file of macros): its head
            cheapest = head_form(path, numbered_text(text) if numbered else text, room)
        if cheapest and used + cheapest.tokens <= budget:
            chosen[path] = cheapest
            used += cheapest.tokens
    upgrade(FileForm.EXCERPT)  # 2: the definitions that matter, whole, then every header beside them
    small = budget < SMALL_BUDGET  # an excerpt is not traded for a skeleton's every header
    upgrade(FileForm.SKELETON, unless=FileForm.EXCERPT if small else None)
    for source, test in pairs.items():  # 3: the tests of the top source files, as their code is shown
        if source in chosen:
            text = read_text(index, test)
            form = pair_form(test, text, keep(test), numbered, index, min(PAIR_MAX_TOKENS, budget - used)) if (
                text is not None) else None
            if form:
                chosen[test] = form
                used += form.tokens
            else:
                log.append(f"skip {test} (the test of {source}): no form fits in {PAIR_MAX_TOKENS} tokens")
    upgrade(FileForm.FULL)  # 4
    for path in [] if mapped else core:  # 5: a core file with no seat, by its first definitions that fit
        if path not in chosen and budget - used >= MIN_USEFUL_TOKENS and (
                cut := outline_within(path, index, budget - used)):
            chosen[path] = cut
            used += cut.tokens
    for path in order:  # 6: more files while room is left
        if path in chosen or path in forms or path in tests:
            continue
        if budget - used < MIN_USEFUL_TOKENS:
            log.append(f"stop: {budget - used} tokens left")
            break
        text = read_text(index, path)
        form = fitting_form(path, text, keep(path), numbered, index, budget - used) if text is not None else None
        if form:
            chosen[path] = form
            used += form.tokens
        else:
            log.append(f"skip {path}: no form fits in {budget - used} left")
    return [chosen[p] for p in order if p in chosen]


def core_count(ranking: list[RankedFile]) -> int:
    """How many of the top files get a seat: CORE_FILES, or, when the files after the first are close (scores
    within CLOSE of the second file's), every such file up to CORE_MAX - a ranking that cannot tell ranks 2-5 apart
    shows more files as skeletons rather than one file in full."""
    if len(ranking) <= CORE_FILES:
        return CORE_FILES
    second = ranking[1].score
    return max(CORE_FILES, sum(1 for r in ranking[:CORE_MAX] if r.score >= second - CLOSE))


def test_pairs(order: list[str], files: set[str]) -> dict[str, str]:
    """Source -> its test (counterparts.nearest_test), for each of the top TEST_PAIRS source files among the core
    files whose test is not a core file itself: the model sees how the code it reads is tested, and where a new test
    goes."""
    core = order[:CORE_FILES]
    pairs: dict[str, str] = {}
    for source in [p for p in core if kind_of(p) == FileKind.CODE][:TEST_PAIRS]:
        test = nearest_test(source, files)
        if test and test not in core and test not in pairs.values():
            pairs[source] = test
    return pairs


def with_pairs(order: list[str], pairs: dict[str, str]) -> list[str]:
    """order with each paired test right after its source (and nowhere else)."""
    tests = set(pairs.values())
    out: list[str] = []
    for path in order:
        if path not in tests:
            out.append(path)
            if path in pairs:
                out.append(pairs[path])
    return out


def with_test_counterpart(order: list[str], files: set[str]) -> list[str]:
    """order with the nearest test of its first source file moved (or added) right after that file, unless a test
    of that file is among the core files already: a request that writes a test sees how the project writes them."""
    source = next((p for p in order[:CORE_FILES] if not languages.is_test_file(p)), None)
    tests = counterparts(source, files) if source else []
    if not tests or any(t in order[:CORE_FILES] for t in tests):
        return order
    at = order.index(source) + 1  # type: ignore[arg-type]
    return [*order[:at], tests[0], *(p for p in order[at:] if p != tests[0])]


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
