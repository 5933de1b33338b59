"""The fused conv + max-pool kernel (:mod:`compiler.vta.conv_pool`, op ``qconv_pool``: the
ResNet-18 stem with its pool) as a tuning task.

Its plan reads three knobs (:func:`compiler.vta.conv_pool.plan`): ``tile_co`` output blocks
per pass over the image (a divisor of the output blocks), ``tile_ci`` input blocks per INP
chunk, and ``vthreads`` (1: ``kh`` conv-row slots in the ACC, 2: ``kh + 1``, the next row is
computed while the pool reads the others).  That space is small (ResNet-18's stem: 3 x 9 x
2 points), so it is searched exhaustively (:class:`ExhaustiveTuner`), most promising first, by the
same loop, executor and log as the GEMM layers (:func:`compiler.tuner.tuning.tune`).

:func:`conv_pool_key` names the workload in tuning logs: the conv's sizes in VTA tiles, its
epilogue and the pool (``conv_pool(...)``, never equal to a plain GEMM's key, so a fused
kernel's record is never applied to the conv alone, whose knobs mean something else).
"""

from __future__ import annotations

import numpy as np

from isa import VTAConfig

from ..vta.conv_pool import ConvPoolError, ConvPoolWorkload, plan
from ..vta.schedule import Knobs
from .knob_grid import KnobGrid
from .search import Tuner

#: The knobs the fused kernel reads; every other knob keeps its default.
KNOBS = ("tile_co", "tile_ci", "vthreads")


def is_conv_pool(wl) -> bool:
    return isinstance(wl, ConvPoolWorkload)


def conv_pool_key(wl: ConvPoolWorkload) -> str:
    """The fused workload's name in tuning logs: sizes in VTA tiles and pixels, the epilogue
    (bias ADD, SHR by ``a0``, per-channel SHR, clip) and the pool window, stride, padding."""
    nb, K, H, W = wl.data.shape[:4]
    OB = wl.kernel.shape[0]
    kh, kw, sy, sx, pt, pl = wl.pool
    eps = (["ADDv"] if wl.bias is not None else []) + ([f"SHR{wl.a0}"] if wl.a0 else []) \
        + (["SHRv"] if wl.shifts is not None else []) + [f"MAX{wl.lo}", f"MIN{wl.hi}"]
    return (f"conv_pool(nb={nb},cb={K},h={H},w={W},ob={OB},k=1x1,s=1,p=0.0,"
            f"ep={'|'.join(eps)},pool={kh}x{kw}/{sy}x{sx}.{pt}.{pl},out=8)")


def plan_knobs(p, wl: ConvPoolWorkload) -> Knobs:
    """The knobs that give plan ``p`` (a :class:`compiler.vta.conv_pool.Plan`)."""
    return Knobs(tile_co=p.og, tile_ci=p.kc, vthreads=1 if p.R == wl.pool[0] else 2)


def default_knobs_of(wl, cfg: VTAConfig) -> Knobs:
    """The default schedule of a GEMM workload or of a fused conv + max pool (the knobs of
    its default plan: building with them gives the default plan's program)."""
    if is_conv_pool(wl):
        return plan_knobs(plan(wl, cfg), wl)
    from ..vta.default_schedule import default_knobs
    return default_knobs(wl, cfg)


class ConvPoolSpace(KnobGrid):
    """The fused kernel's knob space: ``dims`` {knob: values} over :data:`KNOBS`; a point is
    a row of choice indices (as :class:`compiler.tuner.space.TunerSpace`'s)."""

    def __init__(self, wl: ConvPoolWorkload, cfg: VTAConfig):
        self.wl, self.cfg = wl, cfg
        OB, K = wl.kernel.shape[0], wl.kernel.shape[1]
        kc_max = max(1, min(K, cfg.inp_buff_depth // (2 * wl.data.shape[3])))
        self._set_dims({"tile_co": [d for d in range(1, OB + 1) if OB % d == 0],
                        "tile_ci": list(range(1, kc_max + 1)), "vthreads": [1, 2]})
        self._points = None

    def _accepts(self, knobs: Knobs) -> bool:
        """The kernel's plan takes the knobs (divisors, SRAM sizes)."""
        try:
            plan(self.wl, self.cfg, knobs)
            return True
        except ConvPoolError:
            return False

    def _value(self, name: str, value):
        return min(value, 2) if name == "vthreads" else value

    def _not_a_knob(self, name: str, value, default) -> str:
        return (f"knob {name}={value!r} has no meaning for the fused conv + max pool (it "
                f"reads {', '.join(KNOBS)})")

    def _not_a_value(self, name: str, given, value) -> str:
        return f"knob {name}={given!r} is not in the fused kernel's space ({self.dims[name]})"

    def points(self) -> np.ndarray:
        """Every valid point, most promising first: the most output blocks per pass (each
        pass reads the whole input again), then input chunks closest to the default plan's
        (balanced chunks), then fewer ACC slots."""
        if self._points is None:
            grid = np.stack(np.meshgrid(*[np.arange(r) for r in self.radix], indexing="ij"),
                            -1).reshape(-1, len(self.radix))
            kc = plan(self.wl, self.cfg).kc
            co, ci, vt = (np.array(self.dims[n])[grid[:, j]] for j, n in enumerate(self.names))
            grid = grid[np.lexsort((vt, ci, np.abs(ci - kc), -co))]
            self._points = np.array([p for p in grid if self.valid(p)], np.int64).reshape(
                -1, len(self.radix))
        return self._points


class ExhaustiveTuner(Tuner):
    """Every valid point of a small space (its ``points()`` order), each once."""
    name = "grid"

    def next_batch(self, n: int) -> np.ndarray:
        return self._fresh(self.space.points())[:n]


__all__ = ["KNOBS", "ConvPoolSpace", "ExhaustiveTuner", "conv_pool_key", "default_knobs_of",
           "is_conv_pool", "plan_knobs"]
