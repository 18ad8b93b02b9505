"""A command-line code assistant: index a repository, build a context for a task, plan search/replace edits with a
chat model, apply them with backups, run the real tests, fix or roll back byte for byte.

One folder per stage, imports pointing down only (checked by import-linter, see pyproject.toml):

    cli, commands, console    the command line: arguments, the commands, exit codes, printing
    agent/                    the loop and its parts (asker, applier, verifier, recorder), the requests and the one
                              exchange with the model, stop reasons, review, best of N, --ask (question)
    answers/                  a model's text read into a plan: reasoning set aside, JSON and its repair,
                              SEARCH/REPLACE, unified diffs
    retrieve/  edit/  verify/  model/
                              ranking + context; edit operations, matching, the editor, journal, ownership, merge3,
                              takeback, history (undo), preview, guardrails; the test command and its output; the chat
                              seam, prompts, trajectory, the model catalogue, prices, context windows, structured output
    index/                    repository files, the SQLite index, lexical, import graph, embeddings, vector store
    parse/                    tree-sitter and regex parsers, the code model, chunking
    vcs, settings, languages, tokens, redact, interrupts, approvals, env_files, errors
                              the base every stage may use
"""

__version__ = "0.1.0"
