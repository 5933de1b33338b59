"""What every compiled VTA kernel is: the stages kept for ``show``, the op program, the
micro-op sites, and one way to run it (upload the inputs, emit the op program into a command
queue, synchronise, download the output).

:class:`~compiler.vta.pipeline.CompiledKernel` (conv2d/dense + epilogue) and
:class:`~compiler.vta.eltwise.EltwiseKernel` (ALU-only and pooling kernels) differ only in how
they check and upload their inputs (:meth:`KernelBase.upload`), read back their result
(:meth:`KernelBase.download`) and print a stage (``show``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from isa import VTAConfig

from .codegen import KernelSites, check_fields, join_planes, run_stream
from .program import eliminate_redundant_loads, insert_dependencies, listing
from ..te import TEError


def finish_ops(ops: list, cfg: VTAConfig, stages: dict, refine=None) -> list:
    """The op program's last passes, each noted in ``stages``: drop loads whose SRAM region
    still holds the data ("reuse"), ``refine(ops, cfg)`` if given (an exact reordering that
    must see the loads that remain, e.g. :func:`compiler.vta.start.faster_start`), insert
    the dependency tokens ("coproc_sync"), and check every instruction field fits its
    bits."""
    stages["unroll"] = f"{len(ops)} ops"
    n = len(ops)
    ops = eliminate_redundant_loads(ops)
    stages["reuse"] = f"{len(ops)} ops after dropping {n - len(ops)} redundant loads"
    if refine is not None:
        m = len(ops)
        ops = refine(ops, cfg)
        stages["refine"] = f"{len(ops)} ops ({len(ops) - m:+d})"
    ops = insert_dependencies(ops)
    check_fields(ops, cfg)
    stages["coproc_sync"] = f"{len(ops)} ops with tokens (see listing())"
    return ops


@dataclass
class KernelBase:
    """A compiled kernel (see the module docstring); subclasses define ``upload``,
    ``download``, ``show``, ``inputs`` and ``output``."""
    cfg: VTAConfig
    workload: object
    knobs: object
    stages: dict
    ops: list
    compile_seconds: float
    sites: KernelSites = field(default_factory=KernelSites)
    last_run: object = None
    out_tensor: object = None       # what the STOREs write (the output, or its byte planes)

    #: the error type of this kind of kernel (raised for a run before any run, bad inputs)
    error = TEError

    def __post_init__(self):
        if self.out_tensor is None:
            self.out_tensor = self.workload.out

    def instructions(self) -> str:
        """The last run's instruction stream, one ``describe`` line each."""
        from isa import decode_program, describe
        if self.last_run is None:
            raise self.error("run the kernel first: instructions are recorded on first call")
        return "\n".join(f"{i:5d}  {describe(x)}" for i, x in
                         enumerate(decode_program(self.last_run.insns, self.cfg)))

    def listing(self, limit: int | None = 60) -> str:
        """The op program with its dependency tokens (the first ``limit`` ops)."""
        return listing(self.ops, limit)

    def run(self, dev, inputs: dict, cq=None) -> tuple[np.ndarray, dict]:
        """Run on ``dev`` (a vta_runtime device); ``inputs`` maps tensor or name -> array
        (as :attr:`inputs` declares it).  Returns (output array, device stats of the run)."""
        from vta_runtime import CommandQueue
        allocated = []
        try:
            bufs, ob = self.upload(dev, inputs, allocated)
            own = cq is None
            cq = cq or CommandQueue(dev)
            rec = run_stream(self.ops, cq, bufs, self.sites)
            self.last_run = rec
            result = self.download(ob)
            if own:
                cq.close()
            return result, dict(rec.stats)
        finally:
            for b in allocated:
                dev.free(b)

    def _checked(self, t, arr) -> np.ndarray:
        """``arr`` for input tensor ``t``: present, integer, of ``t``'s shape, C-ordered in
        ``t``'s dtype; else this kernel's error naming the input."""
        from ..te.evaluate import to_numpy_dtype
        if arr is None:
            raise self.error(f"run: no array for input {t.name} {t.shape}")
        arr = np.asarray(arr)
        if not np.issubdtype(arr.dtype, np.integer) and arr.dtype != bool:
            raise self.error(f"run: input {t.name} has dtype {arr.dtype}, expected {t.dtype}")
        arr = np.asarray(arr, dtype=to_numpy_dtype(t.dtype), order="C")
        if arr.shape != t.shape:
            raise self.error(f"run: input {t.name} has shape {arr.shape}, expected {t.shape}")
        return arr

    def _alloc_output(self, dev, bufs: dict, allocated: list):
        from ..te.evaluate import to_numpy_dtype
        out = self.out_tensor
        ob = dev.alloc(int(np.prod(out.shape)) * to_numpy_dtype(out.dtype).itemsize,
                       name=out.name)
        allocated.append(ob)
        bufs[out] = ob
        return ob

    def _read_output(self, ob) -> np.ndarray:
        """The STOREd tensor from ``ob``, byte planes joined into the wide result."""
        from ..te.evaluate import to_numpy_dtype
        out = self.out_tensor
        result = ob.copy_to(to_numpy_dtype(out.dtype), shape=out.shape)
        if out is not self.workload.out:          # byte planes -> the wide result
            result = join_planes(result, self.workload.out.dtype)
        return result


class WorkloadKernel(KernelBase):
    """A kernel whose workload names its ``inputs``, ``out`` and ``constants`` (the op-list
    kernels: element-wise, pooling, resize, interleave): ``show``, ``upload`` and
    ``download`` from those."""

    @property
    def inputs(self) -> list:
        return self.workload.inputs

    @property
    def output(self):
        return self.workload.out

    @property
    def constants(self) -> dict:
        """``{tensor: array}`` the kernel reads besides :attr:`inputs` (the identity weight
        tile of GEMM-core adds): an executor that drives ``ops`` itself must upload them
        (:meth:`run` does)."""
        return dict(getattr(self.workload, "constants", {}))

    def show(self, stage: str = "lower") -> str:
        """The program after ``stage`` (see :attr:`stages`); "coproc_sync" lists the op
        program with its dependency tokens."""
        if stage == "coproc_sync":
            return self.listing(80)
        if stage not in self.stages:
            raise self.error(f"show: no stage {stage!r}; this kernel has "
                             f"{', '.join(self.stages)}")
        return self.stages[stage]

    def upload(self, dev, inputs: dict, allocated: list):
        """Check and copy the inputs and the kernel's constants to ``dev``; allocate the
        output.  Returns (tensor -> device buffer, output buffer)."""
        bufs = {}
        consts = self.constants
        for t in self.inputs + list(consts):
            arr = self._checked(t, consts[t] if t in consts
                                else inputs.get(t, inputs.get(t.name)))
            b = dev.alloc(max(arr.nbytes, 1), name=t.name)
            allocated.append(b)
            b.copy_from(arr)
            bufs[t] = b
        return bufs, self._alloc_output(dev, bufs, allocated)

    def download(self, ob) -> np.ndarray:
        """The result from output buffer ``ob`` (byte planes joined)."""
        return self._read_output(ob)
