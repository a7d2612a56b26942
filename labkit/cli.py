"""``labkit`` command line: run notebooks, check data, build the CUDA extension."""
from __future__ import annotations

import argparse
import json
import sys


def _cmd_run(args) -> int:
    from . import runner

    labs = sorted(runner.lab_notebooks()) if args.all else args.labs
    if not labs:
        print("labkit run: name labs (e.g. lab0 lab1) or pass --all", file=sys.stderr)
        return 2
    overrides = json.loads(args.set) if args.set else None
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="labkit", description=__doc__)
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

    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
