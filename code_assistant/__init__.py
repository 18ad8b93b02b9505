"""A command-line code assistant: index a repository, build a context for a task, plan search/replace edits with a
chat model, apply them with backups, run the real tests, fix or roll back byte for byte.

The pipeline, one folder per stage, imports pointing down only (checked by import-linter, see pyproject.toml):

    cli, console              the command line: arguments, printing, exit codes
    agent, ask                the loop and its stop reasons; questions
    messages                  the requests, sized to the model's context window
    feedback                  what failures go back to the model
    retrieve/  edit/  verify/  model/
                              ranking + context; edits, matching, journal, guardrails; the test command and its
                              output; the chat seam, prompts, trajectory, prices, context windows, structured output
    index/                    repository files, the SQLite index, lexical, import graph, embeddings, vector store
    parse/                    tree-sitter and regex parsers, the code model, chunking
    settings, languages, errors, vcs, tokens, redact
                              the base every stage may use
"""

__version__ = "0.1.0"
