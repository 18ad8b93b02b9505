"""The eval stage: the agent measured over a set of cases (`code-assistant eval CASES.jsonl`). Each case's repository
goes into a scratch directory of its own (cases.py, scratch.py); the agent runs there as the product's own command
line in a subprocess (attempt.py), so the eval measures exactly what a user runs and imports nothing of the agent
stage; then the judge applies the hidden tests and runs the case's tests itself, with the product's test runner in
its sandbox (judge.py). Results go to a resumable JSONL with the run logs beside it (results.py, batch.py), on
threads here or a Dask cluster (pool.py, cluster.py); summary.py sums them up and compares two evals."""
