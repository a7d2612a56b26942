"""``labkit`` command line: run notebooks, regenerate every lab's full profile on a GPU, open JupyterLab and
the study dashboard, run search workers, check data, build the CUDA extension.

Errors print ``labkit: error: ...`` (exit status 2 for bad input, 1 for a failure); ``--debug`` shows the
Python traceback instead.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

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
    if "storage" in value:  # relative to where the command was typed, not to the notebook's folder
        from ..search.storage import absolute_url

        value["storage"] = absolute_url(value["storage"])
    return value


def _cmd_run(args) -> int:
    from ..run import runner

    _staff_only("run")  # the solution edition it runs stays with the staff; students: labkit lab, labkit check
    labs = sorted(runner.lab_notebooks()) if args.all else args.labs
    if not labs:
        raise UsageError(f"run: name labs or notebooks (allowed labs: {', '.join(runner.lab_notebooks())}) or "
                         "pass --all")
    overrides = _parse_set(args.set)
    try:
        runner.check_run(labs, args.profile, overrides)  # every lab and setting, before anything runs
    except (KeyError, TypeError, ValueError, RuntimeError) as err:
        raise UsageError(_message(err)) from err
    runner.run_labs(labs, args.profile, overrides, progress=not args.no_progress)
    return 0


def _staff_only(command: str) -> None:
    """Commands that keep the committed results true need the project's checkout, not a student release."""
    from .. import settings

    if not settings.in_checkout():
        raise UsageError(f"{command}: a teaching-staff command; it needs the labkit checkout (its figures/, the "
                         "solution edition and labkit.answers), which an installed student release does not hold")


def _cmd_regenerate(args) -> int:
    from ..maintain import regenerate

    _staff_only("regenerate")
    try:
        return regenerate.run(args)
    except ValueError as err:
        raise UsageError(f"regenerate: {_message(err)}") from err


def _cmd_data_check(args) -> int:
    from .. import data

    folder = data.find_imdb_dir()
    data.verify_imdb_dir(folder)
    dsd = data.load_imdb()
    print(f"IMDb at {folder}: sha256 verified")
    for split, ds in dsd.items():
        counts = ds.to_pandas()["label"].value_counts().sort_index().tolist()
        print(f"  {split}: {len(ds)} rows, labels neg/pos = {counts[0]}/{counts[1]}")
    return 0


def _cmd_ext_build(args) -> int:
    from ..kernels import extension

    extension.load(verbose=True)
    print(extension.describe())
    if not extension.available():
        print("labkit ext build: the extension was not built (reason above); the reference path runs",
              file=sys.stderr)
        return 1
    return 0


def _cmd_ext_status(args) -> int:
    from ..kernels import extension

    print(extension.describe())
    return 0


def _search_plans(args):
    """The plans of ``--study`` names (or of every unfinished study) stored in ``--storage``."""
    import optuna

    from ..search import StudyPlan, make_storage

    if not args.storage:
        raise UsageError("search worker: --storage URL is required to join stored studies (journal:PATH, "
                         "postgresql://...)")
    storage = make_storage(args.storage)
    stored = {s.study_name: s.user_attrs.get("plan") for s in optuna.get_all_study_summaries(storage, include_best_trial=False)}
    names = args.study or [n for n, p in stored.items() if p]
    missing = [n for n in names if n not in stored]
    if missing:
        raise UsageError(f"search worker: no study {missing} in {args.storage}; it holds: "
                         f"{', '.join(sorted(stored)) or '(none)'}")
    noplan = [n for n in names if not stored[n]]
    if noplan:
        raise UsageError(f"search worker: studies {noplan} were not created by labkit (no stored plan); "
                         "run them from their own code")
    return [StudyPlan(**stored[n]) for n in names]


def _cmd_search_worker(args) -> int:
    from ..run import profiles
    from .. import search

    workers = args.workers if args.workers is not None else "auto"
    if args.study or not args.lab:
        plans = _search_plans(args)
        search.run_studies(plans, storage=args.storage, workers=workers, progress="lines", mps=args.mps,
                           first_worker=args.first_worker, desc="search worker")
        return 0
    from .. import records

    owners = {r.search.name: key for key, r in records.records().items() if r.search}
    if args.lab not in owners:
        raise UsageError(f"search worker: {args.lab!r} has no search; allowed: {', '.join(owners)}")
    try:
        s = profiles.lab_settings(owners[args.lab], args.profile, **(_parse_set(args.set) or {}))
    except (KeyError, TypeError, ValueError) as err:
        raise UsageError(_message(err)) from err
    if args.mps:
        s["mps"] = "on"
    search.plan.resolve_objective(records.searches()[args.lab].run)(
        s, storage=args.storage, progress="lines", workers=workers, first_worker=args.first_worker)
    return 0


