"""ALU-only kernels: element-wise tensor-expression graphs with no GEMM, compiled straight to
VTA's tensor ALU (TVM's ``vta_get_started`` vector add, its ``add.vta`` / ``multiply.vta``).

Accepted graphs: a chain or tree of element-wise ``compute`` stages in a packed layout whose
last two dimensions are one accumulator tile ``(BATCH, BLOCK_OUT)``, over

* inputs read element-wise (int8, loaded sign-extended as ``ACC_8BIT``, or the accumulator
  dtype, loaded as ``ACC``), or broadcast over any of the leading (tile) dimensions: a
  per-channel vector ``(C/BLOCK, BATCH, BLOCK)`` indexed ``[c, b, j]``, TVM's 6-D bias
  ``(N/B, C/BO, 1, 1, B, BO)`` indexed ``[n, c, 0, 0, b, j]``, ...;
* integer constants;
* ``+ - *``, ``min``/``max`` (so ``clip``), ``>>``/``<<`` by constants, ``//`` by a power of
  two (an arithmetic shift: floor division), and casts.

Each output tile is computed in the ACC SRAM by ALU micro-ops (ADD, MIN, MAX, MUL, SHR;
``x - y`` as ADD of ``y`` negated by MUL -1; shifts beyond the portable +-16 split in
pieces; a constant outside the 16-bit immediate split into several ADDs, a multiplier
factored into in-range MULs and a left shift (``a * 100000`` = MUL 3125, SHL 5), a min/max
bound brought in range by an offset that provably does not wrap; else refused naming it).  Wrapping is
exact: an interval analysis tracks every value, and a node of a narrower dtype than the
accumulator is wrapped (a shift-left/shift-right pair) only when it may overflow and
something above it needs more than its low bits (min, max, a right shift; not a STORE, a
cast or a ring op), so the kernel is bit-exact with :func:`compiler.te.evaluate` for every
input; a value that could exceed a narrower accumulator (16-bit configurations) where the
expression does not wrap is refused.  An int8 result leaves through the STORE's narrowing;
an accumulator-width result leaves as byte planes (store, SHR 8, store, ...).

The sum of two int8 inputs read element-wise runs on the GEMM core by default
(:class:`EltwiseKnobs` ``gemm_add``): both are LOADed into the INP SRAM by the load module,
under the previous chunk's compute, and multiplied by an identity weight tile into the reset
accumulator (3 GEMM cycles per tile instead of LOAD ACC_8BIT's bus beats plus a vector ALU
ADD on the compute module).

The tile space is cut into chunks (boxes of ``rows x cols`` tiles) that fill the ACC SRAM,
one register file of ``slots`` chunk-sized regions per virtual thread (Sethi-Ullman
allocation), and the op program gets its dependency tokens from
:func:`compiler.vta.program.insert_dependencies`: with two virtual threads the STOREs of one
chunk (and the INP loads of the next) run under the compute of another.  (LOAD ACC runs on
VTA's compute module, so those loads and the ALU ops are serial by construction.)

Example (runnable as it stands)::

    import numpy as np
    from isa import VTAConfig
    from vta_runtime import SimDevice
    from compiler import build, evaluate, ops, placeholder

    cfg = VTAConfig()
    a = placeholder((1, 4, 8, 8, 1, 16), "int8", "a")
    b = placeholder((1, 4, 8, 8, 1, 16), "int8", "b")
    out = ops.residual_add(a, b, 5, 4, 3, -128, 127)     # clip(((a + b) * 5 + 4) >> 3)
    rng = np.random.default_rng(0)
    feeds = {a: rng.integers(-128, 128, a.shape, dtype=np.int8),
             b: rng.integers(-128, 128, b.shape, dtype=np.int8)}
    k = build(out, cfg)                                  # an EltwiseKernel
    got, stats = k.run(SimDevice(cfg, timed=True), feeds)
    assert np.array_equal(got, evaluate(out, feeds))
    print(k.show("lower"))                               # the per-chunk ALU program

The steps, one module each: :mod:`compiler.vta.eltwise_tree` (is the graph ALU-only; the tree of
reads, constants and operations), :mod:`compiler.vta.alu_program` (the exact ALU step sequence,
interval analysis), and this module (the workload: tiles, operand layouts, chunks; the
unrolled load/ALU/store ops; the kernel).

Raises
------
EltwiseError
    (a :class:`~compiler.vta.intrin.TensorizeError`) naming the stage and the expression that
    has no exact ALU form, and why.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field

import numpy as np

from isa import AluOp, MemType, VTAConfig

from .alu_program import AluProgram, Step, _Lowerer  # noqa: F401 (part of this API)
from .eltwise_tree import (EltwiseError, EltwiseKnobs, Leaf, _Builder,  # noqa: F401 (API)
                           _Kernel, _Nest, is_alu_only, is_gemm_graph, store_planes)
from .kernel import WorkloadKernel, finish_ops
from ..te import DTYPES, Tensor


# ----------------------------------------------------------------------------- workload

@dataclass(eq=False)
class EltwiseWorkload:
    """A recognised ALU-only graph: its expression tree, leaves and tile-space view.

    ``outer`` x ``rows`` x ``cols`` is the output tile space (``rows``/``cols`` its last two
    leading dimensions, or everything flattened into ``cols`` when no input is broadcast)."""
    out: Tensor
    tree: object
    leaves: list
    outer: tuple
    rows: int
    cols: int
    leaf_view: dict           # leaf -> (outer strides, row stride, col stride, pattern)
    program: AluProgram
    planes: int               # 1: int8 output; else byte planes of an accumulator result
    kind: str = "eltwise"
    epilogue: tuple = ()
    identity: Tensor | None = None     # the identity weight tile of GEMM-core adds
    constants: dict = field(default_factory=dict)     # tensor -> array the kernel feeds

    @property
    def inputs(self) -> list:
        return list(dict.fromkeys(lf.tensor for lf in self.leaves))

    @property
    def tiles(self) -> int:
        return int(np.prod(self.outer, dtype=np.int64)) * self.rows * self.cols

    def describe(self) -> str:
        ins = ", ".join(f"{t.name}{t.shape} {t.dtype}" for t in self.inputs)
        return (f"eltwise {self.out.name}: {ins} -> {self.out.shape} {self.out.dtype}; "
                f"{len(self.program.steps)} steps on {self.program.slots} slots; tiles "
                f"{self.outer}x{self.rows}x{self.cols}"
                + (f"; {self.planes} byte planes" if self.planes > 1 else ""))

    def dram_minimum(self) -> int:
        """Bytes the kernel must move: every input byte once, every output byte once."""
        n = sum(int(np.prod(t.shape)) * DTYPES[t.dtype] // 8 for t in self.inputs)
        return n + int(np.prod(self.out.shape)) * DTYPES[self.out.dtype] // 8


def recognise_eltwise(out: Tensor, cfg: VTAConfig, gemm_add: bool = False,
                      stop: Tensor | None = None) -> EltwiseWorkload:
    """Match ``out`` as an ALU-only graph (see the module docstring); ``gemm_add``: sums of
    two int8 inputs on the GEMM core (:class:`EltwiseKnobs`); ``stop``: a stage read as an
    input (the pooling under an epilogue), which also keeps the tile space unflattened."""
    if not isinstance(out, Tensor):
        raise EltwiseError(f"expected a Tensor, not {type(out).__name__}")
    b = _Builder(out, cfg, stop)
    tree = b.tree()
    if isinstance(tree, int):
        raise EltwiseError(f"stage {out.name}: the result is the constant {tree}; there is no "
                           f"input to compute from")
    planes = store_planes(out.dtype, cfg, EltwiseError, out.name)
    lead = out.shape[:-2]
    full = stop is None and all(all(lf.strides) and _is_dense(lf, lead) for lf in b.leaves)
    if full or len(lead) < 2:
        outer, rows, cols = (), 1, int(np.prod(lead))
        flat = full
    else:
        outer, rows, cols = tuple(lead[:-2]), lead[-2], lead[-1]
        flat = False
    view, patterns = {}, {}
    for lf in b.leaves:
        if flat:
            view[lf] = ((), 0, 1)
            patterns[lf] = (False, True)
        elif len(lead) < 2:
            view[lf] = ((), 0, lf.strides[0])
            patterns[lf] = (False, lf.strides[0] != 0)
        else:
            view[lf] = (tuple(lf.strides[:-2]), lf.strides[-2], lf.strides[-1])
            patterns[lf] = (lf.strides[-2] != 0, lf.strides[-1] != 0)
    lw = _Lowerer(cfg, patterns, gemm_add, [lf for lf in b.leaves if _is_dense(lf, lead)])
    root = tree
    # the STORE keeps the low OUT_WIDTH bits (byte planes: all accumulator bits)
    lw.gen(root, 0, cfg.out_width if planes == 1 else cfg.acc_width)
    pat_root = lw.pattern(root)
    if (rows > 1 and not pat_root[0]) or (cols > 1 and not pat_root[1]):
        axis = out.axes[len(lead) - (2 if rows > 1 and not pat_root[0] else 1)].name
        raise EltwiseError(f"stage {out.name}: the result does not vary along output axis "
                           f"{axis} (every input is broadcast along it); broadcast results are "
                           f"not element-wise")
    if lw.steps[-1].kind == "load":
        # LOAD ACC does not write the OUT buffer the STORE reads: a copy is SHR by 0
        lw.imm(AluOp.SHR, 0, pat_root, 0)
    prog = AluProgram(lw.steps, lw.slots, lw.pats)
    wl = EltwiseWorkload(out, tree, b.leaves, outer, rows, cols,
                         {lf: view[lf] + (patterns[lf],) for lf in b.leaves}, prog, planes)
    if any(st.kind == "gemm_add" for st in prog.steps):
        wl.identity = Tensor("vta_identity", (1, 1, cfg.block_out, cfg.block_in), "int8")
        wl.constants = {wl.identity: np.eye(cfg.block_out, dtype=np.int8).reshape(
            wl.identity.shape)}
    return wl


def _is_dense(lf: Leaf, lead) -> bool:
    pitch = [int(np.prod(lead[d + 1:], dtype=np.int64)) for d in range(len(lead))]
    return list(lf.strides) == pitch


# ----------------------------------------------------------------------------- unrolled ops

def _chunks(wl: EltwiseWorkload, nr: int, nc: int):
    for o in itertools.product(*[range(n) for n in wl.outer]):
        for r0 in range(0, wl.rows, nr):
            for c0 in range(0, wl.cols, nc):
                yield o, r0, c0, min(nr, wl.rows - r0), min(nc, wl.cols - c0)


def chunk_shape(wl: EltwiseWorkload, cfg: VTAConfig, knobs: EltwiseKnobs) -> tuple[int, int, int]:
    """(tiles per slot, rows, cols) of a chunk for ``knobs`` on ``cfg``."""
    regions = knobs.vthreads * wl.program.slots
    cap = cfg.acc_buff_depth // regions
    g = sum(st.kind == "gemm_add" for st in wl.program.steps)
    if g:                              # two INP regions per fused add and virtual thread
        cap_inp = cfg.inp_buff_depth // (2 * g * knobs.vthreads)
        if cap_inp < 1 <= cap:
            raise EltwiseError(f"{wl.out.name}: {2 * g * knobs.vthreads} INP regions ({g} "
                               f"GEMM-core add(s) x 2 inputs x {knobs.vthreads} virtual "
                               f"threads) do not fit the {cfg.inp_buff_depth}-tile INP buffer")
        cap = min(cap, cap_inp)
    fmax = (1 << cfg.alu_layout["dst_factor_out"][1]) - 1
    imax = (1 << cfg.alu_layout["iter_in"][1]) - 1
    xmax = (1 << cfg.mem_layout["x_size"][1]) - 1
    if knobs.max_tiles:
        cap = min(cap, knobs.max_tiles)
    if cap < 1:
        raise EltwiseError(f"{wl.out.name}: {regions} regions ({wl.program.slots} slot(s) x "
                           f"{knobs.vthreads} virtual threads) do not fit the "
                           f"{cfg.acc_buff_depth}-tile ACC buffer")
    cols = wl.cols
    if cols <= min(cap, fmax, imax, xmax):
        nc = cols
        nr = max(1, min(wl.rows, cap // cols, imax))
    else:
        nc, nr = min(cap, imax, xmax), 1
    return cap, nr, nc


def _box(pat, r, c):
    """The (rows, cols) a value of pattern ``pat`` occupies in an ``r x c`` chunk."""
    return (r if pat[0] else 1), (c if pat[1] else 1)


def _factors(pat, r, c):
    """Its (row, col) tile pitch in its slot (0 along a broadcast axis)."""
    cc = _box(pat, r, c)[1]
    return (cc if pat[0] else 0), (1 if pat[1] else 0)


def alu_op(step: Step, pats, base_d: int, base_s, r: int, c: int, sites: dict):
    """The ALU instruction of ``step`` over an ``r x c`` chunk (one micro-op, the chunk's
    rows/cols as its hardware loops)."""
    from .program import Op
    dpat, spat = pats
    dr, dc = _factors(dpat, r, c)
    sr, sc = (dr, dc) if step.src is None else _factors(spat, r, c)
    loops = []
    if r > 1 and dpat[0]:
        loops.append((r, dr, sr, 0))
    if c > 1 and dpat[1]:
        loops.append((c, dc, sc, 0))
    nest = _Nest(step.opcode, step.src is None, step.imm)
    key = (int(step.opcode), step.src is None, step.imm, tuple(loops))
    site = sites.setdefault(key, len(sites))
    k = _Kernel(nest, tuple(loops), ((0, 0, 0),))
    src = base_s if step.src is not None else base_d
    rr, cc = _box(dpat, r, c)
    writes = (("acc", base_d, base_d + rr * cc),)
    reads = [writes[0]]
    if step.src is not None:
        sr_, sc_ = _box(spat, r, c)
        reads.append(("acc", src, src + sr_ * sc_))
    return Op(2, "alu", dict(kernel=k, base=(base_d, src, 0), site=site, uop_key=k),
              tuple(reads), writes)


def leaf_load(wl: EltwiseWorkload, lf: Leaf, sram: int, o, r0: int, c0: int, r: int, c: int):
    """The LOAD ACC / ACC_8BIT of leaf ``lf``'s part of a chunk into ``sram``."""
    from .program import Op
    ostr, rs, cs, pat = wl.leaf_view[lf]
    off = sum(a * b for a, b in zip(o, ostr)) + (r0 * rs) + (c0 * cs)
    y, x = _box(pat, r, c)
    mem = MemType.ACC_8BIT if lf.tensor.dtype == "int8" else MemType.ACC
    return Op(2, "load", dict(mem=mem, sram=sram, tensor=lf.tensor, offset=off, y=y, x=x,
                              stride=rs if y > 1 else x, pad=(0, 0, 0, 0)),
              writes=(("acc", sram, sram + y * x),))


