"""The tools of one run (or one question), as the model meets them: declared in OpenAI's `tools` form, or described in
words to a server without native tool calls (Form.JSON); at most `max_calls` calls an answer, after which none are
offered; a call made twice in one answer is answered with a note, not made again. A replayed run's calls are made
afresh and compared with the recorded results, and the recorded results are what the model is shown."""
from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from code_assistant import redact
from code_assistant.index.indexer import RepoIndex
from code_assistant.tools import Result, Spec, Tool, ToolError

logger = logging.getLogger(__name__)

MAX_CALLS = 12  # calls an answer may make (--max-tool-calls)


class Form(StrEnum):
    """How the model is told of its tools: OpenAI's `tools` (and `tool_calls` answers), or words in the system
    message (and calls written as a JSON object in its answer)."""

    NATIVE = "native"
    JSON = "json"


@dataclass(frozen=True)
class Made:
    """One call made: what was asked, and what the model is shown."""

    name: str
    arguments: dict[str, Any]
    result: Result
    repeated: bool = False


@dataclass
class Toolbox:
    tools: list[Tool]
    max_calls: int = MAX_CALLS
    form: Form = Form.NATIVE
    recorded: list[dict[str, Any]] | None = None  # --replay: the run log's calls, in order (made afresh, compared)
    say: Callable[[str], None] = lambda line: None
    auto: bool = False  # --tools auto: a small window gets the short list in words, a smaller one none (fit.py)
    made: list[Made] = field(default_factory=list)  # this answer's calls
    count: int = 0  # calls over the box's life (a run's --json `tools`)

    def __post_init__(self) -> None:
        self._by_name = {tool.spec.name: tool for tool in self.tools}

    @property
    def names(self) -> list[str]:
        return list(self._by_name)

    def only(self, names: list[str]) -> Toolbox:
        """The same box with fewer tools (a question gets the read-only ones)."""
        return Toolbox([t for t in self.tools if t.spec.name in names], max_calls=self.max_calls, form=self.form,
                       recorded=self.recorded, say=self.say, auto=self.auto)

    def narrow(self, names: Sequence[str], form: Form, why: str) -> bool:
        """Offer only the tools named, in `form`, from now on (the window holds no more; `why`: which window), and
        say in one line which were left out and, when they are now described in words, that. True when anything
        changed."""
        left_out = [t.spec for t in self.tools if t.spec.name not in names]
        worded = form != self.form and form == Form.JSON
        if not left_out and not worded:
            return False
        said = [f"left out to fit {why}: {_grouped(left_out, [t.spec for t in self.tools])}"] if left_out else []
        self.tools = [t for t in self.tools if t.spec.name in names]
        self._by_name, self.form = {tool.spec.name: tool for tool in self.tools}, form
        if worded and self.tools:
            said.append(f"{_listed(self.names)} described in words" + ("" if left_out else f" to fit {why}"))
        self.say(f"[Tools: {'; '.join(said)}{'; none offered' if not self.tools else ''}]")
        return True

    def new_answer(self) -> None:
        """A new request: its calls are counted from nought."""
        self.made = []

    @property
    def exhausted(self) -> bool:
        return len(self.made) >= self.max_calls

    def declared(self) -> list[dict[str, Any]] | None:
        """The `tools` a native request declares (None: none, the calls are spent, the form is words or the tools
        were withdrawn)."""
        if self.form != Form.NATIVE or self.exhausted or not self.tools:
            return None
        return [tool.spec.openai() for tool in self.tools]

    def call(self, name: str, arguments: dict[str, Any]) -> Made:
        """Make one call (or say why not) and count it."""
        key = _key(name, arguments)
        earlier = next((m for m in self.made if _key(m.name, m.arguments) == key), None)
        if earlier is not None:
            result = Result(text=f"(the same call was made above in this answer; its result is there: "
                                 f"{earlier.result.summary})", summary=f"{earlier.result.summary} (again: not made)")
            made = Made(name=name, arguments=arguments, result=result, repeated=True)
        elif self.exhausted:
            made = Made(name=name, arguments=arguments, result=Result(
                text=f"(not made: the {self.max_calls} calls of this answer are spent; answer now)",
                summary=f"{name}: not made (the {self.max_calls} calls are spent)", error=True))
        else:
            made = Made(name=name, arguments=arguments, result=self._run(name, arguments))
        self.made.append(made)
        self.count += 1
        self.say(f"[{made.result.summary}]")
        return made

    def _run(self, name: str, arguments: dict[str, Any]) -> Result:
        tool = self._by_name.get(name)
        if tool is None:
            return Result(text=f"no tool named {name!r}; the tools are: {', '.join(self.names)}",
                          summary=f"{name}: no such tool", error=True)
        if "_unreadable" in arguments:
            return Result(text=f"the arguments could not be read as a JSON object: {arguments['_unreadable']}",
                          summary=f"{name}: unreadable arguments", error=True)
        try:
            fresh = tool.call(arguments)
        except ToolError as exc:
            fresh = Result(text=f"error: {exc}", summary=f"{name}: {exc}", error=True)
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # noqa: BLE001 - a tool that fails tells the model, it does not end the run
            logger.warning("tool %s failed: %s", name, exc, exc_info=True)
            fresh = Result(text=f"error: the tool failed ({type(exc).__name__}: {exc})",
                           summary=f"{name}: failed ({type(exc).__name__})", error=True)
        return self._replayed(name, arguments, fresh) if self.recorded is not None else fresh

    def _replayed(self, name: str, arguments: dict[str, Any], fresh: Result) -> Result:
        """--replay: the recorded result of this call (the next one recorded), and a line when today's differs."""
        assert self.recorded is not None
        if not self.recorded or self.recorded[0].get("name") != name:
            self.say(f"[Replay: the run log has no recorded result for this {name} call; today's is used]")
            return fresh
        record = self.recorded.pop(0)
        if record.get("result") != redact.redact(fresh.text)[0]:  # the log holds what the model was sent
            self.say(f"[Replay: the {name} call's result differs from the recorded one; the recorded one is used]")
        return Result(text=record.get("result", ""), summary=record.get("summary", fresh.summary))


def call_words(name: str, arguments: dict[str, Any]) -> str:
    """A call in a few words, for the wait while it is made: the tool and its first text argument (the command, the
    pattern, the path…)."""
    said = next((v for v in arguments.values() if isinstance(v, str) and v.strip()), "")
    said = " ".join(said.split())
    return f"{name} ({said if len(said) <= 60 else said[:57] + '...'})" if said else name


def _grouped(left_out: list[Spec], offered: list[Spec]) -> str:
    """The tools left out, short enough for one line: ours by name; an MCP server's by name when it is the only one of
    its server left out, else as the server (`docs (all 3 tools)`, `build (5 of 7 tools)`)."""
    said: list[str] = []
    for spec in left_out:
        count = sum(s.server == spec.server for s in offered)
        gone = sum(s.server == spec.server for s in left_out)
        if not spec.server or count == 1 or gone == 1:
            said.append(spec.name)
        elif (whole := f"{spec.server} ({'all' if gone == count else f'{gone} of'} {count} tools)") not in said:
            said.append(whole)
    return ", ".join(said)


def _listed(names: list[str]) -> str:
    return " and ".join(names) if len(names) < 3 else f"{', '.join(names[:-1])} and {names[-1]}"


def _key(name: str, arguments: dict[str, Any]) -> str:
    return name + json.dumps(arguments, sort_keys=True, default=str)


ToolsFor = Callable[[Path, Callable[[], RepoIndex]], Toolbox]  # a working tree and its index -> the tools over it
