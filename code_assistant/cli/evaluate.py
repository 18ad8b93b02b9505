"""`code-assistant eval CASES.jsonl`: the agent measured over a set of cases (evaluate/), and `eval compare RUN_A
RUN_B`. The run's own options (the model, the limits, the sandbox) are taken as a run takes them, checked here once,
and passed through to every case's run; the ones each case sets itself are refused."""
from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

from code_assistant.cli import flags
from code_assistant.errors import EXIT_FAILED, EXIT_OK, ConfigError, UsageError
from code_assistant.settings import Settings

COMPARE = "compare"
# what a case's run takes from the eval's command line: as `run` declares them
RUN_GROUPS = (flags.model, flags.tooling, flags.retrieval, flags.run)
OWNED = {"test_command": "each case names its test command", "log_dir": "the run logs go to the eval's --out",
         "review": "nobody is there to answer", "dry_run": "a dry run changes nothing to judge"}
# where the model is and how long to wait for it: a resumed eval may change them (a server restarted on another port)
TRANSPORT = ("--base-url", "--request-timeout")


@dataclass(frozen=True)
class EvalWords:
    """The eval command line, read (the settings it shares with a run are in Settings)."""

    action: str  # "run" or COMPARE
    paths: tuple[Path, ...]
    out: Path | None = None
    workers: int = 1
    cluster: str | None = None
    only: tuple[str, ...] = ()
    case_roots: tuple[Path, ...] = ()  # folders beside the cases file's own where a case's local repository may lie
    keep_scratch: bool = False
    rerun_errors: bool = False
    case_timeout: float = 3600.0
    run_args: tuple[str, ...] = field(default_factory=tuple)


def words(p: argparse.ArgumentParser) -> None:
    p.add_argument("words", nargs="+", metavar="CASES.jsonl | compare RUN_A RUN_B",
                   help="the cases to run (one JSON object a line), or `compare` and two evals' --out folders")
    p.set_defaults(repo=".")
    g = p.add_argument_group("the eval")
    g.add_argument("--out", type=Path, metavar="DIR",
                   help="where results.jsonl, the run logs and the agents' logs go; run again to resume "
                        "(default: eval-runs/<the cases file's name>)")
    g.add_argument("--workers", type=int, default=1, metavar="N", help="cases at a time (default 1)")
    g.add_argument("--cluster", metavar="local|ADDRESS",
                   help="run the cases on Dask: `local` starts a cluster of --workers processes on 127.0.0.1 (TLS, a "
                        "temporary CA), an address (tls://HOST:8786) joins a running scheduler over TLS")
    g.add_argument("--only", action="append", default=[], metavar="ID", help="run only this case (repeatable)")
    g.add_argument("--case-root", action="append", default=[], type=Path, metavar="DIR",
                   help="a folder a case's local repository (a path, a local git repository) may lie in, besides the "
                        "cases file's own (repeatable): a case naming anything else is refused")
    g.add_argument("--keep-scratch", action="store_true", help="keep each case's scratch copy (to look at it)")
    g.add_argument("--rerun-errors", action="store_true",
                   help="resuming: run again the cases that ended in an error (say, the model server was down)")
    g.add_argument("--case-timeout", type=float, default=3600.0, metavar="S",
                   help="seconds one case's agent may run before it is stopped (rolled back) (default 3600)")
    g.add_argument("--json", action="store_true", help="print the summary as one JSON object on stdout")
    g.add_argument("-v", "--verbose", dest="verbose", action="store_true", default=None,
                   help="debug logging and tracebacks")
    for group in RUN_GROUPS:
        group(p)
    for action in p._actions:
        if action.dest in OWNED:  # refused when given (options): not offered
            action.help = argparse.SUPPRESS