def lower_ops(wl: EltwiseWorkload, cfg: VTAConfig, knobs: EltwiseKnobs, planes_tensor=None):
    """The flat op program (``compiler.vta.program.Op`` s) of every chunk, in order."""
    from .program import Op
    cap, nr, nc = chunk_shape(wl, cfg, knobs)
    prog = wl.program
    sites: dict = {}
    ops: list = []
    outer_pitch = [int(np.prod(wl.outer[d + 1:], dtype=np.int64)) * wl.rows * wl.cols
                   for d in range(len(wl.outer))]

    def gemm(dst, inp, r, c, reset):
        loops = tuple(lp for lp in ((r, c, 0 if reset else c, 0), (c, 1, 0 if reset else 1, 0))
                      if lp[0] > 1)
        nest = _Nest(None, False, 0, reset=reset, mode="gemm")
        site = sites.setdefault(("gemm", reset, loops), len(sites))
        k = _Kernel(nest, loops, ((0, 0, 0),))
        acc = ("acc", dst, dst + r * c)
        reads = () if reset else (("inp", inp, inp + r * c), ("wgt", 0, 1), acc)
        return Op(2, "gemm", dict(kernel=k, base=(dst, 0 if reset else inp, 0), site=site,
                                  uop_key=k), reads, (acc,))

    n_gemm = sum(st.kind == "gemm_add" for st in prog.steps)
    if n_gemm:
        ops.append(Op(1, "load", dict(mem=MemType.WGT, sram=0, tensor=wl.identity, offset=0,
                                      y=1, x=1, stride=1, pad=(0, 0, 0, 0)),
                      writes=(("wgt", 0, 1),)))
    for i, (o, r0, c0, r, c) in enumerate(_chunks(wl, nr, nc)):
        region = (i % knobs.vthreads) * prog.slots * cap
        slot = lambda s: region + s * cap          # noqa: E731
        inp0 = (i % knobs.vthreads) * 2 * n_gemm * cap
        g = 0
        for step, pats in zip(prog.steps, prog.step_patterns):
            if step.kind == "gemm_add":             # acc = 0 + a x I + b x I
                ops.append(gemm(slot(step.dst), 0, r, c, True))
                for lf in (step.leaf, step.leaf2):
                    at = inp0 + g * cap
                    g += 1
                    ld = leaf_load(wl, lf, at, o, r0, c0, r, c)
                    ld.stage, ld.args["mem"] = 1, MemType.INP
                    ld.writes = (("inp",) + ld.writes[0][1:],)
                    ops.append(ld)
                    ops.append(gemm(slot(step.dst), at, r, c, False))
            elif step.kind == "load":
                ops.append(leaf_load(wl, step.leaf, slot(step.dst), o, r0, c0, r, c))
            else:
                ops.append(alu_op(step, pats, slot(step.dst),
                                  slot(step.src) if step.src is not None else None, r, c,
                                  sites))
        off = sum(a * b for a, b in zip(o, outer_pitch)) + r0 * wl.cols + c0
        target = planes_tensor if planes_tensor is not None else wl.out
        ops += store_ops(wl, cfg, slot(0), target, off, r, c, wl.cols, sites)
    return ops


