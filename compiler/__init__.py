"""The VTA compiler: tensor expressions and schedules, lowered to VTA instructions through
tensorize, DMA inference, ALU lowering and latency hiding with virtual threads; CPU code
through LLVM; whole ONNX networks, quantised, split between the two.

Layers, bottom to top (each imports only the ones below it; ``docs/architecture.md``):

- :mod:`.te` the expression language, its numpy semantics (:mod:`.te.evaluate`), the loop IR
  (:mod:`.te.ir`) and per-stage schedules (:mod:`.te.loop_nest`);
- :mod:`.vta` the VTA back end (GEMM recognition, knobs and primitives, default schedules,
  lowering, passes, program, codegen, ``build``; ALU-only, pooling and transposed-conv
  kernels) and :mod:`.cpu` the LLVM back end;
- :mod:`.ops` the operator library and its registry (one module per operator family);
- :mod:`.tuner` the learned tuner (with :mod:`.tuner.hook`: ``space`` / ``measure``);
- :mod:`.graph` whole networks; :mod:`.dse` design-space exploration; :mod:`.cli` the
  ``vta`` command.

This package re-exports the everyday API below; modules inside the compiler import from
the layer that defines a name, never from here.

Example (runnable as it stands; ``tests/test_docs.py`` runs it)::

    import numpy as np
    from isa import VTAConfig
    from vta_runtime import SimDevice
    from compiler import Schedule, build, measure, ops, recognise, space

    cfg = VTAConfig()                   # 1x16x16, int8 inputs and weights, int32 accumulators
    rng = np.random.default_rng(0)
    # conv2d 32->32 channels, 14x14, 3x3, stride 1, pad 1, then >>8, +bias, clip, int8; the
    # tensors are in VTA's packed layouts (data NCHW16c as (N, C/16, H, W, 1, 16), weights
    # OIHW16o16i, bias (CO/16, 1, 16)); ops.pack_nchw / ops.pack_oihw convert from NCHW/OIHW
    data, kernel, bias, out = ops.conv2d_resnet_block(cfg, 1, 32, 14, 14, 32, 3, 1, 1)
    x = rng.integers(-128, 128, (1, 32, 14, 14), dtype=np.int8)
    w = rng.integers(-128, 128, (32, 32, 3, 3), dtype=np.int8)
    b = rng.integers(-1000, 1000, (32,), dtype=np.int32)
    feeds = {data: ops.pack_nchw(x, 1, 16), kernel: ops.pack_oihw(w, 16, 16),
             bias: b.reshape(2, 1, 16)}

    k = build(out, cfg)                 # default schedule (cost-model search), 2 vthreads
    text = k.show("fold_uop")           # the IR after any pass, as text
    result, stats = k.run(SimDevice(cfg, timed=True), feeds)
    ref = np.clip((ops.conv2d_nchw_reference(x, w, 1, 1) >> 8) + b[None, :, None, None],
                  0, 127).astype(np.int8)
    assert np.array_equal(ops.unpack_nchw(result), ref)

    # any schedule, as calls or as the equivalent plain data (compiler.opts_of / apply)
    s = Schedule(recognise(out, cfg))
    s.tile("h", "w", 5, 7)                      # tiles need not divide 14: edge tiles
    s.split("co", 1)
    oo, oi = s.split("co.outer", 2)             # a second split of the tile loop
    s.reorder(oo, "h.outer", "w.outer", oi)
    s.compute_at("kernel", oo)                  # weights of 2 out-blocks, loaded once
    s.double_buffer("kernel")                   # ...while the previous block computes
    s.bind_vthread(oi, 2)
    result2, _ = build(out, cfg, s.knobs()).run(SimDevice(cfg), feeds)
    assert np.array_equal(result2, result)

    # the tuner hook
    sp = space(out, cfg)                        # indexable knob space, valid(), features()
    cycles = measure(out, sp.sample(rng, 1)[0], cfg)["cycles"]
"""

from . import ops
from .vta.default_schedule import default_knobs, dram_minimum, estimate
from .te.evaluate import evaluate, run
from .vta.intrin import TensorizeError, gemm_intrin, verify_gemm
from .te.ir import IRError
from .te.loop_nest import StageSchedule, run_stage
from .vta.passes import StorageError
from .vta.pipeline import PASSES, CompiledKernel, build
from .vta.primitives import Opt, Schedule, apply, opts_of
from .vta.schedule import Knobs, PrimitiveError, ScheduleError
from .te import (Tensor, TEError, cast, compute, maximum, minimum, placeholder, reduce_axis,
                 select, shift_left, shift_right)
from .te import sum  # noqa: A004 - te.sum, like tvm.te.sum
from .tuner.hook import ConfigSpace, measure, space
from .vta.workload import GemmWorkload, recognise

from .te.errors import CompilerError

__all__ = [
    "ops", "build", "CompiledKernel", "PASSES",
    "placeholder", "compute", "reduce_axis", "sum", "cast", "minimum", "maximum",
    "shift_left", "shift_right", "select", "Tensor", "evaluate", "run",
    "gemm_intrin", "verify_gemm", "recognise", "GemmWorkload",
    "Knobs", "Opt", "Schedule", "apply", "opts_of", "PrimitiveError", "StageSchedule", "run_stage", "default_knobs", "estimate", "dram_minimum",
    "space", "measure", "ConfigSpace",
    "TEError", "TensorizeError", "ScheduleError", "StorageError", "IRError", "CompilerError",
]