def _cmd_search_status(args) -> int:
    import optuna

    from ..search import counts, make_storage

    storage = make_storage(args.storage)
    for summary in sorted(optuna.get_all_study_summaries(storage, include_best_trial=False), key=lambda s: s.study_name):
        study = optuna.load_study(study_name=summary.study_name, storage=storage)
        c, plan = counts(study), summary.user_attrs.get("plan") or {}
        best = f"{study.best_value:.4f}" if c["complete"] else "-"
        print(f"{summary.study_name}: {c['complete'] + c['pruned']}/{plan.get('n_trials', '?')} finished, "
              f"{c['running']} running, {c['waiting']} queued, {c['fail']} failed, best {best}")
    return 0


def _cmd_claims(args) -> int:
    from ..maintain import claims

    if not args.args:  # claims on a folder of its own may run anywhere
        _staff_only("claims")
    return claims.main(args.args)


def _cmd_redraw(args) -> int:
    from .. import redraw

    _staff_only("redraw")
    return redraw.main(args.args)


def _cmd_check(args) -> int:
    from ..exercises import headless, self_test

    if args.list:
        from ..exercises import registry

        print("| exercise | notebook | sheet task | points | public cases | mutants |\n| --- | --- | --- | --- | --- | --- |")
        def cell(text):
            return text.replace("|", "\\|")

        for ex in registry().values():
            print(f"| `{ex.id}`: {cell(ex.title)} | {ex.notebook} | {cell(ex.task)} | {ex.points} | "
                  f"{len(ex.public())} | {cell('; '.join(ex.mutants))} |")
        return 0
    if args.hidden is not None and not args.self_test:
        raise UsageError("check --hidden: hidden cases are the staff's and never reach a student's kernel; grade "
                         "with them by `labkit grade SUBMISSIONS --out DIR --hidden-seed SEED`")
    if args.self_test:
        if args.paths:
            raise UsageError("check --self-test checks labkit's own exercises; give it no notebooks")
        result = self_test(hidden_seed=0 if args.hidden is None else args.hidden,
                                    log=print if args.verbose else (lambda line: None))
        if not args.verbose:
            for p in result.problems:
                print(f"PROBLEM {p}")
            print(result.line())
        return 0 if result.ok else 1
    if not args.paths:
        raise UsageError("check: name notebooks or folders of notebooks (e.g. labkit check my-labs/), or "
                         "pass --self-test")
    try:
        books = headless.notebooks_in(args.paths)
        headless.check_outputs(books, args.json, args.out)
    except ValueError as err:
        raise UsageError(f"check: {_message(err)}") from err
    if args.cell_timeout <= 0:
        raise UsageError(f"check --cell-timeout {args.cell_timeout}: seconds > 0")
    reports = []
    try:
        headless.run(books, args.profile, args.out, cell_timeout=args.cell_timeout, into=reports)
    finally:
        for line in headless.describe(reports):
            print(line)
        headless.write_json(reports, args.json, args.profile)
    bad = [r.notebook for r in reports if not r.ok]
    print(f"labkit check: {len(reports) - len(bad)} of {len(reports)} notebooks with every exercise passing"
          + (f"; still to do: {', '.join(bad)}" if bad else "") + f" (report: {args.json})")
    return 1 if bad else 0


def _cmd_grade(args) -> int:
    from ..exercises.grading import run
    from ..exercises.grading.runtime import Limits

    limits = Limits(timeout=args.timeout, memory=int(args.memory * 2 ** 20))
    try:
        grades = run.grade(args.submissions, args.out, args.hidden_seed, args.jobs, limits)
    except (ValueError, FileNotFoundError) as err:
        raise UsageError(f"grade: {_message(err)}") from err
    flagged = sum(bool(g.flags) for s in grades for g in s.exercises)
    print(f"labkit grade: {len(grades)} students; {flagged} exercises flagged (see the flag columns of "
          f"{args.out}/grades.csv); written answers for manual marking: {args.out}/answers.csv")
    return 0


def _cmd_release(args) -> int:
    from ..exercises import release

    _staff_only("release")
    try:
        release.build(args.out)
    except (ValueError, FileNotFoundError) as err:
        raise UsageError(f"release: {_message(err)}") from err
    return 0


def _cmd_student_init(args) -> int:
    from ..exercises import student

    try:
        student.init(args.dir, force=args.force)
    except FileExistsError as err:
        raise UsageError(f"student init: {_message(err)}") from err
    print(f"next: labkit lab --dir {args.dir}   (then, headlessly: labkit check {args.dir})")
    return 0


def _cmd_lab(args) -> int:
    from . import frontend

    extra = args.jupyter_args[1:] if args.jupyter_args[:1] == ["--"] else args.jupyter_args
    return frontend.run_lab(args.profile, args.port, args.no_browser, extra, args.dir)