def store_ops(wl, cfg: VTAConfig, sram: int, target: Tensor, off: int, r: int, c: int,
              pitch: int, sites: dict) -> list:
    """STOREs of the ``r x c`` result at ``sram`` (its byte planes, SHR 8 between them)."""
    from .program import Op
    ops = []
    tiles = int(np.prod(wl.out.shape[:-2], dtype=np.int64))
    for p in range(wl.planes):
        ops.append(Op(3, "store", dict(mem=MemType.OUT, sram=sram, tensor=target,
                                       offset=off + p * tiles, y=r, x=c, stride=pitch if r > 1 else c,
                                       pad=(0, 0, 0, 0)),
                      reads=(("acc", sram, sram + r * c),)))
        if p + 1 < wl.planes:
            st = Step("alu", 0, opcode=AluOp.SHR, imm=cfg.out_width)
            ops.append(alu_op(st, ((True, True), None), sram, None, r, c, sites))
    return ops


# ----------------------------------------------------------------------------- kernel

class EltwiseKernel(WorkloadKernel):
    """A compiled ALU-only (or pooling) kernel with the interface of
    :class:`~compiler.vta.pipeline.CompiledKernel`: ``run(device, feeds)``, ``show(stage)``,
    ``listing()``, ``instructions()``, ``stages``, ``ops``, ``inputs``, ``output``."""

    error = EltwiseError


