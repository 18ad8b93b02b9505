"""A command-line code assistant: index a repository, build a context for a task, plan search/replace edits with a
chat model, apply them with backups, run the real tests, fix or roll back byte for byte.

One folder per stage, imports pointing down only (checked by import-linter, see pyproject.toml):

    cli/  session.py  mcp/server/
                              the doors: the command line, the session, the MCP server for other agents; each makes
                              its form of an operation from the table and says its outcome in the console's words
    console/                  what a person sees: progress, status lines, the prompt, review; every outcome's words
                              (render.py)
    operations/               the one table: each operation's arguments declared once, execute(workspace, options)
                              -> a typed outcome
    evaluate/                 eval: the agent, as its own command line, over a set of cases in scratch copies; the
                              judge, results and their summary
    workspace.py              what every operation is given, its values decided once: the repository held, the
                              settings as loaded, the index, the model, the test command (verify/testing.py), the
                              model's tools (tools/shelf.py); it hands them to Kits (agent/kit.py)
    agent/                    the loop (Run) on its kit, built with every kit of a task in one place (kit.py: Kits),
                              its parts (asker, applier, verifier, recorder), decide (every stop rule), the requests
                              and the one exchange with the model, best of N, --ask
    tools/                    the model's tools, each declared once (specs.py), the box a run holds them in and the
                              shelf a workspace keeps them on (shelf.py)
    tools/mcp/                the user's MCP servers as tools for the model: config, approvals, connections
    answers/                  a model's text read into a plan: reasoning set aside, JSON and its repair,
                              SEARCH/REPLACE, unified diffs
    retrieve/  edit/  verify/  model/
                              ranking + context; edits (what a plan asks for), matching, the editor, journal,
                              ownership, merge3, takeback, history (undo), preview, guardrails, unified diffs; the test
                              command and its output; the chat seam, prompts, trajectory, the model catalogue, prices,
                              context windows, structured output
    index/                    repository files, the SQLite index, lexical, import graph, embeddings, vector store
    parse/                    tree-sitter and regex parsers, the code model, chunking
    vcs, gate, memory, display, settings, languages, tokens, redact, interrupts, approvals, env_files, waiting,
    review, errors            the base every stage may use (memory: a session's notes and pins; display, waiting,
                              review: what a person is shown while an operation works)
"""

__version__ = "0.1.0"