def options(args: argparse.Namespace) -> EvalWords:
    given = args.words
    if given[0] == COMPARE:
        if len(given) != 3:
            raise UsageError("eval compare RUN_A RUN_B: two evals' --out folders (or their results.jsonl)")
        return EvalWords(action=COMPARE, paths=(Path(given[1]), Path(given[2])))
    if len(given) != 1:
        raise UsageError(f"eval takes one cases file (or: eval compare RUN_A RUN_B), not {len(given)} words")
    for dest, why in OWNED.items():
        if getattr(args, dest, None) not in (None, False):
            raise UsageError(f"eval: {_flag(dest)} is not for an eval: {why}")
    if args.workers < 1:
        raise UsageError("eval --workers: at least 1")
    if args.cluster is not None:
        from code_assistant.evaluate.cluster import check_address  # the rule's one place; Dask is not imported

        try:
            check_address(args.cluster)
        except ConfigError as exc:
            raise UsageError(str(exc)) from None
    cases = Path(given[0])
    return EvalWords(action="run", paths=(cases,), out=args.out or Path("eval-runs") / cases.stem,
                     workers=args.workers, cluster=args.cluster, only=tuple(args.only),
                     case_roots=tuple(root.expanduser() for root in args.case_root),
                     keep_scratch=args.keep_scratch, rerun_errors=args.rerun_errors, case_timeout=args.case_timeout,
                     run_args=run_args(args))


def run_args(args: argparse.Namespace) -> tuple[str, ...]:
    """The run's options given on the eval's command line, as a run's command line says them."""
    parser = flags.Parser(add_help=False)
    for group in RUN_GROUPS:
        group(parser)
    found: list[str] = []
    for action in parser._actions:
        value = getattr(args, action.dest, None)
        if not action.option_strings or action.dest in OWNED or value is None or value == action.default:
            continue
        name = action.option_strings[-1]
        if isinstance(action, argparse._StoreConstAction):  # also store_true / store_false
            found += [name] if value == action.const else []
        elif isinstance(action, argparse._AppendAction):
            for item in value:
                found += [name, str(item)]
        elif action.choices is None or value in action.choices:
            found += [name, str(value)]
    return tuple(found)


def measured(args: tuple[str, ...]) -> tuple[str, ...]:
    """The run options less where the model is (TRANSPORT, each with its value)."""
    kept: list[str] = []
    skip = False
    for word in args:
        if skip or word in TRANSPORT:
            skip = not skip and word in TRANSPORT
            continue
        kept.append(word)
    return tuple(kept)


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def execute(settings: Settings, words: EvalWords, *, as_json: bool) -> int:
    from code_assistant.console import evaluation
    from code_assistant.evaluate.results import read_results, results_path
    from code_assistant.evaluate.summary import compare, summarize

    if words.action == COMPARE:
        first, second = (read_results(results_path(path)) for path in words.paths)
        evaluation.show_comparison(compare(first, second), (str(words.paths[0]), str(words.paths[1])),
                                   as_json=as_json)
        return EXIT_OK
    from code_assistant.evaluate.batch import EvalOptions, run_eval
    from code_assistant.evaluate.case_run import EvalConfig

    config = EvalConfig(run_args=words.run_args, sandbox=settings.sandbox, bwrap=settings.sandbox_bwrap,
                        network=settings.network, pass_env=tuple(settings.pass_env),
                        shown=tuple(Path(p) for p in settings.sandbox_show),
                        writable=tuple(settings.sandbox_writable), test_timeout=settings.test_timeout,
                        case_timeout=words.case_timeout, keep_scratch=words.keep_scratch)
    assert words.out is not None
    eval_options = EvalOptions(cases=words.paths[0], out=words.out.resolve(), config=config, workers=words.workers,
                               cluster=words.cluster, only=words.only, case_roots=words.case_roots,
                               rerun_errors=words.rerun_errors,
                               verbose=settings.verbose,
                               measured=measured(words.run_args))
    with evaluation.progress(settings.verbose) as shown:
        outcome = run_eval(eval_options, shown)
    evaluation.show(outcome, summarize(outcome.results), as_json=as_json)
    return EXIT_OK if not outcome.missing else EXIT_FAILED
