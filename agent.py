"""Entrance: the plan → edit → test → fix loop (code in code_assistant/agent/): a Run on the kit the workspace builds."""
from code_assistant.agent.kit import Kit, LoopConfig
from code_assistant.agent.loop import Run
from code_assistant.agent.state import RunResult

__all__ = ["Kit", "LoopConfig", "Run", "RunResult"]
