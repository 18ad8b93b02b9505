"""`chat` (and `python main.py --repo PATH` with no --task on a terminal): a conversation with the repository. Each
line is a task for the same loop as a run — the same guardrails, journal, sandbox and run log — with the chat model,
the index and its embedding model kept in the process, a note of every finished task in the next request, and the
files the session changed pinned into the next context. A line starting with `/` is a command (`/help`)."""
from __future__ import annotations

import dataclasses
import difflib
import glob
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from code_assistant import console, interrupts
from code_assistant.commands import parts
from code_assistant.commands.ask import cut_off_line
from code_assistant.commands.run import RunOptions, one_task, open_model, preflight
from code_assistant.errors import EXIT_OK, AssistantError
from code_assistant.settings import Settings

if TYPE_CHECKING:  # the pipeline is loaded when a session opens, not when the command line is read
    from code_assistant.agent.memory import Note
    from code_assistant.agent.state import RunResult
    from code_assistant.model.chat import ChatModel

COMMANDS = {
    "/ask": "QUESTION   answer a question about the code, citing file:line; never edits",
    "/context": "[TASK]     the files a task would be shown, ranked (default: the last task)",
    "/add": "PATH...    pin files (paths or globs) into every task's context",
    "/drop": "PATH...    unpin files",
    "/diff": "           everything this session changed, as a diff",
    "/undo": "           take back the last task's change; edits made since by anyone else stay",
    "/test": "           run the test command (in the sandbox) and show its summary",
    "/model": "NAME       ask another model from now on",
    "/tokens": "           model usage and cost so far",
    "/help": "           this list",
    "/quit": "           leave (Ctrl-D does too)",
}


@dataclass(frozen=True)
class SessionOptions:
    json: bool = False
    resume: bool = False


def memory_path(settings: Settings) -> Path:
    return settings.repo_state_dir / "session.json"


def history_path(settings: Settings) -> Path:
    return settings.repo_state_dir / "prompt-history"


