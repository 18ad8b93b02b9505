"""Entrance: the plan → edit → test → fix loop (code in code_assistant/agent/)."""
from code_assistant.agent.loop import Agent
from code_assistant.agent.state import RunResult

__all__ = ["Agent", "RunResult"]
