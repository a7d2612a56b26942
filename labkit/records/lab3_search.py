"""Lab 3 (part 2): mixed-precision search over per-layer formats and widths, with a bit-cost objective."""
from . import Notebook, Search, Step
from .lab3_formats import SETTINGS

RECORD = Notebook(
    "lab3_search", "3b", "lab3", SETTINGS,
    results=("search_integer", "search_formats", "search_pareto", "search_remeasured"),
    figures=("search_integer", "search_formats", "search_pareto"), answers="search_answers.md",
    steps=(Step("lab3_search", 300, order=5, search="lab3"),),
    # a trial process's GPU memory at its peak: up to 8.1 GiB seen on an H100 in full-profile runs, evaluating
    # 256 x 256-token batches through block formats
    search=Search("lab3", objective="labkit.labs.lab3_precision:lab3_objective", run="labkit.labs.lab3:run_all",
                  worker_gib=9.0))
