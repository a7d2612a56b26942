"""Bad input gets a clear error, never a traceback or a silent pass.

One table of wrong inputs per public entry point: each case names the exception type and a pattern the
message must contain (the key, the bad value and, where there is a list, the allowed values). The CLI
cases check the exit status and the one-line ``labkit: error:`` message on stderr. A few legitimate
edge inputs (empty tensors, an explicit skip-everything spec) have their documented behaviour tested
below the tables. No training: a one-layer BERT with hidden size 32.
"""
import copy
import functools
import math
import os
import re

import datasets
import pytest
import torch

from labkit import cli, data, models, prune, quant, search, select
from labkit.quant import compress
from labkit.cli import frontend
from labkit.run import overrides, profiles
from labkit.kernels import dequant, packed_linear
from labkit.kernels import sheet_decode
from labkit.quant.formats import mxint as ref
from labkit.labs import lab2 as lab2_search, lab2_objectives, lab2_space, lab3_precision
from labkit.records.lab2_search import restrict
from labkit.quant.formats import FORMATS, make_format
from labkit.search import host_wait
from labkit.training import step_kernels

FP8 = quant.fixed_point(8)
W50 = {"weight": {"sparsity": 0.5}}


@functools.cache
def _model():
    torch.manual_seed(0)
    return models.from_config(num_hidden_layers=1, hidden_size=32, num_attention_heads=2, intermediate_size=64)


def tiny():
    """A fresh copy of the tiny model for each case (transforms must never see a changed one)."""
    return copy.deepcopy(_model())


def _reviews(n=8):
    return datasets.Dataset.from_dict({"text": [f"review {i}" for i in range(n)], "label": [i % 2 for i in range(n)]})


def settings(lab, **over):
    return lambda: profiles.lab_settings(lab, "smoke", **over)


def lab2_settings(**over):
    """Lab 2's smoke settings with values put in as a caller building them by hand would (no override check)."""
    return {**profiles.lab_settings("lab2_search", "smoke"), **over}


def _fused_triton():
    """The fused linear's Triton module (imported when a case runs: it needs triton, which CI installs)."""
    from labkit.kernels import fused_triton

    return fused_triton


def case(fn, exc, match, id, env=None):
    return pytest.param(fn, exc, match, env or {}, id=id)


Q = quant.quantize
P = prune.prune
M8 = torch.zeros(4, 32, dtype=torch.int8)
E8 = torch.zeros(4, 1, dtype=torch.uint8)

