"""Edit-matching benchmark built from real hunks in public git history.

For each hunk of recent commits touching .py/.js/.go files: the file before the commit, search = old lines plus
context, replace = new lines plus context, expected = the file with that hunk alone applied. Each case is drifted the
way models drift (indentation lost / shifted / tabs<->spaces, trailing spaces, intraline spacing, final newline lost,
CRLF file, the search starting and/or stopping mid-line) and negatives are added (a mutated line; the region
duplicated; a mid-line search that the duplicate makes ambiguous). Every case goes through
`FileEditor(repo_path=...).apply_edit(EditOperation(...))` on a temp repo. Prints a markdown table.

    python -m bench.edits /path/to/repo.git [more repos] --commits 300 --max-cases 1000
"""
from __future__ import annotations

import argparse
import difflib
import logging
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from code_assistant.edit.editor import FileEditor
from code_assistant.edit.edits import EditOperation

logger = logging.getLogger(__name__)
EXTENSIONS = (".py", ".js", ".go")
HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
Lines = list[str]


@dataclass
class Hunk:
    path: str
    before: str  # the whole file before the commit
    start: int  # 0-based first line of the old region
    old: Lines  # context + removed lines
    new: Lines  # context + added lines
    origin: str  # "repo@sha:path"


def git(repo: Path, *args: str) -> bytes:
    bare = (repo / "HEAD").is_file() and not (repo / ".git").exists()
    where = [f"--git-dir={repo}"] if bare else ["-C", str(repo)]
    return subprocess.run(["git", *where, *args], check=True, capture_output=True).stdout


def hunks_from_repo(git_dir: Path, commits: int) -> list[Hunk]:
    shas = git(git_dir, "log", f"-n{commits}", "--no-merges", "--format=%H", "--", *[f"*{e}" for e in EXTENSIONS])
    out: list[Hunk] = []
    for sha in shas.decode().split():
        try:
            patch = git(git_dir, "show", "--format=", "--no-color", "--no-ext-diff", "--no-renames", "-U3", sha,
                        "--", *[f"*{e}" for e in EXTENSIONS]).decode("utf-8")
        except (subprocess.CalledProcessError, UnicodeDecodeError):
            continue
        out += _parse_patch(git_dir, sha, patch)
    return out


def _parse_patch(git_dir: Path, sha: str, patch: str) -> list[Hunk]:
    hunks: list[Hunk] = []
    path: str | None = None
    before: str | None = None
    lines = patch.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("diff --git "):
            path, before = None, None
        elif line.startswith("--- "):
            path = line[6:] if line.startswith("--- a/") else None
            try:
                before = git(git_dir, "show", f"{sha}^:{path}").decode("utf-8") if path else None
            except (subprocess.CalledProcessError, UnicodeDecodeError):
                before = None
        elif (m := HUNK_RE.match(line)) and path and before is not None:
            old, new, j, broken = [], [], i + 1, False
            while j < len(lines) and lines[j][:1] in (" ", "-", "+", "\\") and not lines[j].startswith("diff "):
                tag, body = lines[j][:1], lines[j][1:]
                broken |= tag == "\\"
                if tag in (" ", "-"):
                    old.append(body)
                if tag in (" ", "+"):
                    new.append(body)
                j += 1
            if not broken and "\r" not in before:
                hunks.append(Hunk(path, before, int(m.group(1)) - 1, old, new, f"{sha[:10]}:{path}"))
            i = j
            continue
        i += 1
    return hunks


def _occurrences(file_lines: Lines, block: Lines) -> int:
    n = len(block)
    return sum(1 for i in range(len(file_lines) - n + 1) if file_lines[i: i + n] == block)


def usable(h: Hunk) -> bool:
    file_lines = h.before.split("\n")[:-1] if h.before.endswith("\n") else h.before.split("\n")
    return (sum(1 for x in h.old if x.strip()) >= 2 and h.old != h.new
            and file_lines[h.start: h.start + len(h.old)] == h.old and _occurrences(file_lines, h.old) == 1)


def expected_after(h: Hunk) -> str:
    lines = h.before.split("\n")
    return "\n".join(lines[: h.start] + h.new + lines[h.start + len(h.old):])


