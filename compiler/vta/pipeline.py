"""The compiler pipeline, one readable function (tinygrad ``full_rewrite_to_sink``).

``build(out, cfg, knobs)`` runs, in order, each step named and explained in :data:`PASSES`;
the IR after every step is kept in ``CompiledKernel.stages`` (``print(k.show("fold_uop"))``)
and, with ``verify=True`` (tests), checked by the IR verifier after each pass.
"""

from __future__ import annotations

import time

import numpy as np

from isa import VTAConfig

from ..te import ir
from .codegen import KernelSites, check_fields, join_planes  # noqa: F401 (re-export)
from .kernel import KernelBase, finish_ops
from .lower import lower
from .passes import fold_uop_loops, inject_dma, inject_vthread, storage_flatten, verify
from .program import unroll
from .schedule import Knobs
from ..te import TEError
from .workload import GemmWorkload, recognise

#: (name, why) of every step, in order.
PASSES = [
    ("recognise", "match the TE graph to the GEMM intrinsic (tensorize check) + ALU epilogue"),
    ("lower", "apply the schedule: tile loops, vthreads, DMA copies, tensorized uop nests"),
    ("storage_flatten", "place buffers in the SRAM scopes; fail clearly on overflow"),
    ("inject_vthread", "interleave virtual threads statement by statement (double buffering)"),
    ("fold_uop", "fold uop nests into <= 2 hardware loops + explicit uops (VerifyDep-safe)"),
    ("inject_dma", "turn box copies into 2-D LOAD/STORE patterns with zero padding"),
    ("unroll", "evaluate loops into the flat stage-op program, padding per iteration"),
    ("reuse", "drop loads whose SRAM region still holds the same data (loop-invariant DMA)"),
    ("coproc_sync", "insert RAW/WAR dependency tokens between load, compute and store"),
]


class CompiledKernel(KernelBase):
    """A compiled VTA kernel: the IR at every stage, the op program, and a JIT runner."""

    def show(self, stage: str = "inject_dma") -> str:
        """The IR after pass ``stage``; for "coproc_sync", the op program with its tokens."""
        if stage == "coproc_sync":
            return self.listing(80)
        s = self.stages[stage]
        return s if isinstance(s, str) else ir.to_text(s)

    @property
    def inputs(self) -> list:
        """The tensors the caller feeds (as written in the graph: plain layouts stay plain;
        the kernel packs, pads and broadcasts them on the host)."""
        return list(dict.fromkeys(h.user for h in self.workload.feeds()))

    @property
    def constants(self) -> dict:
        """``{tensor: array}`` the kernel reads besides :attr:`inputs` (the identity weight
        tile of a residual added by the GEMM core): an executor that drives ``ops`` itself
        must upload them (:meth:`upload` does)."""
        from .residual import constants
        return constants(self.workload)

    @property
    def output(self):
        """The tensor :meth:`run` returns (the user's output, in the user's layout)."""
        return self.workload.user_out or self.workload.out

    def upload(self, dev, inputs: dict, allocated: list, shared: dict | None = None):
        """Check, pack and copy the inputs to ``dev``; allocate the output.  Returns (tensor
        -> device buffer, output buffer); every allocation is appended to ``allocated``.
        ``shared`` ({(user tensor, prep): buffer}) lets kernels of one stream share an
        input's DRAM image."""
        from ..te.evaluate import to_numpy_dtype
        bufs = {}
        given = {}
        shared = {} if shared is None else shared
        for h in self.workload.feeds():
            t = h.user
            key = (t, h.prep)
            if key in shared:
                bufs[h.dram] = shared[key]
                continue
            if t not in given:
                given[t] = self._checked(t, inputs.get(t, inputs.get(t.name)))
            arr = given[t]
            d = h.dram
            if h.prep is not None:
                arr = np.ascontiguousarray(h.prep(arr), dtype=to_numpy_dtype(d.dtype))
            if arr.shape != d.shape:
                raise TEError(f"run: packed input {d.name} has shape {arr.shape}, "
                              f"expected {d.shape} (compiler bug)")
            b = dev.alloc(max(arr.nbytes, 1), name=d.name)
            allocated.append(b)
            b.copy_from(arr)
            bufs[d] = shared[key] = b
        for t, arr in self.constants.items():
            b = dev.alloc(max(arr.nbytes, 1), name=t.name)
            allocated.append(b)
            b.copy_from(arr)
            bufs[t] = b
        return bufs, self._alloc_output(dev, bufs, allocated)

    def download(self, ob) -> np.ndarray:
        """The result from output buffer ``ob``, in the user's layout and dtype."""
        result = self._read_output(ob)
        if self.workload.unpack is not None:      # plain layout: unpack, crop
            result = self.workload.unpack(result)
        return result


def build(out, cfg: VTAConfig | None = None, knobs: Knobs | None = None, *,
          verify_ir: bool = False, keep_text: bool = False) -> CompiledKernel:
    """Compile the TE graph ending in ``out`` for VTA with schedule ``knobs`` (default: the
    searched default schedule)."""
    t0 = time.perf_counter()
    cfg = cfg or VTAConfig()
    if getattr(out, "conv_pool", None) is not None:     # a 1x1 conv fused with its max pool
        from .conv_pool import build_conv_pool
        return build_conv_pool(out.conv_pool, cfg, knobs)
    from .pool import build_alu_only, is_alu_only      # no GEMM: ALU-only / pooling kernels
    if is_alu_only(out):
        return build_alu_only(out, cfg, knobs)
    from .transpose import build_transpose, find_transpose   # phase-split conv2d_transpose
    if not isinstance(out, GemmWorkload) and find_transpose(out) is not None:
        return build_transpose(out, cfg, knobs, build=build, verify_ir=verify_ir,
                               keep_text=keep_text)
    wl = out if isinstance(out, GemmWorkload) else recognise(out, cfg)
    if knobs is None:               # inside compiler.tuner.apply_history_best: the log's best
        from .dispatch import dispatch_knobs
        knobs = dispatch_knobs(wl, cfg)
    if knobs is None:
        from .default_schedule import default_knobs
        knobs = default_knobs(wl, cfg)
    stages: dict = {"recognise": wl.describe()}
    stmt = lower(wl, knobs, cfg)

    def keep(name, s):
        if verify_ir:
            verify(s, name)
        stages[name] = ir.to_text(s) if keep_text else s
        return s

    stmt = keep("lower", stmt)
    stmt = keep("storage_flatten", storage_flatten(stmt, cfg))
    stmt = keep("inject_vthread", inject_vthread(stmt))
    stmt = keep("fold_uop", fold_uop_loops(stmt, cfg))
    stmt = keep("inject_dma", inject_dma(stmt))
    from .drain import split_drain, threads_apart    # a faster drain and start, exactly
    from .residual import gemm_residual
    from .start import faster_start
    ops = split_drain(unroll(stmt))
    if gemm_residual(wl) is None:       # (a residual's GEMM and loads sit in the epilogue)
        ops = threads_apart(ops)
    ops = finish_ops(ops, cfg, stages, refine=faster_start)
    target = next((s.copy.tensor for s in ir.walk(stmt) if isinstance(s, ir.DmaInsn)
                   and s.direction == "store"), wl.out)
    return CompiledKernel(cfg, wl, knobs, stages, ops, time.perf_counter() - t0,
                          out_tensor=target)
