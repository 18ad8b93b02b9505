"""Prompt texts, each with a version id that is logged with every call.

Changing a text without bumping its version fails tests/test_prompts.py.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Prompt:
    version: str
    text: str

    def render(self, **values: object) -> str:
        return self.text.format(**values)


_EDIT_FORMAT = """\
Answer with ONE JSON object and nothing else, of this form (each <...> is yours to fill in):
{{"changes": [{{"file_path": "<the path of the file to change, as the context names it>", "action": "modify",
  "description": "<why>", "search": "<lines copied exactly from that file>", "replace": "<what they become>"}}]}}

Actions:
- "modify": "search" is a contiguous block copied exactly from the current file named by "file_path" (include 2-3
  lines of context so it is unique) - never lines of a test, of the task or of the test output, which are not in
  that file; "replace" is what those lines become. Several edits to one file are several changes.
- "create": a new file; put the whole text in "content". Set "overwrite": true only to replace an existing file.
- "delete": remove the file.
- "replace_symbol": replace a whole definition; "symbol" is its qualified name (e.g. "Calc.add"),
  "content" the complete new definition. The surest way to change a function: nothing has to be copied exactly.
- "insert_after_symbol": add "content" (e.g. a new function) right after the definition named by "symbol".
- "read": you need to see a file in full before you change it (one from the map of more files at the end of the
  context, for example). An answer with "read" changes is answered with those files shown first and nothing else
  in it is applied; ask at most once.
Paths are relative to the repository root. Never edit files outside it, never weaken or delete tests,
never add skip/xfail markers. Keep changes minimal and focused on the task."""

SYSTEM = Prompt("system/v1.3.0", f"""\
You are a careful senior software engineer working inside the user's repository.
You change code through a JSON plan of edits that a tool applies, then the project's tests are run.

{_EDIT_FORMAT}""")

# The same rules for a model that writes SEARCH/REPLACE blocks (--edit-format blocks): plain text, nothing to escape,
# the search text under the file's name, where a small model copies it from the file rather than from the test.
SYSTEM_BLOCKS = Prompt("system-blocks/v1.0.0", """\
You are a careful senior software engineer working inside the user's repository.
You change code with SEARCH/REPLACE blocks that a tool applies, then the project's tests are run.

Answer with SEARCH/REPLACE blocks only, each of this form (each <...> is yours to fill in):

<the path of the file to change, as the context names it>
```
<<<<<<< SEARCH
<lines copied exactly from that file>
=======
<what they become>
>>>>>>> REPLACE
```

The SEARCH lines are a contiguous block copied exactly from the current file named above the block (2-3 lines of
context so it is unique) - never lines of a test, of the task or of the test output, which are not in that file.
Several changes are several blocks. An empty SEARCH creates a new file. The failing tests say what the code must
do: change the code they call, not the tests.
Paths are relative to the repository root. Never edit files outside it, never weaken or delete tests,
never add skip/xfail markers. Keep changes minimal and focused on the task.""")

# One exchange shown before a blocks request's own (a user message and the answer to it): Qwen2.5-Coder-1.5B, told
# the form with <...> placeholders, sent `<the path of the file to change, ...>` as the path, a fence with the path
# in its marker, or the definition unchanged with no SEARCH; shown this exchange, it sent a path and a block each
# time, with a change (pager-page-slice, eight samples: two held the fix; calc-add's fix kept; BENCHMARKS.md).
EXAMPLE_BLOCKS_FILE = "hello/greeting.py"  # the example's file: an answer that edits it copied the example
EXAMPLE_BLOCKS_TASK = Prompt("example-blocks-task/v1.0.0", """\
# Task
greet() must say hello, not goodbye.

# Repository context
### hello/greeting.py
```
def greet(name):
    return "goodbye " + name
```

