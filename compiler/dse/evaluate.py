"""One design point of ``vta dse`` measured: every layer compiled with its default schedule (or
the best of a short tuning run) and run on the timed simulator with the point's memory system
and ALU option.

:func:`evaluate_point` is the task the executor runs (a module-level function of one
picklable argument).  Any layer that cannot be compiled or run makes the point ``failed``
with the layer and the error named; the sweep records it and goes on.

Example::

    from compiler.dse.evaluate import evaluate_point
    from compiler.dse.workload import Layer
    point = {"LOG_BATCH": 0, "LOG_BLOCK": 3, "LOG_UOP_BUFF_SIZE": 13, "LOG_INP_BUFF_SIZE": 14,
             "LOG_WGT_BUFF_SIZE": 16, "LOG_ACC_BUFF_SIZE": 16, "LOG_BUS_WIDTH": 6,
             "alu_stages": 3, "dram": "vta_hw_fpga"}
    layer = Layer("t", 14, 14, 32, 32, 3, 1, 1)
    r = evaluate_point({"point": point, "layers": [layer.to_dict()]})
    print(r["status"], r["cycles"], r["layers"][0]["correct"])
"""

from __future__ import annotations

import functools
import time

import numpy as np

from .space import config_of, timing_of
from .workload import Layer

__all__ = ["evaluate_point", "run_layer"]


def _up(c: int, block: int) -> int:
    return -(-c // block) * block


@functools.lru_cache(maxsize=32)
def _data(layer: Layer, batch: int, cin: int, cout: int, shift: int, seed: int, check: bool):
    """Random inputs and (with ``check``) the numpy reference output of a layer; cached,
    because the reference costs more than compiling and simulating, and the points of a
    sweep share it (it depends on BATCH and the padded channels only)."""
    from ..ops import conv2d_nchw_reference
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (batch, cin, layer.h, layer.w), dtype=np.int8)
    w = rng.integers(-128, 128, (cout, cin, layer.k, layer.k), dtype=np.int8)
    b = rng.integers(-2000, 2000, (cout,), dtype=np.int32)
    want = None
    if check:
        ref = conv2d_nchw_reference(x, w, layer.stride, layer.pad)
        want = np.clip((ref >> shift) + b[None, :, None, None], 0, 127).astype(np.int8)
    for a in (x, w, b) + ((want,) if check else ()):
        a.setflags(write=False)
    return x, w, b, want


def _tuned_knobs(wl, cfg, point: dict, layer: Layer, cin: int, cout: int, shift: int,
                 trials: int, default):
    """A short tuning run of one layer at one point (the learned tuner, in this process,
    under the point's own memory system), started from the default schedule: its best
    knobs, never slower than the default's."""
    from ..tuner import Task, tune
    task = Task.conv2d(cfg.batch, cin, layer.h, layer.w, cout, layer.k, layer.stride,
                       layer.pad, shift=shift, name=layer.name)
    r = tune(task, cfg, n_trials=trials, tuner="xgb", workers=0, timeout=None,
             initial=[default], timing=timing_of(point), batch_size=min(8, trials))
    return r.best_knobs or default


def run_layer(layer: Layer, point: dict, check: bool = True, seed: int = 0,
              tune_trials: int = 0) -> dict:
    """Compile and run one layer at one point: cycles, GEMM micro-ops, DRAM bytes and (with
    ``check``) whether the output equals the numpy reference.  ``tune_trials`` > 0: the
    schedule comes from a short tuning run of that many trials instead of the default."""
    from vta_runtime import SimDevice

    from ..vta.default_schedule import default_knobs
    from ..ops import conv2d_resnet_block, pack_nchw, pack_oihw, unpack_nchw
    from ..vta.pipeline import build
    from ..vta.workload import recognise

    cfg = config_of(point)
    cin, cout = _up(layer.cin, cfg.block_in), _up(layer.cout, cfg.block_out)
    shift = min(8, cfg.acc_width // 2 - 1)
    t0 = time.perf_counter()
    data, kernel, bias, out = conv2d_resnet_block(cfg, cfg.batch, cin, layer.h, layer.w, cout,
                                                  layer.k, layer.stride, layer.pad, shift)
    wl = recognise(out, cfg)
    knobs = default_knobs(wl, cfg, True)
    if tune_trials > 0:
        knobs = _tuned_knobs(wl, cfg, point, layer, cin, cout, shift, tune_trials, knobs)
    ck = build(wl, cfg, knobs)
    compile_s = time.perf_counter() - t0
    x, w, b, want = _data(layer, cfg.batch, cin, cout, shift, seed, check)
    bo = cfg.block_out
    feeds = {data: pack_nchw(x, cfg.batch, cfg.block_in), kernel: pack_oihw(w, bo, cfg.block_in),
             bias: np.repeat(b.reshape(-1, 1, bo), cfg.batch, axis=1).astype(cfg.acc_dtype)}
    got, stats = ck.run(SimDevice(cfg, timed=timing_of(point)), feeds)
    row = {"name": layer.name, "cycles": int(stats["cycles"]),
           "gemm_ops": int(stats["gemm_ops"]),
           "dram_bytes": sum(int(stats.get(k, 0)) for k in (
               "inp_load_bytes", "wgt_load_bytes", "acc_load_bytes", "uop_load_bytes",
               "out_store_bytes")),
           "compile_s": round(compile_s, 3),
           "schedule": f"tuned ({tune_trials} trials)" if tune_trials > 0 else "default"}
    if check:
        row["correct"] = bool(np.array_equal(unpack_nchw(got), want))
    return row


def evaluate_point(task: dict) -> dict:
    """``task``: ``point``, ``layers`` (Layer dicts), optional ``check`` (default True) and
    ``tune_trials`` (default 0: default schedules; N: a short tuning run of N trials per
    layer).
    Returns ``status`` ("ok"; "failed": a layer did not compile or run; "wrong-output": a
    layer's result differs from numpy, so its cycles are not trusted), ``cycles`` (all layers, all BATCH images),
    ``cycles_per_image``, ``layers`` (per-layer rows), ``error`` and ``seconds``."""
    t0 = time.perf_counter()
    point = task["point"]
    cfg = config_of(point)
    rows = []
    for d in task["layers"]:
        layer = Layer(**d)
        try:
            rows.append(run_layer(layer, point, task.get("check", True),
                                  tune_trials=task.get("tune_trials", 0)))
        except Exception as e:      # noqa: BLE001 - a failing point is data, never fatal
            return {"status": "failed", "cycles": None, "cycles_per_image": None,
                    "layers": rows, "error": f"layer {layer.name}: {type(e).__name__}: {e}",
                    "seconds": round(time.perf_counter() - t0, 3)}
    total = sum(r["cycles"] for r in rows)
    wrong = [r["name"] for r in rows if r.get("correct") is False]
    return {"status": "wrong-output" if wrong else "ok", "cycles": total,
            "cycles_per_image": total / cfg.batch,
            "layers": rows, "error": f"wrong output: {', '.join(wrong)}" if wrong else "",
            "seconds": round(time.perf_counter() - t0, 3)}
