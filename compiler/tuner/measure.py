"""Measuring one candidate: compile its knobs and time them on a device, in any process.

:func:`measure_item` is the task the tuner hands to an :mod:`compiler.tuner.executor` executor
(a module-level function on plain data, so a forked pool and a Dask worker can both run
it).  The default device is the timed simulator in **timing-only** mode: the instruction
stream, micro-ops and DRAM image are built exactly as for a real run, the stream passes the
simulator's static checks and token accounting, and the cycle-approximate model times it;
only the functional datapath (GEMM/ALU arithmetic, data movement) is skipped, because the
timing model never looks at data.  Cycles are therefore identical to a full run
(``tests/test_tuner_measure.py`` checks it) at about half the cost.  ``check=True`` runs
the full simulator instead and compares the output bit-exactly with the tensor-expression
evaluator; ``device="rtl"`` runs the generated RTL (Amaranth simulation; cycles from the
hardware counter).

Example::

    from isa import VTAConfig
    from compiler.tuner import Task
    from compiler.tuner.measure import measure_item
    task = Task.conv2d(1, 32, 14, 14, 32, 3, 1, 1)
    print(measure_item((task.as_dict(), VTAConfig().to_dict(),
                        {"tile_h": 7, "tile_w": 14, "vthreads": 2}, "sim", False)))
"""

from __future__ import annotations

import time

import numpy as np

from isa import VTAConfig

DEVICES = ("sim", "rtl")

from .hook import default_timing, timing_id  # noqa: E402  (re-exported)


_CFG_CACHE: dict = {}


def _config(d: dict) -> VTAConfig:
    key = tuple(sorted(d.items()))
    cfg = _CFG_CACHE.get(key)
    if cfg is None:
        cfg = _CFG_CACHE[key] = VTAConfig.from_dict(d)
    return cfg


def measure_knobs(task, cfg: VTAConfig, knobs, device: str = "sim", check: bool = False,
                  seed: int = 0, timing=None) -> dict:
    """Compile ``knobs`` for ``task`` and run once; returns ``{"cycles", "dram_bytes",
    "gemm_ops", "compile_seconds", "run_seconds", "correct"}``.  ``timing``: the simulator's
    :class:`vta_sim.timing.TimingParams` (default: :func:`default_timing`, the model
    ``vta run`` uses).
    Raises the compiler's ScheduleError for a schedule that cannot be built (the caller
    records it)."""
    from vta_runtime import SimDevice

    from ..vta.pipeline import build
    from .conv_pool_space import is_conv_pool
    from .hook import random_inputs, timing_only_simulator
    wl = task.workload(cfg)
    t0 = time.perf_counter()
    if is_conv_pool(wl):                 # a conv fused with its max pool (the stem)
        from ..vta.conv_pool import build_conv_pool
        ck = build_conv_pool(wl, cfg, knobs)
    else:
        ck = build(wl, cfg, knobs)
    t1 = time.perf_counter()
    feeds = random_inputs(wl, ck.inputs, np.random.default_rng(seed))
    if device == "rtl":
        from vta_runtime import RtlDevice
        dev = RtlDevice(cfg)
    elif device == "sim":
        tp = timing if timing is not None else default_timing()
        dev = SimDevice(cfg, timed=tp)
        if not check:
            dev.sim = timing_only_simulator(cfg, tp)
    else:
        raise ValueError(f"unknown measurement device {device!r} (known: {', '.join(DEVICES)})")
    got, stats = ck.run(dev, feeds)
    t = dict(stats.get("timing") or {}, **stats)
    cycles = next(int(t[c]) for c in ("cycles", "total_cycles", "cycle_count") if c in t)
    correct = None
    if check:
        from ..te.evaluate import run as te_run
        correct = bool(np.array_equal(got, te_run(wl.out, feeds)))
    dram = sum(int(stats.get(k, 0)) for k in ("inp_load_bytes", "wgt_load_bytes",
                                              "acc_load_bytes", "uop_load_bytes",
                                              "out_store_bytes"))
    return {"cycles": cycles, "dram_bytes": dram, "gemm_ops": int(stats.get("gemm_ops", 0)),
            "compile_seconds": round(t1 - t0, 4),
            "run_seconds": round(time.perf_counter() - t1, 4), "correct": correct}


def measure_item(item) -> dict:
    """Executor task: ``item = (task dict (or a Task carrying its workload), config dict,
    knobs dict, device, check, tag[, timing])`` (``tag`` is the caller's; ``timing``, when
    present, the simulator's TimingParams)."""
    from ..vta.schedule import Knobs
    from .space import Task, task_from_spec
    task_d, cfg_d, knobs_d, device, check = item[:5]
    task = task_d if isinstance(task_d, Task) else task_from_spec(task_d)
    timing = item[6] if len(item) > 6 else None
    return measure_knobs(task, _config(cfg_d), Knobs.from_dict(knobs_d), device, check,
                         timing=timing)


__all__ = ["measure_knobs", "measure_item", "DEVICES", "default_timing", "timing_id"]