Plan the changes that complete the task so that the tests pass. Reply with SEARCH/REPLACE blocks only.""")
EXAMPLE_BLOCKS_ANSWER = Prompt("example-blocks-answer/v1.0.0", """\
hello/greeting.py
```
<<<<<<< SEARCH
def greet(name):
    return "goodbye " + name
=======
def greet(name):
    return "hello " + name
>>>>>>> REPLACE
```""")

# What the requests written for the JSON plan say of their answer, as said to a model that writes blocks (the
# prompts keep one text and one version each; test_edit_format checks every JSON reply of theirs has its line here).
IN_BLOCKS: dict[str, str] = {  # in order: the reproduction request's own words before the words every request ends with
    "It will be run alone now and must fail. Reply with the JSON object only.":
        "It will be run alone now and must fail. Reply with SEARCH/REPLACE blocks only: a new test file is its path, "
        "then a block with an empty SEARCH and the whole file after `=======`.",
    "Reply with the JSON object only.": "Reply with SEARCH/REPLACE blocks only.",
    "Reply with a JSON object of further changes (search text must match the CURRENT content shown above).":
        "Reply with SEARCH/REPLACE blocks of further changes (SEARCH text must match the CURRENT content shown above).",
    'Reply again with exactly one JSON object of the form {"changes": [...]} and nothing else.':
        "Reply again with SEARCH/REPLACE blocks only, each under the path of its file.",
    "the JSON object of changes only": "SEARCH/REPLACE blocks only",
    "keep the JSON answer format": "keep the SEARCH/REPLACE answer format",
    "the answer contains no JSON object": "the answer contains no SEARCH/REPLACE block",  # the parser's, re-asked
}


def in_blocks(text: str) -> str:
    """A request's text with what it says of the JSON answer said of SEARCH/REPLACE blocks."""
    for json_words, block_words in IN_BLOCKS.items():
        text = text.replace(json_words, block_words)
    return text


# What PLAN says of an excerpt, where the context holds one ("" elsewhere: a request's every token changes what a small
# model answers at temperature 0, and calc-add's resolved request lost its fix to this sentence)
EXCERPTS = (" Files marked (excerpt) show only the relevant definitions, in full; a `⋮` line stands for lines left "
            "out and is no search text either.")


def excerpts_said(forms: Iterable[str]) -> str:
    """PLAN's words on excerpts for a context whose files take these forms (retrieve/forms.py's FileForm values)."""
    return EXCERPTS if "excerpt" in forms else ""


PLAN = Prompt("plan/v1.3.0", """\
# Task
{task}

# Test command
`{test_command}` — current status before any change: {baseline}

{baseline_failures}# Repository context
The most relevant files, ranked. Files marked (skeleton) show the relevant definitions in full and only the
signatures of the rest; an elided body reads `...  # lines N-M`.{excerpts} Never use a skeleton's elision lines as search text.

{context}

Plan the changes that complete the task so that the tests pass. Reply with the JSON object only.""")

FIX = Prompt("fix/v1.0.0", """\
The tests still fail after your changes (iteration {iteration} of {max_iterations}).

# Test result
{summary}

# Failing tests
{failures}

{edit_feedback}# Current content of the files involved
{files}

Reply with a JSON object of further changes (search text must match the CURRENT content shown above).""")

SYNTAX = Prompt("syntax/v1.0.0", """\
{feedback}The tests have not been run: a file no longer parses. Send the edits that repair the syntax error (search text
must match the file as it is NOW, with your earlier edits applied). Reply with the JSON object only.""")

REASK = Prompt("reask/v1.0.0", """\
Your answer could not be used: {error}
Reply again with exactly one JSON object of the form {{"changes": [...]}} and nothing else.""")

ASK = Prompt("ask/v1.0.0", """\
You answer questions about the user's repository from the files below. Every file is shown with line numbers.
Cite the code you rely on as `path:line` or `path:start-end` (for example `pkg/calc.py:12-18`). If the files do
not contain the answer, say so and name where you would look next. Do not propose edits unless asked.

# Question
{question}

# Repository context
{context}""")

REPRODUCE = Prompt("reproduce/v1.0.0", """\
# Task
{task}

# Test command
`{test_command}` — current status: {baseline}

# Repository context
{context}

Before anything is fixed, write ONE test that captures the task: it must FAIL on the code as it is now, for the
reason the task describes, and pass once the task is done. Put it in a test file of the project (a new file, or a
new test function added to an existing test file) following the project's test conventions; change nothing else.
It will be run alone now and must fail. Reply with the JSON object only.""")

FIRST_TEST = Prompt("first-test/v1.0.0", """
The repository has no tests yet: this test is its first. Write it as {how}, so that `{test_command}` runs it. It
stays in the repository with the fix. Reply with the JSON object only.""")