CASES = [
    # -- number formats -----------------------------------------------------------------------------------
    case(lambda: make_format("int8"), KeyError, r"unknown number format 'int8'; allowed: .*integer", "fmt-name"),
    case(lambda: make_format(None), KeyError, r"unknown number format None; allowed: ", "fmt-name-none"),
    case(lambda: make_format("integer", bits=8), KeyError, r"no parameter\(s\) \['bits'\]; allowed: .*'width'",
         "fmt-param"),
    case(lambda: make_format("integer", width=0), ValueError, r"integer: width=0 is out of range; allowed: \[1, 64\]",
         "fmt-width-0"),
    case(lambda: make_format("integer", width=5000), ValueError,
         r"integer: width=5000 is out of range; allowed: \[1, 64\]", "fmt-int-width-huge"),
    case(lambda: make_format("integer", frac_width=2000), ValueError,
         r"integer: frac_width=2000 is out of range; allowed: \[-64, 64\] \(the value grid", "fmt-int-frac-huge"),
    case(lambda: make_format("integer", frac_width=-65), ValueError, r"frac_width=-65 is out of range",
         "fmt-int-frac-negative"),
    case(lambda: make_format("integer", width="8"), TypeError, r"width must be an int, got '8'", "fmt-width-str"),
    case(lambda: make_format("integer", width=True), TypeError, r"width must be an int, got True", "fmt-width-bool"),
    case(lambda: make_format("block_fp", block_size=0), ValueError,
         r"block_size=0 is out of range; allowed: \[1, inf\]",
         "fmt-block-size"),
    case(lambda: make_format("minifloat_ieee", width=8, exponent_width=8), ValueError,
         r"exponent_width=8 is out of range; allowed: \[1, 7\]", "fmt-minifloat-exponent"),
    case(lambda: make_format("log", width=1), ValueError, r"log: width=1 is out of range; allowed: \[2, 11\]",
         "fmt-log-width"),
    case(lambda: make_format("mxint8", group_size=0), ValueError, r"group_size=0 is out of range", "fmt-mxint-group"),
    case(lambda: make_format("binary", stochastic="yes"), TypeError, r"stochastic must be True or False, got 'yes'",
         "fmt-bool"),
    case(lambda: make_format("block_fp").bits_per_element((0,)), ValueError, r"empty tensor of shape \(0,\)",
         "fmt-bits-empty"),
    case(lambda: make_format("integer").fake_quantize(torch.arange(4)), TypeError,
         r"integer: fake_quantize needs a floating-point tensor, got a tensor of dtype torch.int64", "fmt-int-tensor"),
    case(lambda: make_format("block_log").fake_quantize([1.0]), TypeError, r"floating-point tensor, got list",
         "fmt-list"),
    case(lambda: quant.LinearQuantConfig(), ValueError, r"quantizes nothing: give data_in, weight or bias",
         "fmt-config-empty"),
    case(lambda: quant.LinearQuantConfig(weight=8), TypeError, r"LinearQuantConfig.weight must be a NumberFormat",
         "fmt-config-type"),
    # -- quantize -----------------------------------------------------------------------------------------
    case(lambda: Q(tiny(), {}), ValueError, r"selection spec \{\} selects nothing", "quant-empty"),
    case(lambda: Q(tiny(), {"weight_width": 8}), KeyError, r"has no 'name' \(the number format\); allowed: .*integer",
         "quant-no-name"),
    case(lambda: Q(tiny(), {"name": "integer"}), ValueError, r"quantizes nothing", "quant-name-only"),
    case(lambda: Q(tiny(), {"by": "regex", "zzz.*": FP8}), KeyError,
         r"regex key\(s\) \['zzz\.\*'\] not found: .*8 candidate Linear layers", "quant-regex-no-match"),
    case(lambda: Q(tiny(), {"by": "type", "conv2d": FP8}), KeyError, r"layer type key\(s\) \['conv2d'\] not found",
         "quant-type-no-match"),
    case(lambda: Q(tiny(), {"by": "name", "clasifier": FP8}), KeyError,
         r"layer name key\(s\) \['clasifier'\] not found.*e\.g\. bert\.", "quant-name-typo"),
    case(lambda: Q(tiny(), {"by": "regex", "(": FP8}), ValueError, r"regex key '\(' does not compile",
         "quant-regex-syntax"),
    case(lambda: Q(tiny(), {"by": "shape", "linear": FP8}), ValueError,
         r"'by'='shape': allowed values are 'type', 'name', 'regex'", "quant-by"),
    case(lambda: Q(tiny(), {"by": "type", "lstm": FP8}), KeyError,
         r"unknown layer type key\(s\) \['lstm'\].*allowed: \['conv2d', 'linear'\]", "quant-type-key"),
    case(lambda: Q(tiny(), [FP8]), TypeError, r"LinearQuantConfig or dict, got list", "quant-list"),
    case(lambda: Q(tiny(), None), TypeError, r"LinearQuantConfig or dict, got NoneType", "quant-none"),
    case(lambda: Q(tiny(), {"name": "integer", "weights_width": 8}), KeyError,
         r"key 'weights_width' does not start with one of \['data_in_', 'weight_', 'bias_'\]", "quant-role-typo"),
    case(lambda: Q(tiny(), {"name": "integer", "weight_width": 5000}), ValueError,
         r"weight: integer: width=5000 is out of range; allowed: \[1, 64\]", "quant-int-width-huge"),
    case(lambda: Q(tiny(), {"name": "int", "weight_width": 8}), KeyError,
         r"weight: unknown number format 'int'; allowed:", "quant-format-name"),
    case(lambda: Q(tiny(), {"name": "integer", "weight_width": 8, "weight_bits": 4}), KeyError,
         r"weight: format 'integer' has no parameter\(s\) \['bits'\]", "quant-format-param"),
    case(lambda: Q(tiny(), {"by": "type", "linear": 8}), TypeError,
         r"layer 'bert\..*': a Linear quantization config is a dict or LinearQuantConfig, got int",
         "quant-layer-config"),
    case(lambda: Q(tiny(), FP8, filter_fn=lambda n, m: False), KeyError,
         r"\['linear'\] not found: .*0 candidate Linear layers \(after filter_fn\)", "quant-filter-all"),
    case(lambda: Q(tiny(), FP8, filter_fn=5), TypeError, r"filter_fn must be a callable", "quant-filter-type"),
    case(lambda: Q("bert", FP8), TypeError, r"model must be a torch.nn.Module, got str", "quant-model-type"),
    case(lambda: Q(Q(tiny(), FP8).model, FP8), ValueError, r"layer 'bert\..*' is already quantized", "quant-twice"),
    # -- prune --------------------------------------------------------------------------------------------
    case(lambda: P(tiny(), {}), ValueError, r"prune config \{\} prunes nothing: give 'weight' and/or 'activation'",
         "prune-empty"),
    case(lambda: P(tiny(), {"weight": None}), ValueError, r"prunes nothing", "prune-all-none"),
    case(lambda: P(tiny(), None), TypeError, r"prune config must be a dict .*got NoneType", "prune-none"),
    case(lambda: P(tiny(), {"sparsity": 0.5}), KeyError,
         r"prune config key\(s\) \['sparsity'\] unknown; allowed: \['weight', 'activation'\]", "prune-flat"),
    case(lambda: P(tiny(), {"weight": 0.5}), TypeError, r"weight: a prune config is a dict with keys from "
         r"\['sparsity', 'method', 'scope', 'seed'\].*got 0.5", "prune-target-type"),
    case(lambda: P(tiny(), {"weight": {"sparsity": "0.5"}}), ValueError,
         r"weight: sparsity must be a number in \[0, 1\), got '0.5'", "prune-sparsity-str"),
    case(lambda: P(tiny(), {"weight": {"sparsity": 1.0}}), ValueError,
         r"sparsity must be a number in \[0, 1\), got 1.0",
         "prune-sparsity-1"),
    case(lambda: P(tiny(), {"activation": {"sparsity": True}}), ValueError, r"activation: sparsity .*got True",
         "prune-sparsity-bool"),
    case(lambda: P(tiny(), {"weight": {"method": "random"}}), KeyError, r"weight: prune config needs 'sparsity'",
         "prune-no-sparsity"),
    case(lambda: P(tiny(), {"weight": {"sparsity": 0.5, "seed": "a"}}), TypeError,
         r"weight: seed must be an int, got 'a'",
         "prune-seed"),
    case(lambda: P(tiny(), {"weight": {"sparsity": 0.5, "method": "l2"}}), ValueError,
         r"method='l2': allowed values are 'random', 'l1-norm'", "prune-method"),
    case(lambda: P(tiny(), {"weight": {"sparsity": 0.5, "scope": "layer"}}), ValueError,
         r"scope='layer': allowed values are 'local', 'global'", "prune-scope"),
    case(lambda: P(tiny(), {"activation": {"sparsity": 0.5, "scope": "global"}}), ValueError,
         r"scope must be 'local'; got 'global'", "prune-activation-scope"),
    case(lambda: P(tiny(), {"by": "name", "classifer": W50}), KeyError, r"\['classifer'\] not found",
         "prune-name-typo"),
    case(lambda: P("model", W50), TypeError, r"model must be a torch.nn.Module, got str", "prune-model-type"),
    case(lambda: P(P(tiny(), W50).model, W50), ValueError, r"already pruned", "prune-twice"),
    # -- compress -----------------------------------------------------------------------------------------
    case(lambda: compress.compress(tiny()), ValueError, r"compress needs a quant config, a prune config, or both",
         "compress-nothing"),
    case(lambda: compress.compress(tiny(), quant={}), ValueError, r"selects nothing", "compress-quant-empty"),
    case(lambda: compress.compress(tiny(), quant=FP8, prune={"weights": {"sparsity": 0.5}}), KeyError,
         r"\['weights'\] unknown; allowed: \['weight', 'activation'\]", "compress-prune-key"),
    case(lambda: quant.fixed_point("8"), TypeError, r"fixed_point: width must be an int, got '8'",
         "compress-fixed-point-type"),
    case(lambda: quant.fixed_point(0), ValueError, r"fixed_point: width=0 is out of range; allowed: \[1, 64\]",
         "compress-fixed-point-width"),
    case(lambda: quant.fixed_point(5000), ValueError, r"fixed_point: width=5000 is out of range; allowed: "
         r"\[1, 64\]", "compress-fixed-point-width-huge"),
    case(lambda: quant.fixed_point(8, 2000), ValueError, r"fixed_point: frac_width=2000 is out of range; "
         r"allowed: \[-64, 64\]", "compress-fixed-point-frac-huge"),
    case(lambda: quant.fixed_point(8, 4.0), TypeError, r"fixed_point: frac_width must be an int, got 4.0",
         "compress-fixed-point-frac"),
    # -- layer selection ----------------------------------------------------------------------------------
    case(lambda: list(select.select(tiny(), "linear")), TypeError, r"selection spec is a dict, got str", "select-type"),
    case(lambda: list(select.select(tiny(), {"by": "kind", "linear": 1})), ValueError,
         r"'by'='kind': allowed values are 'type', 'name', 'regex'", "select-by"),
    case(lambda: list(select.select(tiny(), {"by": "name"})), ValueError,
         r"selects nothing: give 'default' and/or name",
         "select-nothing"),
    case(lambda: list(select.select(tiny(), {"by": "regex", "classifier": 1, "pooler": 2})), KeyError,
         r"regex key\(s\) \['pooler'\] not found", "select-regex-partial"),
    # -- search (validation that lives in labkit.search) ----------------------------------------------------
    case(lambda: search.make_sampler("bayes", 0), ValueError, r"sampler 'bayes': allowed values are 'random', 'grid', "
         r"'tpe'", "search-sampler"),
    case(lambda: search.make_sampler("grid", 0, None), ValueError, r"grid sampler needs a finite search space",
         "search-grid-space"),
    case(lambda: restrict({"layers": [2]}), KeyError, r"search space field\(s\) \['layers'\] unknown; allowed: "
         r"\['num_hidden_layers'", "search-space-key"),
    case(lambda: restrict({"hidden_size": [100]}), ValueError,
         r"space\['hidden_size'\] must be a non-empty subset of \[128, 192, 256, 384, 512\], got \[100\]",
         "search-space-value"),
    case(lambda: restrict({"hidden_size": []}), ValueError, r"space\['hidden_size'\] must be a non-empty subset",
         "search-space-empty"),
    case(lambda: restrict({"hidden_size": 128}), TypeError, r"space\['hidden_size'\] must be a non-empty list of "
         r"choices from \[128, 192, 256, 384, 512\], got 128; for one value give \[128\]", "search-space-scalar"),
    case(lambda: restrict({"hidden_size": "128"}), TypeError, r"space\['hidden_size'\] must be a non-empty list of "
         r"choices from \[128, .*\], got '128'$", "search-space-string"),
    case(lambda: restrict([128]), TypeError, r"search space must be a dict of field -> list of choices",
         "search-space-list"),
    case(lambda: lab2_search.task1_plans(lab2_settings(space={"hidden_size": 128})), TypeError,
         r"space\['hidden_size'\] must be a non-empty list of choices", "search-lab2-plans-space"),
    case(lambda: lab2_objectives.NASObjective(None, {}, space={"num_hidden_layers": 2}), TypeError,
         r"space\['num_hidden_layers'\] must be a non-empty list of choices from \[2, 4, 8\], got 2",
         "search-objective-space"),
    case(lambda: lab2_objectives.NASObjective(None, {}, mode="fast"), ValueError,
         r"mode='fast': allowed values are 'none', 'compress', 'compress\+train'", "search-mode"),
    case(lambda: lab2_objectives.NASObjective(None, {}, mode="compress"), ValueError,
         r"mode='compress' needs a quant and/or prune config", "search-mode-config"),
    case(lambda: lab2_space.build_model({"config": dict(num_hidden_layers=1, hidden_size=32, num_attention_heads=2,
                                                        intermediate_size=64),
                                         "linears": {"layer0.attention.self.query": "conv"}}), ValueError,
         r"layer0.attention.self.query='conv': allowed values are \['linear', 'identity'\]", "search-linear-choice"),
    # -- search engine: plans, workers, Lab 3's space ---------------------------------------------------------
    case(lambda: search.run_study("x", lambda t: 0.0, -1), ValueError, r"n_trials must be an integer >= 1, got -1",
         "run-study-negative-trials"),
    case(lambda: search.StudyPlan("x", "lab2", {}, n_trials=2.5), ValueError, r"n_trials must be an integer >= 1, "
         r"got 2.5", "plan-float-trials"),
    case(lambda: search.StudyPlan("x", "lab2", {}, seed=None), ValueError,
         r"study 'x': seed must be an integer >= 0, got None", "plan-seed-none"),
    case(lambda: search.StudyPlan("x", "lab2", {}, seed=-1), ValueError, r"seed must be an integer >= 0, got -1",
         "plan-seed-negative"),
    case(lambda: search.run_study("x", lambda t: 0.0, 2, seed=None), ValueError,
         r"study 'x': seed must be an integer >= 0, got None", "run-study-seed-none", env={"LABKIT_RUNS_DIR": "{tmp}"}),
    case(lambda: lab2_search.task1_plans(lab2_settings(seeds=[0, None])), ValueError,
         r"study 'lab2-smoke-random-sNone-.*': seed must be an integer >= 0, got None", "search-lab2-plans-seed"),
    case(lambda: search.StudyPlan("x", "lab2", {}, directions=["up"]), ValueError,
         r"directions=\['up'\]; each must be 'maximize' or 'minimize'", "plan-directions"),
    case(lambda: search.StudyPlan("x", "lab9", {}), KeyError, r"objective 'lab9' unknown; allowed: lab2", "plan-objective"),
    case(lambda: search.resolve_workers(-2), ValueError, r"workers=-2: allowed values are 'auto' or an integer >= 1",
         "workers-negative"),
    case(lambda: search.resolve_workers("many"), ValueError, r"workers='many': allowed values are 'auto'",
         "workers-word"),
    case(lambda: search.run_studies([]), ValueError, r"run_studies: no plans given", "run-studies-empty"),
    case(lambda: lab3_precision.check_formats(["integer", "posit"]), ValueError,
         r"formats \['posit'\]: allowed values are integer, minifloat_denorm", "precision-format"),
    case(lambda: lab3_precision.PrecisionObjective(None, {}, torch.nn.Linear(2, 2), objective="speed"), ValueError,
         r"objective='speed': allowed values are 'accuracy', 'cost', 'pareto'", "precision-objective"),
    case(lambda: lab3_precision.PrecisionObjective(None, {}, torch.nn.Linear(2, 2), lam=-1), ValueError,
         r"lam=-1: must be a number >= 0", "precision-lambda"),
    case(lambda: lab3_precision.PrecisionObjective(None, {}, torch.nn.Linear(2, 2), mode="int4"), ValueError,
         r"mode='int4': allowed values are 'ptq', 'qat'", "precision-mode"),
    case(lambda: search.make_storage(5), TypeError, r"storage must be a URL string .* got 5", "storage-type"),
    # -- storage ------------------------------------------------------------------------------------------
    case(lambda: search.make_storage("runs/lab2.db"), ValueError,
         r"storage 'runs/lab2.db': give journal:PATH \(one host\) or an RDB URL \(postgresql://", "storage-url"),
    case(lambda: search.make_storage("lab2"), ValueError, r"storage 'lab2'.*journal:PATH", "storage-name"),
    case(lambda: search.make_storage("notadb://x"), ValueError, r"storage 'notadb://x': unknown database 'notadb'; "
         r"allowed: journal:PATH \(one host\), sqlite:///PATH .* or postgresql://USER:PASSWORD@HOST/DB",
         "storage-dialect"),
    case(lambda: search.make_storage("sqlite:////proc/x.db"), ValueError, r"storage 'sqlite:////proc/x.db': the "
         r"database's folder /proc is not writable \(a test file there: .*\); allowed: journal:PATH",
         "storage-sqlite-read-only"),
    case(lambda: search.make_storage("sqlite:////nonexistent/sub/x.db"), ValueError,
         r"storage 'sqlite:////nonexistent/sub/x.db': the database's folder /nonexistent/sub does not exist "
         r"\(create it first\); allowed: journal:PATH", "storage-sqlite-no-folder"),
    case(lambda: search.make_storage(f"sqlite:///{os.getcwd()}"), ValueError, r"storage 'sqlite:////.*': .* is a "
         r"folder; give the database file", "storage-sqlite-folder"),
    case(lambda: search.make_storage("postgresql://u:secret@h:port/db"), ValueError,
         r"storage 'postgresql://u:\*\*\*@h:port/db' is not a valid database URL", "storage-url-port"),
    case(lambda: search.make_storage("postgresql+psycopg2://h/db"), ModuleNotFoundError,
         r"storage 'postgresql\+psycopg2://h/db': the postgresql\+psycopg2 driver is not installed",
         "storage-driver"),
    case(lambda: search.make_storage("journal:/proc/x.journal"), ValueError, r"storage 'journal:/proc/x.journal': "
         r"the journal's folder /proc is not writable \(a test file there: .*\); allowed: journal:PATH",
         "storage-journal-read-only"),
    case(lambda: search.make_storage("journal:/proc/sub/x.journal"), ValueError,
         r"storage 'journal:/proc/sub/x.journal': the journal's folder /proc/sub does not exist and cannot be "
         r"created \(.*\); allowed: journal:PATH \(one host\), sqlite:///PATH", "storage-journal-no-folder"),
    case(lambda: search.make_storage(f"journal:{os.getcwd()}"), ValueError, r"storage 'journal:.*': .* is a folder; "
         r"give the journal file, e\.g\. journal:.*/lab2\.journal", "storage-journal-folder"),
    case(lambda: search.make_storage("journal:"), ValueError, r"storage 'journal:': no path after 'journal:'; "
         r"allowed: journal:PATH", "storage-journal-empty"),
    case(lambda: search.make_storage("journal:/nonexistent/studies.journal.xz"), FileNotFoundError,
         r"storage 'journal:/nonexistent/studies.journal.xz': the compressed journal .* does not exist; allowed: "
         r"journal:PATH .*\(PATH may end in \.xz\)", "storage-journal-xz-missing"),
    # -- the dashboard's storage (labkit dashboard --storage) ------------------------------------------------
    case(lambda: frontend.open_storage("runs/x.db"), ValueError, r"dashboard --storage 'runs/x.db': give journal:PATH "
         r"\(one host\) or an RDB URL \(postgresql://", "dashboard-url"),
    case(lambda: frontend.open_storage("notadb://x"), ValueError, r"dashboard --storage 'notadb://x': unknown database "
         r"'notadb'; allowed: journal:PATH \(one host\), sqlite:///PATH .* or postgresql://", "dashboard-dialect"),
    case(lambda: frontend.open_storage("journal:/nonexistent/x.journal"), FileNotFoundError,
         r"dashboard --storage 'journal:/nonexistent/x.journal': the journal /nonexistent/x.journal does not exist; "
         r"check the path", "dashboard-journal-missing"),
    case(lambda: frontend.open_storage(f"journal:{os.getcwd()}"), ValueError, r"dashboard --storage 'journal:.*': .* "
         r"is a folder; give the journal file", "dashboard-journal-folder"),
    case(lambda: frontend.open_storage("sqlite:////nonexistent/x.db"), FileNotFoundError,
         r"dashboard --storage 'sqlite:////nonexistent/x.db': the database /nonexistent/x.db does not exist; check "
         r"the path", "dashboard-sqlite-missing"),
    case(lambda: frontend.open_storage("postgresql+psycopg2://h/db"), ModuleNotFoundError,
         r"dashboard --storage 'postgresql\+psycopg2://h/db': the postgresql\+psycopg2 driver is not installed",
         "dashboard-driver"),
    case(lambda: frontend.open_storage("postgresql://u:secret@127.0.0.1:1/db"), ValueError,
         r"dashboard --storage 'postgresql://u:\*\*\*@127.0.0.1:1/db': cannot open the database \(.*\); check the "
         r"server, user, password and database name; allowed: journal:PATH", "dashboard-server-down"),
    case(lambda: frontend.open_storage(5), TypeError, r"dashboard --storage must be a URL string, got 5",
         "dashboard-type"),
    # -- data ---------------------------------------------------------------------------------------------
    case(data.find_imdb_dir, data.DataNotFoundError,
         r"LABKIT_DATA_DIR=/nonexistent/labkit-data is set, but .*imdb lacks imdb_train.parquet, "
         r"imdb_test.parquet; labkit does not look elsewhere", "data-dir-missing",
         env={"LABKIT_DATA_DIR": "/nonexistent/labkit-data"}),
    case(data.find_imdb_dir, data.DataNotFoundError, r"LABKIT_DATA_DIR=.*partial is set, but .* lacks "
         r"imdb_train.parquet;", "data-dir-partial", env={"LABKIT_DATA_DIR": "{tmp}/partial"}),
    case(lambda: data.load_imdb("offline"), data.DataNotFoundError, r"KIT_DATA_DIR=/nonexistent/kit-data is set",
         "data-kit-dir", env={"LABKIT_DATA_DIR": None, "KIT_DATA_DIR": "/nonexistent/kit-data"}),
    case(data.load_imdb, ValueError, r"LABKIT_DATA_SOURCE='cloud': allowed values are 'offline', 'hub'",
         "data-source-env", env={"LABKIT_DATA_SOURCE": "cloud"}),
    case(lambda: data.load_imdb("somewhere"), ValueError, r"source='somewhere': allowed values are 'offline', 'hub'",
         "data-source-arg"),
    case(lambda: data.stratified_subset(_reviews(), 0, seed=0), ValueError, r"subset size must be positive or None, "
         r"got 0", "data-subset-0"),
    case(lambda: data.stratified_subset(_reviews(), -3, seed=0), ValueError, r"got -3", "data-subset-negative"),
    # -- settings (profiles.lab_settings) -------------------------------------------------------------------
    case(settings("lab9"), KeyError, r"unknown notebook 'lab9'; allowed: lab0_graphs_lora, lab1_quantize", "settings-lab"),
    case(lambda: profiles.lab_settings("lab0_graphs_lora", "medium"), ValueError,
         r"profile='medium': allowed values are 'auto', 'smoke', 'quick', 'full'", "settings-profile"),
    case(settings("lab0_graphs_lora", trian_size=10), KeyError, r"unknown setting\(s\) \['trian_size'\] for lab0_graphs_lora; allowed: .*"
         r"'train_size'", "settings-key"),
    case(settings("lab0_graphs_lora", lr="abc"), TypeError, r"setting lr='abc': must be a number", "settings-lr-str"),
    case(settings("lab0_graphs_lora", lr=True), TypeError, r"setting lr=True: must be a number", "settings-lr-bool"),
    case(settings("lab0_graphs_lora", lr=-1), ValueError, r"setting lr=-1 is out of range; allowed: > 0", "settings-lr-range"),
    case(settings("lab0_graphs_lora", epochs=0), ValueError, r"setting epochs=0 is out of range; allowed: > 0",
         "settings-epochs"),
    case(settings("lab0_graphs_lora", epochs=math.nan), ValueError, r"setting epochs=nan is out of range", "settings-nan"),
    case(settings("lab0_graphs_lora", train_size=1.5), TypeError, r"setting train_size=1.5: must be an int", "settings-int"),
    case(settings("lab0_graphs_lora", train_size=0), ValueError, r"setting train_size=0 is out of range; allowed: > 0",
         "settings-size"),
    case(settings("lab0_graphs_lora", batch_size=None), TypeError, r"setting batch_size=None: must be an int", "settings-none"),
    case(settings("lab0_graphs_lora", seed=-1), ValueError, r"setting seed=-1 is out of range; allowed: >= 0", "settings-seed"),
    case(settings("lab2_search", workers=-1), ValueError, r"setting workers=-1: allowed values are 'auto' or an integer >= 1",
         "settings-workers"),
    case(settings("lab3_search", workers="many"), ValueError, r"setting workers='many': allowed values are 'auto'",
         "settings-workers-word"),
    case(settings("lab0_graphs_lora", lora_dropout=1.0), ValueError, r"setting lora_dropout=1.0 is out of range; allowed: \[0, 1\)",
         "settings-dropout"),
    case(settings("lab0_graphs_lora", model="gpt2"), KeyError, r"setting model: unknown model 'gpt2'; allowed: minilm-l2",
         "settings-model"),
    case(settings("lab0_graphs_lora", device="tpu"), ValueError, r"setting device: device='tpu': allowed values are 'auto', 'cpu'",
         "settings-device"),
    case(settings("lab1_quantize", widths=[]), ValueError, r"setting widths=\[\]: must be a non-empty list of ints",
         "settings-list-empty"),
    case(settings("lab1_quantize", widths=8), TypeError, r"setting widths=8: must be a non-empty list of ints",
         "settings-list-type"),
    case(settings("lab1_quantize", widths=[4, "8"]), TypeError, r"setting widths\[1\]='8': must be an int",
         "settings-list-element"),
    case(settings("lab1_quantize", sparsities=[0.5, 1]), ValueError,
         r"setting sparsities\[1\]=1 is out of range; allowed: \[0, 1\)", "settings-sparsity"),
    case(settings("lab1_quantize", prune_scope="layer"), ValueError,
         r"setting prune_scope: allowed values are 'local', 'global', got 'layer'", "settings-enum"),
    case(settings("lab1_quantize", widths=[4, 5000]), ValueError, r"setting widths\[1\]=5000 is out of range; allowed: "
         r"\[1, 64\]", "settings-widths-huge"),
    case(settings("lab2_search", quant_width=65), ValueError, r"setting quant_width=65 is out of range; allowed: \[1, 64\]",
         "settings-quant-width"),
    case(settings("lab2_search", trials=0), ValueError, r"setting trials=0 is out of range", "settings-trials"),
    case(settings("lab2_search", storage=5), TypeError, r"setting storage=5: must be a string", "settings-storage"),
    case(settings("lab2_search", space=[128]), TypeError, r"setting space=\[128\]: must be a dict", "settings-space-type"),
    case(settings("lab2_search", space={"hidden_size": [100]}), ValueError,
         r"setting space: space\['hidden_size'\] must be a non-empty subset", "settings-space-value"),
    case(settings("lab3_search", format_width=0), ValueError, r"setting format_width=0 is out of range", "settings-width"),
    case(settings("lab4_perf", compile_repeats={"cpu": 3, "cuda": 0}), ValueError,
         r"setting compile_repeats\['cuda'\]=0 is out of range", "settings-per-device"),
    case(settings("lab4_perf", compile_variants={"fast": ["eval+no_grad"]}), KeyError,
         r"setting compile_variants: unknown compile variant 'fast'; allowed: eager", "settings-variant"),
    case(settings("lab4_perf", small_states=["x"]), KeyError, r"setting small_states: unknown state 'x'; allowed: ",
         "settings-state"),
    case(settings("lab4_perf", sdpa_dtype="float8"), KeyError,
         r"setting sdpa_dtype: unknown dtype 'float8'; allowed: float32", "settings-dtype"),
    case(settings("lab4_perf", devices="tpu"), ValueError, r"setting devices: device='tpu'", "settings-devices"),
    case(settings("lab4_perf", devices=5), TypeError, r"setting devices=5: must be 'auto', a device type",
         "settings-devices-type"),
    case(settings("lab4_perf", sdpa_causal=1), TypeError, r"setting sdpa_causal=1: must be True or False",
         "settings-bool"),
    case(settings("lab4_mxint8", table_exponent=256), ValueError,
         r"setting table_exponent=256 is out of range; allowed: \[0, 255\]", "settings-exponent"),
    # -- models -------------------------------------------------------------------------------------------
    case(lambda: models.load_model("gpt2"), KeyError, r"unknown model 'gpt2'; allowed: minilm-l2", "models-name"),
    case(lambda: models.load_tokenizer("bert"), KeyError, r"unknown model 'bert'; allowed: ", "models-tokenizer"),
    case(lambda: models.load_model("bert-tiny"), OSError, r"model 'bert-tiny' \(prajjwal1/bert-tiny\) needs the "
         r"network: the hub is offline here \(HF_HUB_OFFLINE=1\) and the model is not in the local Hugging Face "
         r"cache; offline models: minilm-l2, minilm-l6, bert-tiny-random$", "models-offline",
         env={"HF_HUB_OFFLINE": "1"}),
    case(lambda: models.load_tokenizer("bert-tiny"), OSError, r"model 'bert-tiny' .* needs the network: the hub is "
         r"offline here \(TRANSFORMERS_OFFLINE=1\)", "models-tokenizer-offline",
         env={"HF_HUB_OFFLINE": None, "TRANSFORMERS_OFFLINE": "1"}),
    case(lambda: models.from_config(hidden_sise=32), KeyError, r"not BertConfig fields: \['hidden_sise'\]",
         "models-field"),
    case(lambda: models.from_config(hidden_size=30, num_attention_heads=4), ValueError,
         r"hidden_size=30 is not divisible by num_attention_heads=4", "models-heads"),
    case(lambda: models.from_config(num_attention_heads=0), ValueError, r"num_attention_heads=0: must be an int >= 1",
         "models-zero"),
    case(lambda: models.from_config(hidden_size=-32), ValueError, r"hidden_size=-32: must be an int >= 1",
         "models-negative"),
    case(lambda: models.from_config(num_hidden_layers="2"), TypeError, r"num_hidden_layers='2': must be an int",
         "models-type"),
    # -- kernels (MXINT8) ---------------------------------------------------------------------------------
    case(lambda: ref.quantize_mxint8(torch.randn(4, 32), 0), ValueError, r"group_size=0: must be a positive int",
         "kernels-group-0"),
    case(lambda: ref.quantize_mxint8(torch.randn(4, 32), 5), ValueError,
         r"group_size=5 does not divide the last dimension of w \(shape \(4, 32\)\); allowed values: divisors of 32",
         "kernels-group-divides"),
    case(lambda: ref.quantize_mxint8(torch.randn(4, 32), 32.0), ValueError, r"group_size=32.0", "kernels-group-float"),
    case(lambda: ref.quantize_mxint8(torch.arange(32), 32), TypeError, r"floating-point tensor, got Tensor of dtype "
         r"torch.int64", "kernels-dtype"),
    case(lambda: ref.quantize_mxint8(torch.tensor(1.0), 1), ValueError, r"w is a scalar", "kernels-scalar"),
    case(lambda: ref.dequantize_mxint8(M8.float(), E8, 32), TypeError, r"mantissa must be a torch.int8 tensor, got "
         r"torch.float32", "kernels-mantissa-dtype"),
    case(lambda: ref.dequantize_mxint8(M8, E8.float(), 32), TypeError, r"exponent must be a torch.uint8 tensor",
         "kernels-exponent-dtype"),
    case(lambda: ref.dequantize_mxint8(M8, torch.zeros(4, 2, dtype=torch.uint8), 32), ValueError,
         r"exponent shape \(4, 2\) does not match mantissa shape \(4, 32\)", "kernels-exponent-shape"),
    case(lambda: dequant.dequantize(M8, E8, 32, backend="gpu"), ValueError,
         r"backend='gpu': allowed values are 'auto', 'cuda', 'reference'", "kernels-backend"),
    case(lambda: dequant.dequantize(M8, E8, 32, impl="fast"), ValueError,
         r"impl='fast': allowed values are 'auto', 'vec', 'tile'", "kernels-impl"),
    case(lambda: dequant.dequantize(M8, E8, 32, backend="cuda"), RuntimeError,
         r"backend='cuda' needs CUDA tensors, got mantissa on cpu", "kernels-cuda-on-cpu"),
    case(lambda: packed_linear.MXINT8Linear(32, 4, backend="cuda")(torch.randn(2, 32)), RuntimeError,
         r"backend='cuda' needs CUDA tensors", "kernels-linear-cuda"),
    case(lambda: packed_linear.MXINT8Linear(30, 4, group_size=32), ValueError,
         r"group_size=32 does not divide .*divisors of 30: 1, 2, 3, 5", "kernels-linear-group"),
    case(lambda: packed_linear.MXINT8Linear.from_linear(torch.nn.Conv2d(1, 1, 1)), TypeError,
         r"from_linear needs an nn.Linear, got Conv2d", "kernels-from-linear"),
    case(lambda: packed_linear.convert_to_mxint8(tiny(), group_size=0), ValueError, r"group_size=0: must be a positive",
         "kernels-convert-group"),
    case(lambda: sheet_decode.decode_bits_table([1], 300), ValueError, r"exponent=300: allowed values are 0..255",
         "kernels-table-exponent"),
    # the fused MXINT8 linear's launch configurations
    case(lambda: _fused_triton().check_config({"kind": "dq", "BLOCK_N": 16, "BLOCK_K": 32, "BLOCK_M": 48}, 32),
         ValueError, r"BLOCK_M=48 \(kind 'dq'\): allowed values are 16, 32, 64", "fused-block-m"),
    case(lambda: _fused_triton().launch(torch.randn(2, 32), M8, E8, None, 32, {"kind": "tma", "BLOCK_N": 16, "BLOCK_K": 32}),
         ValueError, r"config kind='tma': x is torch.float32: the tma kernel takes bfloat16", "fused-tma-dtype"),
    case(lambda: _fused_triton().check_config({"kind": "dq", "BLOCK_N": 16, "BLOCK_K": 32, "PDL": 2}, 32),
         ValueError, r"config PDL=2: allowed values are True, False", "fused-pdl"),
    case(lambda: _fused_triton().check_config({"kind": "dq", "BLOCK_N": 16, "BLOCK_K": 32, "PDL": True,
                                               "PREFETCH": 100}, 32),
         ValueError, r"config PREFETCH=100: allowed values are 0 and powers of two >= 128", "fused-prefetch"),
    case(lambda: _fused_triton().check_config({"kind": "dq", "BLOCK_N": 16, "BLOCK_K": 32, "PREFETCH": 1024}, 32),
         ValueError, r"config PREFETCH=1024 needs PDL=True", "fused-prefetch-no-pdl"),
    case(lambda: _fused_triton().check_config({"kind": "dq", "BLOCK_N": 16, "BLOCK_K": 32, "PDL": True,
                                               "TRIGGER": "middle"}, 32),
         ValueError, r"config TRIGGER='middle': allowed values are 'start', 'end'", "fused-pdl-trigger"),
    case(lambda: _fused_triton().launch(torch.randn(2, 32), M8, E8, None, 32,
                                        {"kind": "dq", "BLOCK_N": 16, "BLOCK_K": 32, "PDL": True}),
         ValueError, r"config PDL=True: PDL needs a compiled launch on a CUDA GPU .*; allowed: PDL=False",
         "fused-pdl-cpu"),
    # switches of the search workers' GPU path
    case(lambda: step_kernels.enabled(), ValueError, r"LABKIT_STEP_KERNELS='on': allowed values are 0 .*, 1 ",
         "step-kernels-switch", env={"LABKIT_STEP_KERNELS": "on"}),
    case(lambda: host_wait.mode(), ValueError, r"LABKIT_CUDA_WAIT='yield': allowed values are spin, block",
         "cuda-wait-mode", env={"LABKIT_CUDA_WAIT": "yield"}),
]