class Session:
    """One conversation: the model, sandbox, indexer and memory built once; a task or a command per line."""

    def __init__(self, settings: Settings, options: SessionOptions) -> None:
        from code_assistant.agent.memory import Memory
        from code_assistant.model.chat import Usage

        self.settings, self.options = settings, options
        self.say = console.quiet if options.json else console.say
        self.started = time.time()
        self.usage, self.cost = Usage(), 0.0
        self.last_task = ""
        self.memory = Memory.load(memory_path(settings)) if options.resume else Memory()
        self.sandbox, _ = preflight(settings, None)
        from code_assistant.edit.journal import RepoLock

        with RepoLock(settings.repo, settings.repo_state_dir):
            self.model: ChatModel = open_model(settings, None, self.say)
        self.say(f"[Sandbox: {self.sandbox.describe()}]")
        self.indexer = parts.build_indexer(settings)
        if options.resume and self.memory.notes:
            self.say(f"[Resumed: {len(self.memory.notes)} earlier task(s), {len(self.memory.pins)} pinned file(s)]")

    # ----- one line -------------------------------------------------------------------------------------------
    def handle(self, line: str) -> bool:
        """Run one line (a task or a command); False when the session should end."""
        text = line.strip()
        if not text:
            return True
        interrupts.rearm()
        try:
            if text.startswith("/"):
                return self.command(text)
            self.task(text)
        except KeyboardInterrupt:
            self.say("[Cancelled]")
        except AssistantError as exc:
            self.report({"error": type(exc).__name__, "message": str(exc)}, f"error: {exc}")
        return True

    def task(self, text: str) -> RunResult:
        from code_assistant.edit.journal import RepoLock

        from code_assistant.model.chat import Usage

        self.last_task = text
        self.model.usage = Usage()  # each task reports (and is capped by) its own usage; the session sums them
        with RepoLock(self.settings.repo, self.settings.repo_state_dir):
            parts.recover_interrupted(self.settings, self.say)
            result = one_task(self.settings, RunOptions(task=text, json=self.options.json), self.model,
                              say=self.say, sandbox=self.sandbox, indexer=self.indexer, memory=self.memory)
        self.usage = self.usage + result.usage
        self.cost += result.cost_usd or 0.0
        self.memory.remember(_note(text, result), result.files_modified if result.success else [])
        self.memory.save(memory_path(self.settings))
        if self.options.json:
            print(json.dumps({"task": text, **console.result_json(result), "sandbox": self.sandbox.record()}),
                  flush=True)
        else:
            console.summary(result)
        return result

    def command(self, text: str) -> bool:
        name, _, rest = text.partition(" ")
        rest = rest.strip()
        if name in ("/quit", "/exit"):
            return False
        handler: dict[str, Callable[[str], None]] = {
            "/help": self.help, "/ask": self.ask, "/context": self.context, "/add": self.add, "/drop": self.drop,
            "/diff": self.diff, "/undo": self.undo, "/test": self.test, "/model": self.switch_model,
            "/tokens": self.tokens}
        if name not in handler:
            close = difflib.get_close_matches(name, list(COMMANDS), n=3, cutoff=0.5)
            hint = f"; did you mean {' or '.join(close)}?" if close else "; /help lists them"
            self.report({"error": "unknown_command", "message": f"unknown command {name}{hint}"},
                        f"[Unknown command {name}{hint}]")
            return True
        handler[name](rest)
        return True

    def report(self, data: dict[str, object], line: str) -> None:
        """A command's outcome: a line for a person, or (--json) one object."""
        if self.options.json:
            print(json.dumps(data), flush=True)
        else:
            console.say(line)

    # ----- the commands -------------------------------------------------------------------------------------------
    def help(self, rest: str) -> None:
        lines = [f"{name:<9}{text}" for name, text in COMMANDS.items()]
        lines += ["Anything else is a task. Alt-Enter (or Esc, Enter) starts a new line; Ctrl-C cancels a task and "
                  "rolls it back; Ctrl-D leaves."]
        self.report({"command": "/help", "lines": lines}, "\n".join(lines))

    def ask(self, question: str) -> None:
        from code_assistant.agent.question import answer_question
        from code_assistant.model.chat import Usage

        if not question:
            self.report({"error": "usage", "message": "/ask QUESTION"}, "[Usage: /ask QUESTION]")
            return
        model = dataclasses.replace(self.model, schema=None, usage=Usage())
        index, _ = self.indexer.update(exclude=[self.settings.state_path])
        response, context = answer_question(index, model, question, self.settings, memory=self.memory,
                                            on_token=console.answer if self.settings.stream else None, say=self.say)
        console.end_stream()
        self.usage = self.usage + model.usage
        if self.options.json:
            print(json.dumps({"command": "/ask", "answer": response.text, "truncated": response.cut_off,
                              "files": context.paths}), flush=True)
        elif not self.settings.stream:
            console.say(response.text)
        if response.cut_off:
            self.say(cut_off_line(self.settings, model))

    def context(self, task: str) -> None:
        from code_assistant.retrieve.context import build_context

        task = task or self.last_task
        if not task:
            self.report({"error": "usage", "message": "/context TASK"}, "[Usage: /context TASK (no task yet)]")
            return
        index, _ = self.indexer.update(exclude=[self.settings.state_path])
        built = build_context(index, task, self.settings.context_tokens, must_include=self.memory.shown(),
                              embed_budget=self.settings.query_embed_budget)
        lines = [f"  {f.path}  ({f.mode}, {f.tokens} tokens)" for f in built.files]
        self.report({"command": "/context", "files": [r.path for r in built.ranking], "context_files": built.paths},
                    f"[Context for: {task}]\n" + "\n".join(lines))

    def add(self, rest: str) -> None:
        added, refused = _expand(self.settings.repo, rest.split())
        self.memory.pins = list(dict.fromkeys([*self.memory.pins, *added]))
        self.memory.save(memory_path(self.settings))
        line = (f"[Pinned: {', '.join(added)}]" if added else "[Pinned nothing]") + (
            f" [Refused: {'; '.join(refused)}]" if refused else "")
        self.report({"command": "/add", "pinned": self.memory.pins, "refused": refused}, line)

    def drop(self, rest: str) -> None:
        import fnmatch

        words = rest.split()
        self.memory.pins = [p for p in self.memory.pins if not any(fnmatch.fnmatch(p, w) for w in words)]
        self.memory.save(memory_path(self.settings))
        self.report({"command": "/drop", "pinned": self.memory.pins},
                    f"[Pinned: {', '.join(self.memory.pins) or 'nothing'}]")

    def diff(self, rest: str) -> None:
        text = session_diff(self.settings, self.started)
        if self.options.json:
            print(json.dumps({"command": "/diff", "diff": text}), flush=True)
        elif text:
            console.show_diff(text)
        else:
            console.say("[No changes in this session]")

    def undo(self, rest: str) -> None:
        from code_assistant.agent.memory import Note
        from code_assistant.edit.history import UndoError, undo_last
        from code_assistant.edit.journal import RepoLock

        try:
            with RepoLock(self.settings.repo, self.settings.repo_state_dir):
                undone = undo_last(self.settings.repo, self.settings.repo_state_dir)
        except UndoError as exc:
            self.report({"command": "/undo", "error": "undo_error", "message": str(exc)}, f"[Undo: {exc}]")
            return
        files = [o.path for o in undone.outcomes]
        self.memory.remember(Note(task="/undo", result=f"the last task's change was taken back ({', '.join(files)})"),
                             [])
        self.memory.changed = [p for p in self.memory.changed if p not in files]
        self.memory.save(memory_path(self.settings))
        if self.options.json:
            print(json.dumps({"command": "/undo", "taken_back": console.taken_back_json(undone.outcomes)}), flush=True)
        else:
            console.taken_back(undone.outcomes, "taken back")

    def test(self, rest: str) -> None:
        from code_assistant.verify.runner import TestRunner

        runner = TestRunner(self.settings.test_command, cwd=self.settings.repo, timeout=self.settings.test_timeout,
                            running_file=parts.running_tests(self.settings), sandbox=self.sandbox)
        self.say(f"[Testing: {self.settings.test_command}]")
        result = runner.run()
        self.report({"command": "/test", "passed": result.passed, "summary": result.summary(),
                     "tests_failed": result.failed_ids}, f"[Tests: {result.summary()}]")

    def switch_model(self, name: str) -> None:
        if not name:
            self.report({"command": "/model", "model": self.model.name}, f"[Model: {self.model.name}]")
            return
        self.settings = dataclasses.replace(self.settings, model=name, model_named=True)
        self.model = parts.run_model(self.settings)
        self.report({"command": "/model", "model": self.model.name},
                    f"[Model: {self.model.name}, context window {self.model.window.describe()}]")

    def tokens(self, rest: str) -> None:
        usage = self.usage
        cost = f", about ${self.cost:.4f}" if self.cost else ""
        self.report({"command": "/tokens", **console.usage_json(usage), "cost_usd": self.cost or None},
                    f"[Model usage so far: {usage.calls} call(s), {usage.prompt_tokens} prompt + "
                    f"{usage.completion_tokens} completion tokens{cost}]")


