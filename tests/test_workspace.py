"""The workspace's values are decided once: the settings stay as loaded, the server a repository's .env names is
approved apart (asked once), and what a run's kit reads is the same whichever part was asked for first. The real
`openai` client talks to a scripted server on 127.0.0.1; the person's answer is a callable."""
from __future__ import annotations

from pathlib import Path

import pytest

from code_assistant.agent.kit import loop_config, request_config
from code_assistant.display import Display
from code_assistant.settings import BASE_URL_APPROVALS, load_settings
from code_assistant.workspace import Workspace
from tests.repos import PYTEST, python_repo
from tests.scripted_server import ScriptedServer


def _approving(asked: list[str]) -> Display:
    """A person at a terminal who says yes, the questions kept."""
    return Display(confirm=lambda question: asked.append(question) is None)


def test_what_a_run_reads_is_the_same_whether_the_model_was_opened_before_or_after(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    with ScriptedServer([]) as server:
        (repo / ".env").write_text(f"OPENAI_BASE_URL={server.url}\n")  # a server the person has not approved yet
        seen = []
        approvals = load_settings(repo).repo_state_dir / BASE_URL_APPROVALS
        for order in ("configs first", "model first"):
            approvals.unlink(missing_ok=True)  # asked afresh each time
            settings = load_settings(repo, test_command=PYTEST, max_cost=1.0)
            asked: list[str] = []
            with Workspace(settings, _approving(asked)) as workspace:
                if order == "configs first":
                    configs = loop_config(workspace.settings), request_config(workspace.settings)
                    model = workspace.model
                else:
                    model = workspace.model
                    configs = loop_config(workspace.settings), request_config(workspace.settings)
                kept = workspace.settings is settings and settings.base_url is None
                seen.append((configs, model.base_url, len(asked), kept))
    (loop_a, requests_a), url_a, asked_a, kept_a = seen[0]
    (loop_b, requests_b), url_b, asked_b, kept_b = seen[1]
    assert loop_a == loop_b and loop_a.budget.base_url == server.url, "the cap is priced for the same server"
    assert requests_a == requests_b
    assert url_a == url_b == server.url and asked_a == asked_b == 1, "asked once, the approved server used"
    assert kept_a and kept_b, "the settings stay as loaded"


def test_a_sessions_model_switch_is_what_later_parts_read_and_the_settings_stay(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    with ScriptedServer([]) as server:
        settings = load_settings(repo, test_command=PYTEST, base_url=server.url, model="first-model")
        with Workspace(settings) as workspace:
            assert workspace.model.name == "first-model"
            switched = workspace.switch_model("second-model")
            assert workspace.model is switched and switched.name == "second-model"
            assert workspace.settings.model == "first-model", "the settings stay as loaded"


def test_the_test_command_is_checked_without_a_sandbox_which_is_resolved_once_on_first_need(tmp_path: Path) -> None:
    from code_assistant.verify.runner import TestCommandError
    from code_assistant.verify.sandbox import Sandbox, resolve
    from code_assistant.verify.testing import Testing

    repo = python_repo(tmp_path)
    resolved = []

    def sandbox() -> Sandbox:  # the real resolution, counted
        resolved.append(1)
        return resolve("off")

    settings = load_settings(repo, test_command=PYTEST)
    testing = Testing.of(settings, sandbox)
    testing.check()
    assert resolved == [], "checking the command resolves no sandbox"
    run, attempt = testing.runner(), testing.runner(tmp_path / "copy", candidate=2)
    assert resolved == [1] and run.sandbox is attempt.sandbox is testing.sandbox
    assert (run.cwd, attempt.cwd) == (repo, tmp_path / "copy")
    assert (run.running_file, attempt.running_file) == (testing.running, testing.running.with_name("running-tests-2"))
    with pytest.raises(TestCommandError, match="not found"):
        Testing.of(load_settings(repo, test_command="no-such-command-here"), sandbox).check()
    assert resolved == [1]
