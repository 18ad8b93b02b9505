"""The parts a run is built from, each with one job, sharing one RunState: the asker (model calls), the applier
(edits), the verifier (tests), the recorder (run log and result). The run in the repository and each best-of-N
attempt are built the same way; an attempt gets its own state, editor, runner and model, the run's budget and a cancel
flag, and writes nothing of the run that started it."""
from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass

from code_assistant.agent.applier import Applier
from code_assistant.agent.asker import Asker
from code_assistant.agent.conversation import Conversation
from code_assistant.memory import Memory
from code_assistant.agent.recorder import Recorder
from code_assistant.agent.requests import Requests
from code_assistant.review import Review
from code_assistant.agent.state import RunState, UsageMeter
from code_assistant.agent.verifier import Verifier
from code_assistant.waiting import SILENT, Status
from code_assistant.edit.editor import FileEditor
from code_assistant.model.chat import ChatModel, Usage
from code_assistant.model.trajectory import Step, StepKind, Trajectory
from code_assistant.settings import Settings
from code_assistant.tools.box import Toolbox
from code_assistant.verify.runner import TestRunner


@dataclass
class Parts:
    settings: Settings
    model: ChatModel
    state: RunState
    meter: UsageMeter  # this run's usage: its model's, and (best of N) its attempts'
    requests: Requests
    conversation: Conversation
    asker: Asker
    applier: Applier
    verifier: Verifier
    recorder: Recorder
    editor: FileEditor
    say: Callable[[str], None]
    status: Status  # the waits (the tests, the model) as they go


def build_parts(settings: Settings, model: ChatModel, runner: TestRunner, editor: FileEditor, *,
                say: Callable[[str], None] = lambda line: None, trajectory: Trajectory | None = None,
                review: Review | None = None, on_token: Callable[[str], None] | None = None, status: Status = SILENT,
                pre_write: Callable[[list[str]], None] | None = None, candidate: int | None = None,
                budget: Callable[[], Usage] | None = None, cancelled: threading.Event | None = None,
                index_lock: contextlib.AbstractContextManager[object] | None = None,
                memory: Memory | None = None, tools: Toolbox | None = None, around: bool = True) -> Parts:
    """`candidate`, `budget` (the whole run's usage, which caps it), `cancelled` and `index_lock` (the shared index):
    what a best-of-N attempt gets from the run it belongs to; `memory`: a session's notes and pins; `tools`: what
    the model may call before it answers; `around`: an answer may go around a change the user made meanwhile."""
    state = RunState(step=Step(kind=StepKind.PLAN, step=0, model=model.name), candidate=candidate)
    meter = UsageMeter(model)
    requests = Requests(settings, model.window, index_lock, memory, tools)
    conversation = Conversation(requests)
    recorder = Recorder(settings, model.name, state, usage=meter.total, trajectory=trajectory,
                        sandbox=runner.sandbox.record() if runner.sandbox else None, tools=tools)
    asker = Asker(settings, model, conversation, state, say=say, budget=budget or meter.total, on_token=on_token,
                  status=status, cancelled=cancelled, flush=recorder.flush, tools=tools)
    applier = Applier(settings, editor, asker, state, say=say, review=review, pre_write=pre_write, around=around)
    return Parts(settings=settings, model=model, state=state, meter=meter, requests=requests,
                 conversation=conversation, asker=asker,
                 applier=applier, verifier=Verifier(settings, runner, say=say, status=status), recorder=recorder,
                 editor=editor, say=say, status=status)