def build_eltwise(out, cfg: VTAConfig | None = None, knobs: EltwiseKnobs | None = None):
    """Compile the element-wise graph ending in ``out`` into an :class:`EltwiseKernel`."""
    t0 = time.perf_counter()
    cfg = cfg or VTAConfig()
    if not isinstance(out, EltwiseWorkload):
        from .resize import build_resize, find_resize     # nearest upsampling: strided copies
        from .interleave import build_interleave, find_interleave   # ConvTranspose phases
        rw = find_resize(out)
        if rw is not None:
            return build_resize(rw, cfg, knobs)
        iw = find_interleave(out)
        if iw is not None:
            return build_interleave(iw, cfg, knobs)
    knobs = EltwiseKnobs.of(knobs)
    wl = out if isinstance(out, EltwiseWorkload) else recognise_eltwise(out, cfg,
                                                                        knobs.gemm_add)
    planes = None
    if wl.planes > 1:
        planes = Tensor(f"{wl.out.name}_planes", (wl.planes,) + wl.out.shape, cfg.out_dtype)
    cap, nr, nc = chunk_shape(wl, cfg, knobs)
    stages = {"recognise": wl.describe(),
              "lower": (f"chunks of {nr}x{nc} tiles, {knobs.vthreads} virtual thread(s), "
                        f"{wl.program.slots} slot(s) of {cap} tiles each:\n"
                        + wl.program.text())}
    ops = lower_ops(wl, cfg, knobs, planes)
    return finish_kernel(cfg, wl, knobs, stages, ops, t0,
                         planes if planes is not None else wl.out)


def finish_kernel(cfg: VTAConfig, wl, knobs, stages: dict, ops: list, t0: float,
                  out_tensor) -> EltwiseKernel:
    """The op program's last passes (drop redundant loads, insert dependency tokens, check
    the instruction fields), each noted in ``stages``, and the kernel that runs it."""
    ops = finish_ops(ops, cfg, stages)
    return EltwiseKernel(cfg, wl, knobs, stages, ops, time.perf_counter() - t0,
                         out_tensor=out_tensor)
