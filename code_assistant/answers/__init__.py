"""Answers: a model's text read into a plan (plan.py) — its reasoning set aside (reasoning.py), then a JSON plan,
strict or safely repaired (plan_json.py), SEARCH/REPLACE blocks (search_replace.py) or a unified diff
(unified_diff.py) — every format ending as the same edit operations. Pure functions; never touches a file."""