@pytest.mark.parametrize("fn,exc,match,env", CASES)
def test_bad_input_gives_a_clear_error(fn, exc, match, env, monkeypatch, tmp_path):
    (tmp_path / "partial" / "imdb").mkdir(parents=True)
    (tmp_path / "partial" / "imdb" / "imdb_test.parquet").write_bytes(b"")
    for key, value in env.items():
        if value is None:
            monkeypatch.delenv(key, raising=False)
        else:
            monkeypatch.setenv(key, value.format(tmp=tmp_path))
    with pytest.raises(exc, match=match):
        fn()


# -- CLI: exit status and one line on stderr, never a traceback ------------------------------------------------

def _cli(argv, capsys) -> tuple[int, str]:
    try:
        code = cli.main(argv)
    except SystemExit as stop:  # argparse's own usage errors
        code = stop.code
    return code, capsys.readouterr().err


CLI_CASES = [
    pytest.param(["run", "lab9"], 2, r"labkit: error: unknown lab or notebook 'lab9'; allowed: labs lab0, lab1, .*"
                 r"notebooks lab0_graphs_lora", id="cli-lab"),
    pytest.param(["run", "lab0", "lab9"], 2, r"unknown lab or notebook 'lab9'", id="cli-lab-after-a-good-one"),
    pytest.param(["run"], 2, r"labkit: error: run: name labs or notebooks \(allowed labs: lab0", id="cli-no-lab"),
    pytest.param(["run", "lab0", "--set", "not json"], 2,
                 r"labkit: error: --set 'not json' is not valid JSON .*e\.g\. --set '\{\"train_size\": 500\}'",
                 id="cli-set-json"),
    pytest.param(["run", "lab0", "--set", "[1, 2]"], 2, r"--set '\[1, 2\]' is a JSON list; give a JSON object",
                 id="cli-set-list"),
    pytest.param(["run", "lab0", "--set", '{"unknown_key": 1}'], 2,
                 r"labkit: error: unknown setting\(s\) \['unknown_key'\] for lab0_graphs_lora; allowed: ", id="cli-set-key"),
    pytest.param(["run", "lab0", "--set", '{"lr": "abc"}'], 2, r"labkit: error: setting lr='abc': must be a number",
                 id="cli-set-type"),
    pytest.param(["run", "lab0", "--set", '{"lr": NaN}'], 2, r"setting lr=nan is out of range", id="cli-set-nan"),
    pytest.param(["run", "lab4", "--set", '{"train_size": 500}'], 2,
                 r"unknown setting\(s\) \['train_size'\] for lab4_perf", id="cli-set-other-lab"),
    pytest.param(["run", "lab0", "--profile", "medium"], 2, r"invalid choice: 'medium'", id="cli-profile"),
    pytest.param(["bogus"], 2, r"invalid choice: 'bogus'", id="cli-command"),
    pytest.param([], 2, r"required: command", id="cli-no-command"),
    pytest.param(["data"], 2, r"required: action", id="cli-data-action"),
    pytest.param(["dashboard", "--storage", "journal:/proc/sub/x.journal"], 2, r"labkit: error: dashboard --storage "
                 r"'journal:/proc/sub/x.journal': the journal /proc/sub/x.journal does not exist; check the path",
                 id="cli-dashboard-journal"),
    pytest.param(["dashboard", "--storage", "mongodb://h/db"], 2, r"labkit: error: dashboard --storage 'mongodb://h/db': "
                 r"unknown database 'mongodb'; allowed: journal:PATH", id="cli-dashboard-dialect"),
    pytest.param(["dashboard", "--storage", "postgresql://u@127.0.0.1:1/db"], 2, r"labkit: error: dashboard --storage "
                 r"'postgresql://u@127.0.0.1:1/db': cannot open the database", id="cli-dashboard-server-down"),
    pytest.param(["regenerate", "--budget", "5"], 2, r"labkit: error: regenerate: --budget 5.0: must be > 20 seconds",
                 id="cli-regenerate-budget"),
    pytest.param(["regenerate", "--only", "lab9"], 2, r"labkit: error: regenerate: --only \['lab9'\]: allowed "
                 r"notebooks are lab0_graphs_lora, lab1_quantize", id="cli-regenerate-only"),
    pytest.param(["data", "check"], 1, r"labkit: error: DataNotFoundError: LABKIT_DATA_DIR=/nonexistent/labkit-data "
                 r"is set.*\n\(rerun with --debug for the traceback\)", id="cli-data-dir"),
]


