"""Our own tools, each declared once: its name, its words for the model, its arguments with their defaults, a person's
line for it, which doors reach it and whether it may be left out to fit a window; and the caps those words name.
Everything else is made from OURS: the operations of the table (`search`, `grep`, `read`, `symbol`, `exec`) and so
the command line's subcommands, the session's commands and the MCP server's tools; the model's tool list and what is
left out of it to fit (SHORT_LIST, OPTIONAL). Light on purpose: the doors read it before any tool is loaded.
looking.py and running.py do the work, each handler reading its arguments through its declaration (Spec.given)."""
from __future__ import annotations

from code_assistant.tools import Argument, Spec

GREP_LINES = 100  # lines a grep shows
READ_LINES = 400  # lines a read shows
SEARCH_FILES, SEARCH_MAX = 8, 20  # files a search shows by default, at most
RUN_TIMEOUT_S = 60  # the longest a command may run (the model may ask for less)

SEARCH = Spec.declared(
    "search", "Search the repository with its own ranking (words, identifiers, an error message): the best files for "
    "the text, each with its best-matching lines as path:line: text.",
    Argument("query", "what to look for", required=True, words=True),
    Argument("k", "files to show", type=int, default=SEARCH_FILES, flag="-k", high=SEARCH_MAX),
    summary="the repository's own ranking for a text: the best files and their best lines", leave_out=3)
GREP = Spec.declared(
    "grep", "Find a regular expression (Python syntax) in the repository's files: path:line: text, at most "
    f"{GREP_LINES} lines, and how many matches were left out.",
    Argument("pattern", "a regular expression, e.g. def max_age|max_age =", required=True),
    Argument("path_glob", "only files matching this glob, e.g. src/**/*.py", flag="--glob"),
    summary="a regular expression over the repository's files: path:line: text", short=True)
READ = Spec.declared(
    "read", f"Read lines of a file of the repository, numbered, at most {READ_LINES} a call; says how many lines the "
    "file has.",
    Argument("path", "repository-relative path", required=True),
    Argument("start", "first line", type=int, default=1),
    Argument("end", f"last line (default: start + {READ_LINES - 1})", type=int),
    summary="lines of a file, numbered", short=True)
SYMBOL = Spec.declared(
    "symbol", "Look up a name (a function, class, method, variable): where it is defined (path:line and signature) and "
    "where it is referenced (path:line).",
    Argument("name", "a function, class, method or variable, e.g. max_age or Cookie.max_age", required=True),
    summary="where a name is defined and where it is used", leave_out=2)
RUN = Spec.declared(
    "run", "Run a shell command in the repository, in the test sandbox: no network, the files read-only (a write "
    "fails; nothing you run changes the repository). Use it to run one test alone or print a value before you "
    f"answer. Returns the exit code, the time it took and the head and tail of its output; killed after "
    f"{RUN_TIMEOUT_S} s.",
    Argument("command", "a shell command, e.g. python -m pytest tests/test_cookie.py -q", required=True, words=True),
    Argument("timeout", f"seconds, at most {RUN_TIMEOUT_S}", type=int, flag="--timeout", default=RUN_TIMEOUT_S,
             high=RUN_TIMEOUT_S),
    summary="a command in the test sandbox, the repository read-only (the model's run tool)", command="exec",
    read_only=False, agents=False, leave_out=1)

OURS = (SEARCH, GREP, READ, SYMBOL, RUN)  # in the order the doors list them
SHORT_LIST = tuple(spec.name for spec in OURS if spec.short)  # what a small window is offered (described in words)
OPTIONAL = tuple(spec.name for spec in sorted(OURS, key=lambda spec: spec.leave_out) if spec.leave_out)
#   our own tools left out, in this order, when the tools do not fit the window (after the MCP servers' tools): what
#   runs goes first, what finds and reads code last
