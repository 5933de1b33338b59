"""The on-chip state of VTA: micro-op, input, weight and accumulator SRAMs.

Layout (the representation the vectorised kernels want, not the hardware banking):

* ``uop_dst``, ``uop_src``, ``uop_wgt``: int64 ``[uop_depth]``, the decoded micro-op fields;
* ``inp``: float ``[inp_depth + 1, BATCH, BLOCK_IN]`` and ``wgt``: float
  ``[wgt_depth + 1, BLOCK_OUT, BLOCK_IN]``.  INP/WGT are only ever read by GEMM, whose dot
  products run through BLAS, so they are kept as exact floating-point copies of the signed
  integers (float32 for 8-bit elements, float64 for 16-bit).  The extra last tile is always
  zero: padded GEMM groups point at it;
* ``acc``: ``int{ACC_WIDTH}`` ``[acc_depth, BATCH, BLOCK_OUT]``; numpy integer arithmetic
  wraps exactly like the hardware's two's-complement accumulators;
* ``*_written``: bool masks of the elements ever written (used by strict mode only);
* ``out`` (hardware OUT-buffer mode only): the ACC-indexed OUT buffer that STORE reads and
  that only non-reset GEMMs and ALU ops write (spec §3.10); stored untruncated, STORE
  truncates.

fsim does not clear its SRAMs; neither do we (the initial contents are zeros here, but strict
mode reports any read of an element never written).
"""

from __future__ import annotations

import numpy as np

from isa import VTAConfig

from .gemm_plan import PlanCache

__all__ = ["Sram"]


class Sram:
    """All SRAM buffers of one VTA instance for configuration ``cfg``."""

    def __init__(self, cfg: VTAConfig, out_buffer: bool = False):
        self.cfg = cfg
        wide = cfg.inp_width > 8 or cfg.wgt_width > 8
        self.fdtype = np.dtype(np.float64 if wide else np.float32)
        #: largest |inp * wgt| product, and the largest exact integer of fdtype
        self.max_prod = (1 << (cfg.inp_width - 1)) * (1 << (cfg.wgt_width - 1))
        self.exact_limit = (1 << (53 if wide else 24)) - 1
        self.acc_dtype = np.dtype(f"int{cfg.acc_width}")
        self.inp_dtype = np.dtype(f"<i{cfg.inp_width // 8}")
        self.wgt_dtype = np.dtype(f"<i{cfg.wgt_width // 8}")
        self.out_dtype = np.dtype(f"<i{cfg.out_width // 8}")
        #: the ACC tiles' element type in DRAM (a LOAD ACC's source)
        self.acc_src_dtype = np.dtype(f"<i{cfg.acc_width // 8}")
        b, bi, bo = cfg.batch, cfg.block_in, cfg.block_out
        self.uop_dst = np.zeros(cfg.uop_buff_depth, np.int64)
        self.uop_src = np.zeros(cfg.uop_buff_depth, np.int64)
        self.uop_wgt = np.zeros(cfg.uop_buff_depth, np.int64)
        self.inp = np.zeros((cfg.inp_buff_depth + 1, b, bi), self.fdtype)
        self.wgt = np.zeros((cfg.wgt_buff_depth + 1, bo, bi), self.fdtype)
        self.acc = np.zeros((cfg.acc_buff_depth, b, bo), self.acc_dtype)
        self.uop_written = np.zeros(cfg.uop_buff_depth, bool)
        self.inp_written = np.zeros(cfg.inp_buff_depth, bool)
        self.wgt_written = np.zeros(cfg.wgt_buff_depth, bool)
        self.acc_written = np.zeros(cfg.acc_buff_depth, bool)
        #: hardware OUT buffer (None in fsim mode, where STORE reads ACC)
        self.out = np.zeros_like(self.acc) if out_buffer else None
        self.out_written = np.zeros(cfg.acc_buff_depth, bool)
        self.elem_bytes = {mt: cfg.elem_bytes(mt) for mt in range(6)}
        #: planned GEMM/ALU instructions (vta_sim.gemm_plan), by loop fields and micro-ops
        self.plans = PlanCache()
        self.depth = {"uop": cfg.uop_buff_depth, "inp": cfg.inp_buff_depth,
                      "wgt": cfg.wgt_buff_depth, "acc": cfg.acc_buff_depth}
