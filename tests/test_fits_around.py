"""Whether an answer written against a file as the run left it fits the file as the user changed it since (pure, a
table of cases): it fits when it applies to the file as it is now and touches none of the user's lines, nor a line
right next to them; a file deleted or replaced wholesale is no longer the file the model answered about."""
from __future__ import annotations

import pytest

from code_assistant.edit.beside import gone, misfit, outside
from code_assistant.edit.edits import Action, EditOperation

LEFT = b'def add(a, b):\n    return a * b\n\n\ndef multiply(a, b):\n    return a * b\n'
APPENDED = LEFT + b"# the user's note\n"
ADD = EditOperation("calc.py", "def add(a, b):\n    return a * b", "def add(a, b):\n    return a + b")
LAST = EditOperation("calc.py", "def multiply(a, b):\n    return a * b", "def multiply(a, b):\n    return b * a")


@pytest.mark.parametrize("now, op, fits", [
    # a line appended at the end, the edit at the top: applied around it
    (APPENDED, ADD, True),
    # a line inserted at the top, the edit further down with a line between: applied around it
    (b"import math\n" + LEFT, LAST, True),
    # the edit changes the line right before the appended one: as in git, adjacent changes overlap
    (APPENDED, LAST, False),
    # the user changed the very line the edit searches for
    (LEFT.replace(b"def add(a, b):\n    return a * b", b"def add(a, b):\n    return a - b"), ADD, False),
    # the user made a second copy of the searched text: it no longer matches exactly once
    (LEFT + b"\n\ndef add(a, b):\n    return a * b\n", ADD, False),
    # an edit that did not match what the model was shown fails as it would have: not the user's doing
    (APPENDED, EditOperation("calc.py", "def nowhere():", "def somewhere():"), True),
    # a symbol replaced whole, the user's change outside it: applied around it
    (APPENDED, EditOperation("calc.py", action=Action.REPLACE_SYMBOL, symbol="add",
                             content="def add(a, b):\n    return a + b\n"), True),
    # a symbol replaced whole over the user's change inside it: it would drop their line
    (LEFT.replace(b"    return a * b\n\n\ndef multiply", b"    # mine\n    return a * b\n\n\ndef multiply"),
     EditOperation("calc.py", action=Action.REPLACE_SYMBOL, symbol="add",
                   content="def add(a, b):\n    return a + b\n"), False),
    # the whole file written, or deleted: over the user's change
    (APPENDED, EditOperation("calc.py", action=Action.CREATE, overwrite=True, content="x = 1\n"), False),
    (APPENDED, EditOperation("calc.py", action=Action.DELETE), False),
])
def test_which_edits_fit_around_the_users_change(now: bytes, op: EditOperation, fits: bool) -> None:
    assert (misfit(op, "calc.py", LEFT, now) is None) == fits


def test_a_file_deleted_or_replaced_wholesale_is_gone_and_one_with_most_of_its_lines_is_not() -> None:
    assert gone(LEFT, None) == "deleted by someone else"
    assert gone(None, b"new\n") == "deleted by the run and created again by someone else"
    assert gone(LEFT, b"VALUE = 1\n") == "replaced wholesale by someone else"
    assert gone(LEFT, APPENDED) is None
    assert gone(LEFT, LEFT.replace(b"return a * b", b"return 0")) is None, "4 of 6 lines kept"


def test_the_answers_edits_are_tried_in_turn_and_the_first_that_does_not_fit_is_named() -> None:
    files = {"calc.py": (LEFT, APPENDED), "gone.py": (b"a\n", None)}
    ops = [("calc.py", ADD), ("calc.py", EditOperation("calc.py", "return a + b", "return a + b + 0")),
           ("calc.py", LAST), ("other.py", LAST), (None, ADD)]
    found = outside(files, ops)
    assert found.gone == {"gone.py": "deleted by someone else"}
    assert found.overlaps == {"calc.py": "edit 3 (modify): it changes lines the user changed, or lines right next "
                                         "to them"}, "edit 2 matches only after edit 1: they are tried in turn"
    assert found.now == {"calc.py": APPENDED, "gone.py": None} and found.around == []
    assert outside(files, ops[:2]).around == ["calc.py"]
