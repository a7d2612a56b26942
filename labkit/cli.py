"""``labkit`` command line: run notebooks, check data, build the CUDA extension.

Errors print ``labkit: error: ...`` (exit status 2 for bad input, 1 for a failure); ``--debug`` shows the
Python traceback instead.
"""
from __future__ import annotations

import argparse
import json
import sys

SET_EXAMPLE = '\'{"train_size": 500}\''


class UsageError(Exception):
    """Bad input on the command line: ``labkit: error: <message>``, exit status 2."""


def _message(err: BaseException) -> str:
    # args[0], not str(err): str() of a KeyError wraps the message in quotes
    return str(err.args[0]) if len(err.args) == 1 else str(err)


def _parse_set(text: str | None) -> dict | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise UsageError(f"--set {text!r} is not valid JSON ({err.msg}, column {err.colno}); "
                         f"give a JSON object of settings, e.g. --set {SET_EXAMPLE}") from None
    if not isinstance(value, dict):
        raise UsageError(f"--set {text!r} is a JSON {type(value).__name__}; give a JSON object of settings, "
                         f"e.g. --set {SET_EXAMPLE}")
    return value


def _cmd_run(args) -> int:
    from . import runner

    labs = sorted(runner.lab_notebooks()) if args.all else args.labs
    if not labs:
        raise UsageError(f"run: name labs (allowed: {', '.join(runner.lab_notebooks())}) or pass --all")
    overrides = _parse_set(args.set)
    try:
        runner.check_run(labs, args.profile, overrides)  # every lab and setting, before anything runs
    except (KeyError, TypeError, ValueError, RuntimeError) as err:
        raise UsageError(_message(err)) from err
    runner.run_labs(labs, args.profile, overrides, progress=not args.no_progress)
    return 0


def _cmd_data_check(args) -> int:
    from . import data

    folder = data.find_imdb_dir()
    data.verify_imdb_dir(folder)
    dsd = data.load_imdb()
    print(f"IMDb at {folder}: sha256 verified")
    for split, ds in dsd.items():
        counts = ds.to_pandas()["label"].value_counts().sort_index().tolist()
        print(f"  {split}: {len(ds)} rows, labels neg/pos = {counts[0]}/{counts[1]}")
    return 0


def _cmd_ext_build(args) -> int:
    from .kernels import extension

    extension.load(verbose=True)
    print(extension.describe())
    if not extension.available():
        print("labkit ext build: the extension was not built (reason above); the reference path runs",
              file=sys.stderr)
        return 1
    return 0


def _cmd_ext_status(args) -> int:
    from .kernels import extension

    print(extension.describe())
    return 0


def _add_debug(parser: argparse.ArgumentParser) -> None:
    """Accept ``--debug`` after any subcommand too (``labkit run lab9 --debug``), not only before it."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                child.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                                   help="on an error, show the Python traceback")
                _add_debug(child)


def _dispatch(args) -> int:
    """Run the subcommand; an error becomes one ``labkit: error:`` line (the traceback only with --debug)."""
    try:
        return args.func(args)
    except Exception as err:
        if args.debug:
            raise
        if isinstance(err, UsageError):
            print(f"labkit: error: {_message(err)}", file=sys.stderr)
            return 2
        print(f"labkit: error: {type(err).__name__}: {_message(err)}\n(rerun with --debug for the traceback)",
              file=sys.stderr)
        return 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="labkit", description=__doc__)
    parser.add_argument("--debug", action="store_true", help="on an error, show the Python traceback")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="execute lab notebooks with papermill")
    run.add_argument("labs", nargs="*", help="labs to run, e.g. lab0 lab1")
    run.add_argument("--all", action="store_true", help="run every lab notebook in order")
    run.add_argument("--profile", default="auto", choices=["auto", "smoke", "quick", "full"],
                     help="auto: full on a CUDA machine, quick otherwise")
    run.add_argument("--set", help='JSON overrides of profile settings, e.g. \'{"train_size": 500}\'')
    run.add_argument("--no-progress", action="store_true")
    run.set_defaults(func=_cmd_run)

    data_cmd = sub.add_parser("data", help="dataset commands").add_subparsers(dest="action", required=True)
    data_cmd.add_parser("check", help="find IMDb, verify its sha256, print split sizes").set_defaults(
        func=_cmd_data_check)

    ext = sub.add_parser("ext", help="the MXINT8 CUDA extension").add_subparsers(dest="action", required=True)
    ext.add_parser("build", help="build (or load the cached build of) the extension now").set_defaults(
        func=_cmd_ext_build)
    ext.add_parser("status", help="say which MXINT8 path runs here").set_defaults(func=_cmd_ext_status)

    _add_debug(parser)
    args = parser.parse_args(argv)
    return _dispatch(args)


if __name__ == "__main__":
    sys.exit(main())
