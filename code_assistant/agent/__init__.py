"""The agent stage: the loop (loop.py: Run) on the kit the workspace builds for it (kit.py: the parts it uses and the
small configuration each reads), the parts made of that kit (parts.py) — asking the model for edits (asker.py),
applying them (applier.py), running the tests (verifier.py), recording the run (recorder.py) — the one pure function
that says when a run ends (decide.py), the values the parts hand each other (state.py), the requests it sends
(requests.py), one exchange with the model (exchange.py, which --ask uses too), what goes back to the model
(feedback.py), the reproduction test (reproduction.py), why a run stops (stop.py), best of N (best_of.py,
candidates.py) and --ask (question.py)."""
