"""The parts a run is built from its kit, each with one job: the asker (model calls), the applier (edits), the verifier
(tests), the recorder (the run log and the result), with the requests and the conversation they share. The run in
the repository and each best-of-N attempt are built the same way; an attempt gets its own kit, the run's budget and
a cancel flag, and writes nothing of the run that started it."""
from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass

from code_assistant.agent.applier import Applier
from code_assistant.agent.asker import Asker
from code_assistant.agent.conversation import Conversation
from code_assistant.agent.kit import Kit, LoopConfig
from code_assistant.agent.recorder import Recorder
from code_assistant.agent.requests import Request, Requests
from code_assistant.agent.state import Answer, UsageMeter
from code_assistant.agent.verifier import Verifier
from code_assistant.index.indexer import RepoIndex
from code_assistant.model.chat import Usage
from code_assistant.tools.box import Toolbox


@dataclass(frozen=True)
class Parts:
    meter: UsageMeter  # this run's usage: its model's, and (best of N) its attempts'
    requests: Requests
    conversation: Conversation
    asker: Asker
    applier: Applier
    verifier: Verifier
    recorder: Recorder
    tools: Toolbox | None


def build_parts(kit: Kit, config: LoopConfig, *, ask: Callable[[Request], Answer], iteration: Callable[[], int],
                index: Callable[[], RepoIndex | None], tools_index: Callable[[], RepoIndex],
                run_usage: Callable[[], Usage] | None = None, cancelled: threading.Event | None = None,
                index_lock: contextlib.AbstractContextManager[object] | None = None) -> Parts:
    """`ask`, `iteration`, `index`: the run's own (its way to ask, which counts the answers; its iteration; the index
    whose files the model may ask to read); `tools_index`: the index the model's tools look at (the run's brought up
    to date; an attempt's, the one the run started from); `run_usage` (the whole run's usage, which --max-tokens and --max-cost cap),
    `cancelled` and `index_lock` (the shared index): what a best-of-N attempt gets from the run it belongs to."""
    model, display = kit.model, kit.display
    toolbox = kit.tools(kit.tree.root, tools_index) if kit.tools else None
    meter = UsageMeter(model)
    requests = Requests(kit.requests, model.window, index_lock, kit.memory, toolbox)
    conversation = Conversation(requests)
    recorder = Recorder(model, usage=meter.total, budget=config.budget, trajectory=kit.trajectory,
                        sandbox=kit.runner.sandbox.record() if kit.runner.sandbox else None, tools=toolbox,
                        candidate=kit.candidate)
    asker = Asker(model, conversation, recorder, tree=kit.tree, budget=config.budget, spent=run_usage or meter.total,
                  iteration=iteration, index=index, say=display.say, on_token=display.run_tokens,
                  status=display.status, cancelled=cancelled, tools=toolbox, metered=meter.add,
                  sampling=config.sampling)
    applier = Applier(kit.tree, kit.editor, config.limits, ask=ask, room=requests.room, say=display.say,
                      review=display.review, guard=kit.guard, around=config.around)
    verifier = Verifier(kit.runner, config.limits, say=display.say, status=display.status)
    return Parts(meter=meter, requests=requests, conversation=conversation, asker=asker, applier=applier,
                 verifier=verifier, recorder=recorder, tools=toolbox)