@pytest.mark.parametrize("argv,code,match", CLI_CASES)
def test_cli_bad_input_is_one_error_line(argv, code, match, capsys, monkeypatch):
    monkeypatch.setenv("LABKIT_DATA_DIR", "/nonexistent/labkit-data")
    got, err = _cli(argv, capsys)
    assert got == code
    assert "Traceback" not in err
    assert re.search(match, err), err


@pytest.mark.parametrize("argv", [["--debug", "run", "lab9"], ["run", "lab9", "--debug"]])
def test_cli_debug_shows_the_exception(argv):
    with pytest.raises(cli.UsageError, match="unknown lab or notebook 'lab9'"):
        cli.main(argv)


# -- legitimate edge inputs: documented behaviour ----------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(FORMATS))
@pytest.mark.parametrize("shape", [(0,), (0, 16), (4, 0), (2, 0, 3)])
def test_empty_tensor_quantizes_to_an_empty_tensor(name, shape):
    x = torch.empty(shape, requires_grad=True)
    y = make_format(name).quantizer()(x)
    y.sum().backward()
    assert y.shape == x.shape and y.dtype == x.dtype and x.grad.shape == x.shape


def test_explicit_skip_everything_leaves_the_model_unchanged():
    # {"default": None} says "no layer" on purpose (unlike {}, an error): nothing changes, nothing is reported
    res = Q(tiny(), {"default": None})
    assert res.changed == {}
    assert not any(isinstance(m, quant.QuantLinear) for m in res.model.modules())


