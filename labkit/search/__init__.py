"""Searches with Optuna in shared, resumable storage: study plans run by concurrent workers (N per GPU, any
number of machines), a result cache, progress and best-so-far curves. The labs' spaces, objectives and plans
live in ``labkit.labs``."""
from .cache import ResultCache, config_key
from .curves import band, bands, best_so_far, trial_provenance
from . import plan
from .plan import StudyPlan, objectives
from .run import resolve_workers, run_studies, run_study
from .samplers import SAMPLERS, grid_order, grid_points, make_sampler, worker_seed
from .storage import counts, default_url, finished, make_storage, reap_stale

__all__ = ["ResultCache", "config_key", "band", "bands", "best_so_far", "trial_provenance",
           "objectives", "StudyPlan", "resolve_workers", "run_studies", "run_study", "SAMPLERS",
           "grid_order", "grid_points", "make_sampler", "worker_seed", "counts", "default_url", "finished",
           "make_storage", "reap_stale"]