# ---- drifts: (search lines, replace lines) -> drifted pair, or None when the drift does not apply ----------------
def _ws(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def indent_lost(s: Lines, r: Lines) -> tuple[Lines, Lines] | None:
    prefix = os.path.commonprefix([_ws(x) for x in s if x.strip()])
    if not prefix or any(x.strip() and not x.startswith(prefix) for x in r):
        return None
    return [x[len(prefix):] for x in s], [x[len(prefix):] for x in r]


def indent_shift4(s: Lines, r: Lines) -> tuple[Lines, Lines] | None:
    return [("    " + x) if x.strip() else x for x in s], [("    " + x) if x.strip() else x for x in r]


def tabs_spaces(s: Lines, r: Lines) -> tuple[Lines, Lines] | None:
    """Tab-indented code written with 4 spaces, or 4-space-indented code written with tabs."""
    if not any(_ws(x) for x in s if x.strip()):
        return None
    to_spaces = any("\t" in _ws(x) for x in s)

    def convert(x: str) -> str:
        ws = _ws(x)
        width = len(ws.expandtabs(4))
        new = " " * width if to_spaces else "\t" * (width // 4) + " " * (width % 4)
        return new + x[len(ws):]
    return [convert(x) for x in s], [convert(x) for x in r]


def _same_in_both(s: Lines, r: Lines, change: Callable[[str], str | None], limit: int) -> tuple[Lines, Lines] | None:
    """Change up to `limit` search lines; the model copies the same spelling into its unchanged replace lines."""
    done: dict[str, str] = {}
    for x in s:
        if len(done) < limit and x.strip() and x not in done and (y := change(x)) is not None and y != x:
            done[x] = y
    if not done:
        return None
    context = {j for block in difflib.SequenceMatcher(None, s, r, autojunk=False).get_matching_blocks()
               for j in range(block.b, block.b + block.size)}  # only lines the hunk keeps, not new ones
    return [done.get(x, x) for x in s], [done.get(x, x) if j in context else x for j, x in enumerate(r)]


def trailing_ws(s: Lines, r: Lines) -> tuple[Lines, Lines] | None:
    return _same_in_both(s, r, lambda x: x + "  ", limit=len(s))


def intraline(s: Lines, r: Lines) -> tuple[Lines, Lines] | None:
    def respace(x: str) -> str | None:
        for a, b in ((" = ", "="), (", ", ","), ("(", "( "), (": ", ":"), (" + ", "+")):
            if a in x.strip():
                return x.replace(a, b)
        return None
    return _same_in_both(s, r, respace, limit=2)


def elision(s: Lines, r: Lines) -> tuple[Lines, Lines] | None:
    """Unchanged lines between two changes written as `...` in both search and replace."""
    blocks = difflib.SequenceMatcher(None, s, r, autojunk=False).get_matching_blocks()[:-1]
    inner = [b for b in blocks[1:] if b.size >= 2 and b.a > 0 and b.a + b.size < len(s) and b.b + b.size < len(r)]
    if not inner:
        return None
    b = inner[0]
    return s[: b.a] + ["..."] + s[b.a + b.size:], r[: b.b] + ["..."] + r[b.b + b.size:]


def combo(s: Lines, r: Lines) -> tuple[Lines, Lines] | None:
    """Several drifts at once: indentation lost (or shifted), trailing spaces, intraline spacing."""
    pair = indent_lost(s, r) or indent_shift4(s, r)
    assert pair is not None
    return intraline(*(trailing_ws(*pair) or pair)) or pair


DRIFTS: dict[str, Callable[[Lines, Lines], tuple[Lines, Lines] | None]] = {
    "none": lambda s, r: (s, r), "indent_lost": indent_lost, "indent_shift4": indent_shift4,
    "tabs_spaces": tabs_spaces, "trailing_ws": trailing_ws, "intraline": intraline,
    "final_newline_lost": lambda s, r: (s, r), "crlf_file": lambda s, r: (s, r), "elision": elision, "combo": combo,
    "partial_line": lambda s, r: (s, r),  # text-level: the cuts are made in main() by partial_line()
    "partial_indent_lost": lambda s, r: indent_lost(s, r),
}


_TOKEN_START_RE = re.compile(r"\w+|[^\w\s]")


def partial_line(s: Lines, r: Lines) -> tuple[str, str] | None:
    """The search (and the replacement's same context lines) starting after the first line's first token and
    stopping before the last line's last token, as models quote partial lines; text, not lines: it may end mid-line."""
    if len(s) < 2 or len(r) < 2 or s[0] != r[0] or s[-1] != r[-1] or not s[0].strip() or not s[-1].strip():
        return None
    first = [m.start() for m in _TOKEN_START_RE.finditer(s[0])]
    last = [m.start() for m in _TOKEN_START_RE.finditer(s[-1])]
    cut_head = first[1] if len(first) >= 2 else len(_ws(s[0]))
    cut_tail = len(s[-1][: last[-1]].rstrip()) if len(last) >= 2 else len(s[-1])
    if cut_head == 0 and cut_tail == len(s[-1]):
        return None
    search = [s[0][cut_head:], *s[1:-1], s[-1][:cut_tail]]
    replace = [r[0][cut_head:], *r[1:-1], r[-1][:cut_tail]]
    end = "" if cut_tail < len(s[-1]) else "\n"
    return "\n".join(search) + end, "\n".join(replace) + end


def mutate(h: Hunk, rng: random.Random) -> Lines | None:
    """The search with one name changed to another name of the file: text that is not in the file."""
    words = sorted(set(re.findall(r"\b[A-Za-z_]\w{2,}\b", h.before)))
    candidates = [i for i, x in enumerate(h.old) if re.search(r"\b[A-Za-z_]\w{2,}\b", x)]
    rng.shuffle(candidates)
    file_lines = {x.strip() for x in h.before.split("\n")}
    for i in candidates:
        word = rng.choice(re.findall(r"\b[A-Za-z_]\w{2,}\b", h.old[i]))
        others = [w for w in words if w[0] == word[0] and w != word] or [word + "s"]
        line = re.sub(rf"\b{re.escape(word)}\b", rng.choice(others), h.old[i], count=1)
        if line.strip() not in file_lines:
            return h.old[:i] + [line] + h.old[i + 1:]
    return None


def _text(lines: Lines) -> str:
    return "\n".join(lines) + "\n" if lines else ""


@dataclass
class Tally:
    cases: int = 0
    exact: int = 0
    wrong: int = 0
    refused: int = 0
    ws_only_wrong: int = 0


def run_case(repo: Path, path: str, before: str, search: str, replace: str) -> tuple[bool, str, str | None]:
    target = repo / path
    target.write_bytes(before.encode())
    editor = FileEditor(repo_path=repo)
    result = editor.apply_edit(EditOperation(path, search, replace))
    editor.finish()
    return result.ok, target.read_bytes().decode(), result.strategy


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("repos", nargs="+", type=Path)
    parser.add_argument("--commits", type=int, default=300)
    parser.add_argument("--max-cases", type=int, default=1000, help="real hunks to use (each yields ~10 cases)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--show-failures", type=int, default=0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    rng = random.Random(args.seed)
    hunks = [h for repo in args.repos for h in hunks_from_repo(repo, args.commits)]
    total = len(hunks)
    hunks = [h for h in hunks if usable(h)]
    rng.shuffle(hunks)
    hunks = hunks[: args.max_cases]
    print(f"{total} hunks read, {len(hunks)} used", file=sys.stderr)
    tallies: dict[str, Tally] = defaultdict(Tally)
    strategies: dict[str, Counter[str]] = defaultdict(Counter)
    failures: list[str] = []
    timings: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["XDG_CACHE_HOME"] = str(Path(tmp) / "cache")  # backups of the bench stay in the temp dir
        repo = Path(tmp) / "repo"
        repo.mkdir()
        for n, h in enumerate(hunks):
            path = f"case{Path(h.path).suffix}"
            expected = expected_after(h)
            for kind, drift in DRIFTS.items():
                pair = drift(h.old, h.new)
                if pair is None:
                    continue
                search, replace = _text(pair[0]), _text(pair[1])
                if kind == "final_newline_lost":
                    # the model ends its block without a newline; a trailing blank context line goes from both
                    trimmed = not pair[0][-1].strip()
                    search = search.rstrip("\n") if trimmed else search[:-1]
                    replace = replace.rstrip("\n") if trimmed else replace
                before, want = h.before, expected
                if kind == "crlf_file":
                    before, want = before.replace("\n", "\r\n"), want.replace("\n", "\r\n")
                if kind.startswith("partial_"):
                    texts = partial_line(*pair)
                    if texts is None or (kind == "partial_line" and before.count(texts[0]) != 1):
                        continue  # not cuttable, or the cut made it ambiguous (a negative case below)
                    search, replace = texts
                started = time.perf_counter()
                ok, got, strategy = run_case(repo, path, before, search, replace)
                timings.append(time.perf_counter() - started)
                tally = tallies[kind]
                tally.cases += 1
                if ok and got == want:
                    tally.exact += 1
                    strategies[kind][strategy or "?"] += 1
                elif ok:
                    tally.wrong += 1
                    tally.ws_only_wrong += "".join(got.split()) == "".join(want.split())
                    failures.append(f"WRONG {kind} {h.origin} ({strategy})")
                else:
                    tally.refused += 1
                    failures.append(f"REFUSED {kind} {h.origin}")
            negatives = {"neg_absent": (h.before, mutate(h, rng)),
                         "neg_duplicate": (h.before + "\n".join(h.old) + "\n", h.old),
                         "neg_duplicate_indent_lost": (h.before + "\n".join(h.old) + "\n",
                                                       (indent_lost(h.old, h.new) or (None,))[0])}
            cut = partial_line(h.old, h.new)
            duplicated = h.before + "\n".join(h.old) + "\n"
            for kind, (before, search_lines) in negatives.items():
                if search_lines is None:
                    continue
                ok, got, strategy = run_case(repo, path, before, _text(search_lines), _text(h.new))
                _tally_negative(tallies[kind], failures, kind, h, ok, got, before, strategy)
            if cut is not None:  # the mid-line search on a file holding the region twice (or already ambiguous)
                before = duplicated if h.before.count(cut[0]) == 1 else h.before
                ok, got, strategy = run_case(repo, path, before, cut[0], cut[1])
                _tally_negative(tallies["neg_partial_ambiguous"], failures, "neg_partial_ambiguous", h, ok, got,
                                before, strategy)
            if (n + 1) % 200 == 0:
                print(f"{n + 1}/{len(hunks)} hunks", file=sys.stderr)
    print(report(tallies, strategies, timings, [_name(r) for r in args.repos], len(hunks)))
    for line in failures[: args.show_failures]:
        print(line, file=sys.stderr)
    positives = [t for k, t in tallies.items() if not k.startswith("neg_")]
    drifted = [t for k, t in tallies.items() if not k.startswith("neg_") and k != "none"]
    rate = sum(t.exact for t in drifted) / max(1, sum(t.cases for t in drifted))
    wrong = sum(t.wrong for t in tallies.values())
    return 0 if rate >= 0.98 and wrong == 0 and positives else 1


def _tally_negative(tally: Tally, failures: list[str], kind: str, h: Hunk, ok: bool, got: str, before: str,
                    strategy: str | None) -> None:
    tally.cases += 1
    if ok or got != before:
        tally.wrong += 1
        failures.append(f"WRONG {kind} {h.origin} ({strategy})")
    else:
        tally.refused += 1


def _name(repo: Path) -> str:
    repo = repo.resolve()
    return repo.parent.name.replace("+", "/") if repo.name in ("repo", ".git") else repo.name


def report(tallies: dict[str, Tally], strategies: dict[str, Counter[str]], timings: list[float], repos: list[str],
           hunks: int) -> str:
    pct = lambda a, b: f"{100 * a / b:.1f}%" if b else "-"  # noqa: E731
    out = [f"Edit matching on {hunks} real hunks from {', '.join(repos)} "
           f"(median {1000 * sorted(timings)[len(timings) // 2]:.1f} ms per edit, incl. journal + syntax check)\n",
           "| drift | cases | applied exactly | applied wrongly | refused | exact rate | strategies |",
           "|---|---:|---:|---:|---:|---:|---|"]
    total = Tally()
    for kind, t in tallies.items():
        if kind.startswith("neg_"):
            continue
        used = ", ".join(f"{s} {c}" for s, c in strategies[kind].most_common())
        wrong = f"{t.wrong}" + (f" ({t.ws_only_wrong} whitespace-only)" if t.ws_only_wrong else "")
        out.append(f"| {kind} | {t.cases} | {t.exact} | {wrong} | {t.refused} | {pct(t.exact, t.cases)} | {used} |")
        if kind != "none":
            total.cases, total.exact = total.cases + t.cases, total.exact + t.exact
            total.wrong, total.refused = total.wrong + t.wrong, total.refused + t.refused
    out.append(f"| **all drifted** | {total.cases} | {total.exact} | {total.wrong} | {total.refused} | "
               f"{pct(total.exact, total.cases)} | |")
    out += ["", "| negative | cases | refused | wrongly applied |", "|---|---:|---:|---:|"]
    for kind, t in tallies.items():
        if kind.startswith("neg_"):
            out.append(f"| {kind[4:]} | {t.cases} | {t.refused} | {t.wrong} |")
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