def test_a_set_data_dir_is_used_alone(tmp_path, monkeypatch):
    # the repository's data/ and ../shared/data may hold the dataset: a wrong LABKIT_DATA_DIR must not reach them
    monkeypatch.setenv("LABKIT_DATA_DIR", str(tmp_path))
    with pytest.raises(data.DataNotFoundError, match="LABKIT_DATA_DIR"):
        data.load_imdb("offline")


def test_every_profile_value_is_a_valid_override_of_itself():
    # the checks must never reject what the profiles themselves hold (ints stay ints, floats floats)
    for lab in profiles.notebooks():
        for profile in profiles.PROFILES:
            base = profiles.lab_settings(lab, profile)
            for key in set(base) - {"profile", "lab"}:
                assert profiles.lab_settings(lab, profile, **{key: base[key]})[key] == base[key], (lab, profile, key)


def test_every_setting_has_a_type():
    # a key that is None in every profile needs overrides.NONE_TYPES, or its overrides go unchecked
    for lab in profiles.notebooks():
        every = [profiles.lab_settings(lab, p) for p in profiles.PROFILES]
        for key in every[0]:
            if all(s[key] is None for s in every):
                assert key in overrides.NONE_TYPES, (lab, key)


def test_auto_workers_have_one_spelling():
    # the profiles say "auto"; 0 and None, its older spellings, are still accepted as overrides and read as "auto"
    for lab in ("lab2_search", "lab3_search"):
        for profile in profiles.PROFILES:
            assert profiles.lab_settings(lab, profile)["workers"] in ("auto", 2)
        for old in (0, None, "auto"):
            assert profiles.lab_settings(lab, "smoke", workers=old)["workers"] == "auto"
        assert profiles.lab_settings(lab, "smoke", workers=3)["workers"] == 3