REPRODUCE_AGAIN = Prompt("reproduce-again/v1.0.0", """\
Your test PASSES on the current code, so it does not capture the task:
{output}
Change it so that it fails now, for the reason the task describes (search text must match the test file as it is
NOW). Reply with the JSON object only.""")

REPRODUCE_UNRUN = Prompt("reproduce-unrun/v1.0.0", """\
Your test did NOT RUN, so it reproduces nothing: {why}.
{output}
A reproduction test must run and fail on an assertion (or on the error the task describes), not fail to be collected
or imported. Change the test (its imports, where it is, how it names the code it tests) so that the test command runs
it (search text must match the test file as it is NOW). Reply with the JSON object only.""")

REPRODUCED = Prompt("reproduced/v1.0.0", """\
# A test that reproduces the task
{paths} was added and fails on the current code, as it should:
{output}
Your changes must make it pass, together with the whole suite. Do not change or weaken this test.

""")

# The plan after a reproduction step, asked in that step's conversation (agent/loop.py): the server has just read
# the task and the code with the reproduction request, and a server that keeps the last prompt (llama.cpp) reads
# only this message. {reproduction}: REPRODUCED, or the words that no test was kept.
PLAN_NEXT = Prompt("plan-next/v1.0.0", """\
{reproduction}Now plan the changes that complete the task so that the tests pass. The files shown above are as they
are now: copy search text from them, never from a test, the task or the test output.
Reply with the JSON object only.""")

NOT_REPRODUCED = "# No reproduction test was kept ({note}): the tests are as they were.\n\n"

READ = Prompt("read/v1.0.0", """\
# The files you asked to read
Shown first in the context above: {shown}. Not files of this repository (only the files in the context and on its
map of more files can be read): {refused}. Now send the changes; do not ask to read again.""")

UNAPPLIED = Prompt("unapplied/v1.1.0", """\
{feedback}Nothing of your last answer was written, so the tests were not run. Send the changes again, corrected as
said above, with search text copied from the files as they are NOW (shown above). Reply with the JSON object only.""")

INSTRUCTIONS = Prompt("instructions/v1.0.0", """
# The repository owner's instructions ({names})
Follow them where they apply to the task. They never override the rules above: never edit files outside the
repository, never weaken, skip or delete tests, and keep the JSON answer format.

{text}""")

SESSION = Prompt("session/v1.0.0", """# Earlier in this session (newest first)
The user may refer to these earlier tasks ("now also...", "that broke..."); their changes are in the files below.
{notes}
""")

TOOLS_NATIVE = Prompt("tools-native/v1.0.0", """
# Looking around
Before you answer you may call the tools you are given to find and read what you need: search (the repository's own
ranking for a text), grep (a regular expression), read (lines of a file), symbol (where a name is defined and
used){run}.
At most {max_calls} calls for this answer; a call made twice is not made again. The tools never change files: changes
come only in your answer. The context above may already hold what you need: then answer at once. When you know
enough, reply with {answer}.""")

TOOLS_JSON = Prompt("tools-json/v1.0.0", """
# Looking around
Before you answer you may call tools to find and read what you need. To call them, reply with ONLY this JSON object
(one or more calls), and nothing else:
{{"tool_calls": [{{"name": "grep", "arguments": {{"pattern": "def max_age"}}}}]}}
The results come back in the next message; then call again, or reply with {answer}. At most {max_calls} calls for
this answer; a call made twice is not made again. The tools never change files: changes come only in your answer.
The tools:
{tools}""")

TOOLS_DONE = Prompt("tools-done/v1.0.0", "You have made the {max_calls} tool calls this answer may make; no more "
                                          "tools. Reply now with {answer}.")

ALL: dict[str, Prompt] = {p.version.split("/")[0]: p for p in (SYSTEM, SYSTEM_BLOCKS, EXAMPLE_BLOCKS_TASK,
                                                                 EXAMPLE_BLOCKS_ANSWER, PLAN, FIX, SYNTAX, REASK, ASK,
                                                                 REPRODUCE, REPRODUCE_AGAIN, REPRODUCE_UNRUN, REPRODUCED,
                                                                 READ, INSTRUCTIONS, FIRST_TEST, PLAN_NEXT,
                                                                 SESSION, UNAPPLIED, TOOLS_NATIVE, TOOLS_JSON,
                                                                 TOOLS_DONE)}
