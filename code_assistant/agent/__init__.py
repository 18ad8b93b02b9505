"""The agent stage: the loop (loop.py) and the parts it is built from — asking the model (asker.py), applying edits
(applier.py), running the tests (verifier.py), recording the run (recorder.py), sharing one RunState (state.py) —
the requests it sends (requests.py), what goes back to the model (feedback.py), the reproduction test
(reproduction.py), best of N (best_of.py, candidates.py) and --ask (ask.py)."""