def test_an_int_override_of_a_float_setting_is_stored_as_a_float():
    s = profiles.lab_settings("lab1_quantize", "smoke", lr=1, sparsities=[0, 0.5])
    assert s["lr"] == 1.0 and isinstance(s["lr"], float) and s["sparsities"] == [0.0, 0.5]
    assert profiles.lab_settings("lab2_search", "smoke", storage=None, train_size=None)["train_size"] is None


# -- a request the transform can only approximate: a warning, not an error ----------------------------------------

def test_pruning_every_weight_of_a_small_layer_warns_with_requested_and_achieved():
    # 0.999 of 64 weights rounds to all 64: the layer is dead, which the report alone would not say
    layer = torch.nn.Sequential(torch.nn.Linear(8, 8))
    with pytest.warns(prune.SparsityWarning, match=r"layer '0': weight sparsity requested 0.999, achieved 1 "
                                                   r"\(64 of 64 zeroed; every one is zero\)"):
        res = P(layer, {"weight": {"sparsity": 0.999}})
    assert res.report["achieved_weight_sparsity"] == 1.0
    with pytest.warns(prune.SparsityWarning, match=r"layers '0' \(global\): weight sparsity requested 0.999"):
        P(layer, {"weight": {"sparsity": 0.999, "scope": "global"}})
    with pytest.warns(prune.SparsityWarning, match=r"layer '0': activation sparsity requested 0.9, achieved 0.875"):
        P(layer, {"activation": {"sparsity": 0.9}})  # 7.2 of 8 inputs rounds to 7


def test_pruning_within_rounding_does_not_warn(recwarn):
    P(torch.nn.Sequential(torch.nn.Linear(8, 8)), {"weight": {"sparsity": 0.3}})  # 19 of 64: 0.297
    P(tiny(), {"weight": {"sparsity": 0.5, "scope": "global"}, "activation": {"sparsity": 0.5}})
    assert not [w for w in recwarn if issubclass(w.category, prune.SparsityWarning)]


def test_rdb_storage_without_sqlalchemy_says_what_is_missing(monkeypatch):
    # optuna imports SQLAlchemy lazily, so labkit runs on journals without it: the RDB URL check must too
    import sys
    for name in ("sqlalchemy", "sqlalchemy.engine", "sqlalchemy.exc"):
        monkeypatch.setitem(sys.modules, name, None)  # import raises ImportError
    with pytest.raises(ValueError, match=r"storage 'notadb://x': unknown database 'notadb'; allowed: journal:PATH"):
        search.make_storage("notadb://x")
    with pytest.raises(ModuleNotFoundError, match=r"storage 'postgresql://u:\*\*\*@h/db': an RDB storage needs "
                                                  r"the sqlalchemy package"):
        search.make_storage("postgresql://u:secret@h/db")
