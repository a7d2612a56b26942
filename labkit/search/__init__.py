"""Searches with Optuna in shared, resumable storage: the Lab 2 space and objectives, study plans run by
concurrent workers (N per GPU, any number of machines), a result cache, progress and best-so-far curves."""
from .cache import ResultCache, config_key
from .curves import band, bands, best_so_far, trial_provenance
from .objectives import MODES, NASObjective
from . import plan, precision
from .plan import LAB_SEARCHES, OBJECTIVES, StudyPlan, register_objective
from .run import resolve_workers, run_studies, run_study
from .samplers import SAMPLERS, grid_order, grid_points, make_sampler, worker_seed
from .space import SPACE, build_model, grid_space, is_valid, sample_architecture
from .storage import counts, default_url, finished, make_storage, reap_stale

__all__ = ["ResultCache", "config_key", "band", "bands", "best_so_far", "trial_provenance", "MODES", "NASObjective", "LAB_SEARCHES", "OBJECTIVES",
           "StudyPlan", "register_objective", "resolve_workers", "run_studies", "run_study", "SAMPLERS",
           "grid_order", "grid_points", "make_sampler", "worker_seed", "SPACE", "build_model", "grid_space",
           "is_valid", "sample_architecture", "counts", "default_url", "finished", "make_storage", "reap_stale"]
