"""A sampled plan is read as it streams: a SEARCH text that matches nowhere in its file stops the answer there, since
it cannot apply whatever follows. Qwen2.5-Coder-1.5B wrote up to a thousand tokens (50 s on a CPU) of setup.py or a
whole index.js that were not the files' lines, in answers refused when they ended (issue 58). The watch refuses only
what the matcher refuses: every text the matcher applies passes it at each of its lines."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from code_assistant.answers.search_replace import SearchWatch, searches_so_far
from code_assistant.edit.matching import apply_search_replace, cannot_match
from code_assistant.model.accepts import Accepts
from code_assistant.model.catalogue import lookup
from code_assistant.model.chat import OpenAIChat
from code_assistant.model.records import StopAnswer
from code_assistant.model.window import ContextWindow
from tests.provider_emulator import ProviderEmulator
from tests.repos import CALC_PY, python_repo, run_cli
from tests.scripted_server import ScriptedServer
from tests.test_edit_matching import SRC  # the matcher's own tests' file

# (search, replace) pairs the matcher applies to SRC, one per way it reads a model's copy
APPLIED = {
    "exact": ("def load(path):\n    with open(path) as handle:\n        data = handle.read()\n",
              "def load(path):\n    with open(path) as handle:\n        data = handle.read(1)\n"),
    "lost indentation": ("value = self.items.get(key)\nif value is None:\n    raise KeyError(key)\n",
                         "value = self.items.get(key)\nif value is None:\n    return None\n"),
    "starts and stops mid-line": ("items.get(key)\n        if value is None:\n            raise KeyError",
                                  "items.get(key)\n        if value is None:\n            raise LookupError"),
    "an elision": ("class Store:\n    def get(self, key):\n...\n        return value\n",
                   "class Store:\n    def get(self, key, default=None):\n...\n        return value or default\n"),
    "a class line above its method": (
        "class Store:\n⋮\n    def put(self, key, value):\n        self.items[key] = value\n",
        "class Store:\n⋮\n    def put(self, key, value):\n        self.items[key] = 1\n"),
    "spacing inside lines": ("    def put(self,key,value):\n        self.items[key]=value\n",
                             "    def put(self,key,value):\n        self.items[key]=value\n        self.n = 1\n"),
    "a punctuation slip": ("def load(path):\n    with open(path) as handle;\n        data = handle.read()\n",
                           "def load(path):\n    with open(path) as handle;\n        data = 1\n"),
    "newlines written as \\n": ("def load(path):\\n    with open(path) as handle:",
                                "def load(p):\\n    with open(p) as handle:"),
}


@pytest.mark.parametrize("way", list(APPLIED))
def test_a_search_text_the_matcher_applies_passes_the_watch_at_every_line(way: str) -> None:
    search, replace = APPLIED[way]
    assert apply_search_replace(SRC, search, replace).ok, way
    lines = search.splitlines()
    for written in range(len(lines) + 1):
        assert cannot_match(SRC, lines[:written], closed=False) is None, (way, written)
    assert cannot_match(SRC, lines, closed=True) is None, way
    answer = f"store.py\n```\n<<<<<<< SEARCH\n{search.rstrip(chr(10))}\n=======\n{replace}>>>>>>> REPLACE\n```\n"
    watch = SearchWatch(lambda path: SRC if path == "store.py" else None)
    assert all(watch(answer[:end]) is None for end in range(len(answer) + 1)), way


def test_a_line_in_no_line_of_the_file_stops_the_answer_once_the_next_line_comes() -> None:
    lines = ["def load(path):", "    with open(filename) as fh:", "        data = fh.read()"]
    assert cannot_match(SRC, lines[:2], closed=False) is None, "the last line so far may stop mid-line"
    assert cannot_match(SRC, lines, closed=False) == "line 2 of its SEARCH text is in no line of the file"


def test_lines_of_the_file_in_another_order_stop_the_answer_where_the_order_breaks() -> None:
    lines = ["class Store:", "    def get(self, key):", "        value = self.items.get(key)",
             "        self.items[key] = value", "        return value"]
    assert cannot_match(SRC, lines[:4], closed=False) is None
    assert cannot_match(SRC, lines, closed=False) == \
        "line 4 of its SEARCH text follows its lines 2-3 nowhere in the file"


def test_a_whole_search_text_is_judged_as_the_matcher_judges_it() -> None:
    assert cannot_match(SRC, ["import sys"], closed=True) == "its SEARCH text is not in the file"
    twice = "x = 1\ny = 2\nx = 1\n"
    assert cannot_match(twice, ["x = 1"], closed=True) == "its SEARCH text is in more than one place of the file"


def test_the_blocks_of_a_partial_answer_are_read_in_whole_lines() -> None:
    partial = ("calc.py\n```\n<<<<<<< SEARCH\ndef add(a, b):\n    return a - b\n=======\n    return a + b\n"
               ">>>>>>> REPLACE\n```\n\n<<<<<<< pager.py\n    start = page * size\n    return it")
    first, second = searches_so_far(partial)
    assert (first.number, first.path, first.lines, first.closed) == (1, "calc.py", ["def add(a, b):",
                                                                                     "    return a - b"], True)
    assert (second.number, second.path, second.lines, second.closed) == (2, "pager.py", ["    start = page * size"],
                                                                         False), "the line being written waits"
    again = partial + "\n=======\n>>>>>>> REPLACE\n\n<<<<<<< SEARCH\n    return items\n"
    assert searches_so_far(again)[2].path is None, \
        "a second block for a file the answer already edits is not judged: its text may be the first one's"


def test_a_file_the_watch_is_not_given_is_not_judged() -> None:
    answer = "secrets.env\n```\n<<<<<<< SEARCH\nnothing\nlike\nthe file\n=======\n"
    assert SearchWatch(lambda path: None)(answer) is None


def test_a_sample_whose_search_text_is_not_in_the_file_is_stopped_as_it_streams(tmp_path: Path) -> None:
    """The real client over HTTP: the server sees its stream closed a few lines in, and the run goes on to the next
    sample, which fixes the bug."""
    repo = python_repo(tmp_path)
    wrong = "calc.py\n```\n<<<<<<< SEARCH\n    return a - b\n=======\n    return a * b\n>>>>>>> REPLACE\n```\n"
    made_up = "".join(f"    total_{n} = compute({n})\n" for n in range(150))
    long = f"calc.py\n```\n<<<<<<< SEARCH\ndef add(a, b):\n{made_up}=======\n{made_up}>>>>>>> REPLACE\n```\n"
    right = wrong.replace("a * b", "a + b")
    with ScriptedServer([wrong, {"gap": 0.01, "answer": long}, right]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "Fix add()", "--test-command", f"{sys.executable} -m pytest -q",
                        "--no-reproduce", "--edit-format", "blocks", "--no-tools", "--fix-by", "samples"],
                       server_url=server.url)
        streams = server.streams
    out = proc.stdout + proc.stderr
    assert "[Sampling the plan again: sample 1, at temperature 0.7]\n[Stopped as it came, its edit cannot apply: " \
           "calc.py: line 2 of its SEARCH text is in no line of the file]\n[Not tested (iteration 2): none of the " \
           "answer's edits could be applied]\n[Sampling the plan again: sample 2" in out, out
    assert streams[1]["sent"] < streams[1]["of"] // 10, streams
    assert "Result: SUCCESS" in out and (repo / "calc.py").read_text() == CALC_PY.replace("a - b", "a + b")
    assert "iteration 3" in out, "the stopped sample took its iteration, as the whole answer's failed edit would"


def test_a_run_with_a_stopped_sample_replays_the_same(tmp_path: Path) -> None:
    """The run log keeps the stopped answer as far as it came; --replay reads it to the same stop and the same
    iterations, on a fresh copy of the repository."""
    (tmp_path / "first").mkdir()
    (tmp_path / "again").mkdir()
    repo = python_repo(tmp_path / "first")
    wrong = "calc.py\n```\n<<<<<<< SEARCH\n    return a - b\n=======\n    return a * b\n>>>>>>> REPLACE\n```\n"
    made_up = "".join(f"    total_{n} = compute({n})\n" for n in range(60))
    long = f"calc.py\n```\n<<<<<<< SEARCH\ndef add(a, b):\n{made_up}=======\n{made_up}>>>>>>> REPLACE\n```\n"
    flags = ["--task", "Fix add()", "--test-command", f"{sys.executable} -m pytest -q", "--no-reproduce",
             "--edit-format", "blocks", "--no-tools", "--fix-by", "samples"]
    with ScriptedServer([wrong, {"gap": 0.002, "answer": long}, wrong.replace("a * b", "a + b")]) as server:
        first = run_cli(["--repo", str(repo), *flags], server_url=server.url)
    log = next(line for line in first.stdout.splitlines() if line.startswith("Run log: "))[len("Run log: "):].strip()
    again = python_repo(tmp_path / "again")
    replayed = run_cli(["--repo", str(again), *flags, "--replay", log])
    out = replayed.stdout + replayed.stderr
    stop = "[Stopped as it came, its edit cannot apply: calc.py: line 2 of its SEARCH text is in no line of the file]"
    assert stop in first.stdout and stop in out, out
    assert "Result: SUCCESS" in out and (again / "calc.py").read_text() == (repo / "calc.py").read_text()


def test_a_run_that_feeds_failures_back_gets_its_answers_whole(tmp_path: Path) -> None:
    """Without samples, a failed edit's message is what the model is told next: its answer is not cut short."""
    repo = python_repo(tmp_path)
    made_up = "".join(f"    total_{n} = compute({n})\n" for n in range(40))
    long = f"calc.py\n```\n<<<<<<< SEARCH\ndef add(a, b):\n{made_up}=======\n{made_up}>>>>>>> REPLACE\n```\n"
    right = "calc.py\n```\n<<<<<<< SEARCH\n    return a - b\n=======\n    return a + b\n>>>>>>> REPLACE\n```\n"
    with ScriptedServer([{"gap": 0.001, "answer": long}, right]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "Fix add()", "--test-command", f"{sys.executable} -m pytest -q",
                        "--no-reproduce", "--edit-format", "blocks", "--no-tools"], server_url=server.url)
        streams = server.streams
    out = proc.stdout + proc.stderr
    assert streams[0]["sent"] == streams[0]["of"] and "stopped as it came" not in out, out
    assert "search text not found" in out and "Result: SUCCESS" in out


@pytest.mark.parametrize("name", ["openai-gpt-5-mini", "openai-gpt-5.1-codex"])
def test_either_wire_closes_a_stream_its_reader_stops_and_keeps_what_came(name: str) -> None:
    """Chat completions and the Responses API: the callback's StopAnswer ends the stream, the answer is its
    beginning, marked stopped (the emulator streams the provider's own event types)."""
    long = "".join(f"line {n}\n" for n in range(200))
    with ProviderEmulator(name, [long]) as emulator:
        info = lookup(emulator.profile.model)
        assert info is not None
        chat = OpenAIChat(emulator.profile.model, api_key="k", base_url=emulator.url, accepts=Accepts.known(info),
                          window=ContextWindow(info.window or 8192, "the catalogue"), sleep=lambda s: None)
        seen: list[str] = []

        def reader(piece: str) -> None:
            seen.append(piece)
            if "line 3\n" in "".join(seen):
                raise StopAnswer("enough")
        response = chat.complete([{"role": "user", "content": "Count."}], on_token=reader)
    assert response.stopped == "enough" and response.wire == ("responses" if "codex" in name else "chat")
    assert response.text == "".join(seen) and long.startswith(response.text) and len(response.text) < len(long) / 4
