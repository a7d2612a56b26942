"""Lab 2: architecture search with Optuna in resumable storage, and compression-aware objectives."""
from .objectives import MODES, NASObjective
from .space import SPACE, build_model, grid_space, is_valid, sample_architecture
from .storage import SAMPLERS, best_so_far, default_url, finished, make_sampler, make_storage, run_study

__all__ = ["MODES", "NASObjective", "SPACE", "build_model", "grid_space", "is_valid", "sample_architecture",
           "SAMPLERS", "best_so_far", "default_url", "finished", "make_sampler", "make_storage", "run_study"]
