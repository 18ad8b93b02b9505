"""The agent stage: the loop (loop.py) and the parts it is built from — asking the model for edits (asker.py),
applying them (applier.py), running the tests (verifier.py), recording the run (recorder.py), sharing one RunState
(state.py) — the requests it sends (requests.py), one exchange with the model (exchange.py, which --ask uses too),
what goes back to the model (feedback.py), the reproduction test (reproduction.py), why a run stops (stop.py), best
of N (best_of.py, candidates.py) and --ask (question.py)."""