def _cmd_dashboard(args) -> int:
    from . import frontend

    try:
        url = args.storage or frontend.study_storage(args.lab)
        storage = frontend.open_storage(url, None if args.storage else args.lab)
    except (KeyError, FileNotFoundError, ValueError) as err:
        raise UsageError(_message(err)) from err
    import optuna

    names = optuna.get_all_study_names(storage)
    what = f"{len(names)} stud{'y' if len(names) == 1 else 'ies'}" if names else "no studies yet"
    frontend.serve_dashboard(storage, args.host, args.port, announce=lambda address: print(
        f"labkit dashboard: {what} in {url} at {address} (Ctrl-C stops it)", flush=True))
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
    from .. import records

    parser = argparse.ArgumentParser(prog="labkit", description=__doc__)
    parser.add_argument("--debug", action="store_true", help="on an error, show the Python traceback")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="execute lab notebooks with papermill")
    run.add_argument("labs", nargs="*", help="labs or notebooks to run, e.g. lab0 lab1_quantize")
    run.add_argument("--all", action="store_true", help="run every lab notebook in order")
    run.add_argument("--profile", default="auto", choices=["auto", "smoke", "quick", "full"],
                     help="auto: full on a CUDA machine, quick otherwise")
    run.add_argument("--set", help='JSON overrides of profile settings, e.g. \'{"train_size": 500}\'')
    run.add_argument("--no-progress", action="store_true")
    run.set_defaults(func=_cmd_run)

    from ..maintain import regenerate  # its options only: the regeneration itself imports what it runs when it runs

    regen = sub.add_parser("regenerate", help="every lab's full profile on a GPU, in calls of a time budget, "
                           "resumable (--fresh starts over, --status prints the plan)",
                           description=regenerate.__doc__.split("\n\n")[0])
    regenerate.add_arguments(regen)
    regen.set_defaults(func=_cmd_regenerate)

    claims = sub.add_parser("claims", help="the labs' headline claims against the committed JSON (exit 1 if one "
                            "fails); as python -m labkit.maintain.claims", add_help=False)
    claims.add_argument("args", nargs=argparse.REMAINDER, help="[FIGURES folder]")
    claims.set_defaults(func=_cmd_claims)
    redraw = sub.add_parser("redraw", help="redraw figures and re-render answers from the stored JSON; as python "
                            "-m labkit.redraw (labkit redraw --help)", add_help=False)
    redraw.add_argument("args", nargs=argparse.REMAINDER, help="all | a lab | a notebook, then its options")
    redraw.set_defaults(func=_cmd_redraw)

    data_cmd = sub.add_parser("data", help="dataset commands").add_subparsers(dest="action", required=True)
    data_cmd.add_parser("check", help="find IMDb, verify its sha256, print split sizes").set_defaults(
        func=_cmd_data_check)

    ext = sub.add_parser("ext", help="the MXINT8 CUDA extension").add_subparsers(dest="action", required=True)
    ext.add_parser("build", help="build (or load the cached build of) the extension now").set_defaults(
        func=_cmd_ext_build)
    ext.add_parser("status", help="say which MXINT8 path runs here").set_defaults(func=_cmd_ext_status)

    lab = sub.add_parser("lab", help="open JupyterLab on notebooks/ with the project's kernel (installs it on "
                         "first use)")
    lab.add_argument("--profile", default="auto", choices=["auto", "smoke", "quick", "full"],
                     help='what a notebook\'s PROFILE = "auto" means in this session (default: full on a CUDA '
                          "machine, quick otherwise)")
    lab.add_argument("--port", type=int, help="JupyterLab's port (default: 8888 or the next free one)")
    lab.add_argument("--no-browser", action="store_true", help="print the URL instead of opening a browser")
    lab.add_argument("--dir", type=Path, help="folder to open (default: notebooks/; e.g. runs/quick for the "
                     "notebooks labkit run executed)")
    lab.add_argument("jupyter_args", nargs=argparse.REMAINDER,
                     help="after --: more options for jupyter lab, e.g. -- --ip=0.0.0.0")
    lab.set_defaults(func=_cmd_lab)

    dash = sub.add_parser("dashboard", help="optuna-dashboard on a lab's Optuna studies")
    dash.add_argument("lab", nargs="?", default="lab2", choices=sorted(records.searches()),
                      help="whose default storage to open (runs/optuna/<lab>.journal; default lab2)")
    dash.add_argument("--storage", help="another storage: journal:PATH or an RDB URL (postgresql://...)")
    dash.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    dash.add_argument("--port", type=int, default=8080, help="port (default 8080; 0 picks a free one)")
    dash.set_defaults(func=_cmd_dashboard)

    chk = sub.add_parser("check", help="run notebooks headlessly and report every exercise (exit 1 while any "
                         "fails or is not attempted); --self-test proves the exercises' own checks")
    chk.add_argument("paths", nargs="*", type=Path, help="notebooks, or folders of lab notebooks")
    chk.add_argument("--profile", default="smoke", choices=["smoke", "quick"],
                     help="the profile the notebooks run under (default smoke: seconds per notebook)")
    chk.add_argument("--hidden", type=int, metavar="SEED",
                     help="with --self-test: the seed of the hidden cases the references must pass (grading with "
                          "hidden cases is `labkit grade`)")
    chk.add_argument("--self-test", action="store_true",
                     help="every exercise: the reference passes, a stub is 'not attempted', every mutant fails")
    chk.add_argument("--list", action="store_true", help="list every exercise: notebook, sheet task, points, "
                     "cases, mutants (a Markdown table)")
    chk.add_argument("--verbose", action="store_true", help="with --self-test: which case caught each mutant")
    chk.add_argument("--json", type=Path, default=Path("check.json"), help="the report (default ./check.json)")
    chk.add_argument("--out", type=Path, help="keep the executed notebooks in this folder (default: none kept)")
    chk.add_argument("--cell-timeout", type=int, default=300, help="seconds a cell may run before its notebook is "
                     "stopped (default 300)")
    chk.set_defaults(func=_cmd_check)

    grd = sub.add_parser("grade", help="teaching staff: grade a folder of submissions (one sub-folder per student) "
                         "into a gradebook; each exercise runs alone in a limited process")
    grd.add_argument("submissions", type=Path, help="a folder with one sub-folder per student, named by their id")
    grd.add_argument("--out", type=Path, required=True, help="the gradebook's folder (grades.csv, answers.csv, "
                     "students/<id>/results.json and feedback.md, grading.json)")
    grd.add_argument("--hidden-seed", type=int, help="the seed of the hidden cases (default: a fresh one, kept "
                     "in grading.json)")
    grd.add_argument("--jobs", type=int, default=2, help="graded processes at a time (default 2)")
    grd.add_argument("--timeout", type=float, default=60.0, help="seconds (wall and CPU) per exercise (default 60)")
    grd.add_argument("--memory", type=float, default=2048.0, help="MB of memory per exercise (default 2048)")
    grd.set_defaults(func=_cmd_grade)

    rel = sub.add_parser("release", help="teaching staff: build what students install (the student edition in a "
                         "wheel, AGENTS.md; none of the key)")
    rel.add_argument("edition", choices=["student"], help="which release (student)")
    rel.add_argument("out", type=Path, help="the folder for the wheel, AGENTS.md and its README")
    rel.set_defaults(func=_cmd_release)

    stu = sub.add_parser("student", help="the student edition").add_subparsers(dest="action", required=True)
    init = stu.add_parser("init", help="copy the student edition into DIR, check the kernel and the data")
    init.add_argument("dir", type=Path)
    init.add_argument("--force", action="store_true", help="overwrite files already in DIR (notebooks, README.md, "
                      "AGENTS.md)")
    init.set_defaults(func=_cmd_student_init)

    search_cmd = sub.add_parser("search", help="Optuna search workers and studies").add_subparsers(
        dest="action", required=True)
    worker = search_cmd.add_parser(
        "worker", help="run trial workers here on a lab's studies (or on stored studies) in shared storage")
    worker.add_argument("lab", nargs="?", help="run this lab's studies (e.g. lab2), built from --profile/--set")
    worker.add_argument("--study", action="append", help="join this stored study (repeatable); needs --storage")
    worker.add_argument("--storage", help="journal:PATH (one host) or postgresql://... (several machines)")
    worker.add_argument("--workers", type=int, help="trial processes here (default: 8 per GPU, 1 on a CPU)")
    worker.add_argument("--first-worker", type=int, default=0,
                        help="id of the first worker here; give each machine its own range (seeds differ)")
    worker.add_argument("--profile", default="auto", choices=["auto", "smoke", "quick", "full"])
    worker.add_argument("--set", help="JSON overrides of the lab's settings")
    worker.add_argument("--mps", action="store_true", help="run the workers under a private CUDA MPS daemon")
    worker.set_defaults(func=_cmd_search_worker)
    status = search_cmd.add_parser("status", help="trials per study in a storage")
    status.add_argument("--storage", required=True, help="journal:PATH or an RDB URL")
    status.set_defaults(func=_cmd_search_status)

    _add_debug(parser)
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] in (["claims"], ["redraw"]):  # their own options, --help included, go to their own parsers
        own = argparse.Namespace(args=argv[1:], debug=False)
        own.func = {"claims": _cmd_claims, "redraw": _cmd_redraw}[argv[0]]
        return _dispatch(own)
    args = parser.parse_args(argv)
    return _dispatch(args)
