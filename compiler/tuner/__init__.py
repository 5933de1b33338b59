"""The learned tuner (AutoTVM for VTA): search the schedule knobs of a workload by measuring
candidates on the timed simulator, guided by an XGBoost cost model.

- :mod:`.space` tuning tasks (plain-data workloads) and the knob space (points as int rows);
- :mod:`.conv_pool_space` the stem fused with its max pool as a task: its key, its 3-knob
  space, searched exhaustively;
- :mod:`.features` itervar-style features of candidates, vectorised;
- :mod:`.model` the XGBoost ``rank:pairwise`` cost model (with transfer from other layers);
- :mod:`.search` tuners: XGBoost + simulated annealing, model-free annealing, random, grid;
- :mod:`.measure` one measurement (timing-only simulator by default) as an executor task;
- :mod:`.records` JSON-lines tuning logs, resuming, :func:`apply_history_best`;
- :mod:`.tuning` the loop that ties them to an :mod:`compiler.tuner.executor` executor;
- :mod:`.tophub` TVM's TopHub VTA knobs for ResNet-18, translated (the comparison baseline);
- :mod:`.cli` ``vta tune``.

Example (a small layer, 16 trials, in this process)::

    import os, tempfile
    from isa import VTAConfig
    from compiler.tuner import Task, tune
    task = Task.conv2d(1, 32, 14, 14, 32, 3, 1, 1, name="small")
    log = os.path.join(tempfile.mkdtemp(), "small.jsonl")
    res = tune(task, VTAConfig(), n_trials=16, log=log, tuner="xgb", workers=0, seed=0)
    print(res.best_cycles, res.best_knobs)
"""

from .records import (HistoryBest, LogWriter, Record, TuningLogError, apply_history_best,
                      best_by_workload, load)
from .space import Task, TaskError, TunerSpace, task_from_spec, workload_key
from .features import featurize, feature_names

__all__ = ["Task", "TaskError", "TunerSpace", "task_from_spec", "workload_key", "featurize",
           "feature_names", "Record", "LogWriter", "TuningLogError", "load",
           "best_by_workload", "apply_history_best", "HistoryBest", "tune", "TuneResult"]


def __getattr__(name):          # the tuning loop imports xgboost lazily
    if name in ("tune", "TuneResult"):
        from . import tuning
        return getattr(tuning, name)
    raise AttributeError(name)
