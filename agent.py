"""Entrance: the plan → edit → test → fix loop (code in code_assistant/agent.py)."""
from code_assistant.agent import Agent, RunResult

__all__ = ["Agent", "RunResult"]