def _note(task: str, result: RunResult) -> Note:
    from code_assistant.agent.memory import Note, files_with_stat

    if result.success:
        outcome = f"done ({result.stop_reason}, iteration {result.iterations}); the change is in the files"
    else:
        detail = f": {result.message.splitlines()[0]}" if result.message and result.message != result.stop_reason else ""
        outcome = f"not done ({result.stop_reason}{detail}); everything was rolled back"
    return Note(task=task, result=outcome, files=files_with_stat(result.diff) if result.success else (),
                failing=tuple(result.tests_failed))


def _expand(repo: Path, words: Iterable[str]) -> tuple[list[str], list[str]]:
    """Paths and globs to repository-relative files; anything outside the repository (or in .git, or missing) is
    refused with the reason."""
    from code_assistant.edit.operations import PathError, resolve_repo_path

    added: list[str] = []
    refused: list[str] = []
    for word in words:
        matches = sorted(glob.glob(word, root_dir=repo, recursive=True)) if glob.has_magic(word) else [word]
        if not matches:
            refused.append(f"{word}: no file matches")
        for match in matches:
            try:
                path = resolve_repo_path(repo, match)
            except PathError as exc:
                refused.append(str(exc))
                continue
            if path.is_file():
                added.append(path.relative_to(repo.resolve()).as_posix())
            elif not glob.has_magic(word):
                refused.append(f"{word}: no such file in the repository")
    return added, refused


def session_diff(settings: Settings, since: float) -> str:
    """What this session's finished runs changed (those not undone): each file from before the first of them to
    what the last of them left."""
    from code_assistant.edit.diff import unified_diff
    from code_assistant.edit.history import kept_runs

    runs = [j for j in reversed(kept_runs(settings.repo_state_dir, settings.repo))
            if (begin := j.begin()) is not None and (begin.time or 0) >= since]
    before: dict[str, bytes | None] = {}
    after: dict[str, bytes | None] = {}
    for journal in runs:  # oldest first
        for record in journal.files():
            before.setdefault(record.path, journal.original(record))
            after[record.path] = journal.states(record)[-1]
    chunks = []
    for path, old in before.items():
        new = after[path]
        if old != new:
            chunks.append(unified_diff(None if old is None else old.decode("utf-8", "replace"),
                                       None if new is None else new.decode("utf-8", "replace"), path))
    return "".join(chunks)


def chat(settings: Settings, options: SessionOptions) -> int:
    """The session: a prompt on a terminal, else each line of stdin a task (or a command)."""
    import sys

    session = Session(settings, options)
    if sys.stdin.isatty() and not options.json:
        session.say("[Session: type a task, /help for commands; Alt-Enter for a new line, Ctrl-D to leave]")
        lines = console.prompt_lines(history_path(settings))
    else:
        lines = (line for line in sys.stdin)
    for line in lines:
        if not session.handle(line):
            break
    return EXIT_OK

