"""The reference VTA test programs, expressed through the runtime API (spec §6.2-§6.3).

Each function allocates its buffers on ``device``, issues the runtime calls a compiled kernel
(or the C test library) would, synchronises, and returns a :class:`ProgramResult` with the
output array (host copy) and the command queue (for token balances and streams).  They compute
nothing on the host: tests compare the outputs with their own numpy references.

* :func:`save_load_out`, :func:`padded_load`, :func:`gemm` (1 or 2 virtual threads),
  :func:`alu` (immediate or vector), :func:`relu`, :func:`shift_and_scale`: the
  ``test_vta_insn.py`` programs, with the call order TVM v0.14.0 emits;
* :func:`alu_test`, :func:`blocked_gemm_test`, :func:`gemm_test`: the C-level
  ``test_lib.cc`` programs, with their dependency structure expressed as dep_push/dep_pop.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from isa import AluOp, MemType

from .command_queue import CommandQueue
from .kernel import KernelHandle

__all__ = ["ProgramResult", "save_load_out", "padded_load", "gemm", "alu", "relu",
           "shift_and_scale", "alu_test", "blocked_gemm_test", "gemm_test", "runtime_array"]

ACC, INP, WGT, OUT = int(MemType.ACC), int(MemType.INP), int(MemType.WGT), int(MemType.OUT)


@dataclass
class ProgramResult:
    output: np.ndarray
    queue: CommandQueue


def _buf(dev, arr, name):
    arr = np.ascontiguousarray(arr)
    b = dev.alloc(max(arr.nbytes, 1), name=name)
    b.copy_from(arr)
    return b


def _out(dev, shape, dtype, name):
    return dev.alloc(int(np.prod(shape)) * np.dtype(dtype).itemsize, name=name)


def _alu_kernel(loops, uops, op, use_imm=1, imm=0):
    def finit(cq, sig):
        for lp in loops:
            cq.uop_loop_begin(*lp)
        for d, s in uops:
            cq.uop_push(1, 0, d, s, 0, int(op), use_imm, imm)
        for _ in loops:
            cq.uop_loop_end()
        return 0
    return finit


def _gemm_kernel(loops, uops, reset=0):
    def finit(cq, sig):
        for lp in loops:
            cq.uop_loop_begin(*lp)
        for d, s, w in uops:
            cq.uop_push(0, reset, d, s, w)
        for _ in loops:
            cq.uop_loop_end()
        return 0
    return finit


def _queue(device, cq):
    return cq if cq is not None else CommandQueue(device)


def runtime_array(device, x: np.ndarray) -> np.ndarray:
    """``test_runtime_array``: host -> device -> host round trip."""
    b = _buf(device, x, "x")
    try:
        return b.copy_to(x.dtype, x.shape)
    finally:
        device.free(b)


def save_load_out(device, x: np.ndarray, cq=None) -> ProgramResult:
    """``test_save_load_out``: LOAD ACC, ALU SHR #0, STORE as int8 (x: (..., BATCH, BLOCK_OUT))."""
    cq = _queue(device, cq)
    n = x.size // (x.shape[-1] * x.shape[-2])
    bx, by = _buf(device, x.astype(np.int32), "x"), _out(device, x.shape, np.int8, "y")
    cq.load_buffer_2d(bx, 0, n, 1, n, 0, 0, 0, 0, 0, ACC)
    cq.push_alu_op(KernelHandle("shr0"), _alu_kernel([(n, 1, 1)], [(0, 0)], AluOp.SHR, 1, 0))
    cq.dep_push(2, 3)
    cq.dep_pop(2, 3)
    cq.store_buffer_2d(0, OUT, by, 0, n, 1, n)
    cq.synchronize()
    return ProgramResult(by.copy_to(np.int8, x.shape), cq)


def padded_load(device, x: np.ndarray, pad_before=(0, 0), pad_after=(0, 0),
                cq=None) -> ProgramResult:
    """``test_padded_load``: x int32 (H, W, BATCH, BLOCK_OUT) loaded with (H, W) zero padding."""
    cq = _queue(device, cq)
    h, w = x.shape[:2]
    (ph0, pw0), (ph1, pw1) = pad_before, pad_after
    oh, ow = h + ph0 + ph1, w + pw0 + pw1
    shape = (oh, ow) + x.shape[2:]
    bx, by = _buf(device, x.astype(np.int32), "x"), _out(device, shape, np.int8, "y")
    cq.load_buffer_2d(bx, 0, w, h, w, pw0, ph0, pw1, ph1, 0, ACC)
    n = oh * ow
    cq.push_alu_op(KernelHandle("shr0"), _alu_kernel([(n, 1, 1)], [(0, 0)], AluOp.SHR, 1, 0))
    cq.dep_push(2, 3)
    cq.dep_pop(2, 3)
    cq.store_buffer_2d(0, OUT, by, 0, n, 1, n)
    cq.synchronize()
    return ProgramResult(by.copy_to(np.int8, shape), cq)


def gemm(device, x: np.ndarray, w: np.ndarray, virtual_threads: int = 1,
         cq=None) -> ProgramResult:
    """``test_gemm``: y = clip((x . w^T) >> 8, 0, 127) as int8.

    x: (O, N, BATCH, BLOCK_IN) int8, w: (M, N, BLOCK_OUT, BLOCK_IN) int8, y: (O, M, BATCH,
    BLOCK_OUT).  ``virtual_threads`` = 2 splits O over two threads with separate SRAM halves
    (the "smt" schedule), each call site pushed once per thread with signature = thread id.
    """
    cq = _queue(device, cq)
    o, n = x.shape[:2]
    m = w.shape[0]
    vt = virtual_threads
    if o % vt:
        raise ValueError(f"batch tiles {o} not divisible by {vt} virtual threads")
    rows = o // vt
    bx, bw = _buf(device, x, "x"), _buf(device, w, "w")
    shape = (o, m) + (x.shape[2], w.shape[2])
    by = _out(device, shape, np.int8, "y")
    reset, update = KernelHandle("gemm_reset"), KernelHandle("gemm_update")
    shr, mx, mn = KernelHandle("shr"), KernelHandle("max"), KernelHandle("min")
    sig = (lambda t: t) if vt > 1 else (lambda t: None)
    for t in range(vt):
        cq.push_gemm_op(reset, _gemm_kernel([(rows, m, 0, 0), (m, 1, 0, 0)],
                                            [(t * rows * m, 0, 0)], reset=1), sig(t))
        cq.dep_push(2, 1)
    for k in range(n):
        for t in range(vt):
            cq.dep_pop(2, 1)
            if n > 1:      # column k of the (rows, n) tile matrix: y = rows, x = 1
                cq.load_buffer_2d(bx, t * rows * n + k, 1, rows, n, 0, 0, 0, 0, t * rows, INP)
                cq.load_buffer_2d(bw, k, 1, m, n, 0, 0, 0, 0, t * m, WGT)
            else:          # contiguous: one row of tiles, as the compiler folds it
                cq.load_buffer_2d(bx, t * rows, rows, 1, rows, 0, 0, 0, 0, t * rows, INP)
                cq.load_buffer_2d(bw, 0, m, 1, m, 0, 0, 0, 0, t * m, WGT)
            cq.dep_push(1, 2)
        for t in range(vt):
            cq.dep_pop(1, 2)
            cq.push_gemm_op(update, _gemm_kernel([(rows, m, 1, 0), (m, 1, 0, 1)],
                                                 [(t * rows * m, t * rows, t * m)]), sig(t))
            if k < n - 1:
                cq.dep_push(2, 1)
            else:
                for handle, op, imm in ((shr, AluOp.SHR, 8), (mx, AluOp.MAX, 0),
                                        (mn, AluOp.MIN, 127)):
                    d = t * rows * m
                    cq.push_alu_op(handle, _alu_kernel([(rows * m, 1, 1)], [(d, d)], op, 1, imm),
                                   sig(t))
                cq.dep_push(2, 3)
    for t in range(vt):
        cq.dep_pop(2, 3)
        cq.store_buffer_2d(t * rows * m, OUT, by, t * rows * m, rows * m, 1, rows * m)
    cq.synchronize()
    return ProgramResult(by.copy_to(np.int8, shape), cq)


def alu(device, op, a: np.ndarray, b: np.ndarray | None = None, imm: int | None = None,
        cq=None) -> ProgramResult:
    """``test_alu``: one ALU op over all tiles of ``a`` (int32 (..., BATCH, BLOCK_OUT)).

    With ``imm`` the op is immediate and in place; otherwise ``b`` is loaded after ``a`` and
    the vector op reads it as src.  SHL is ``op=SHR`` with a negative ``imm``.
    """
    cq = _queue(device, cq)
    n = a.size // (a.shape[-1] * a.shape[-2])
    ba = _buf(device, a.astype(np.int32), "a")
    res = _out(device, a.shape, np.int8, "res")
    cq.load_buffer_2d(ba, 0, n, 1, n, 0, 0, 0, 0, 0, ACC)
    if imm is None:
        bb = _buf(device, b.astype(np.int32), "b")
        cq.load_buffer_2d(bb, 0, n, 1, n, 0, 0, 0, 0, n, ACC)
        kern = _alu_kernel([(n, 1, 1)], [(0, n)], op, 0, 0)
    else:
        kern = _alu_kernel([(n, 1, 1)], [(0, 0)], op, 1, imm)
    cq.push_alu_op(KernelHandle("alu"), kern)
    cq.dep_push(2, 3)
    cq.dep_pop(2, 3)
    cq.store_buffer_2d(0, OUT, res, 0, n, 1, n)
    cq.synchronize()
    return ProgramResult(res.copy_to(np.int8, a.shape), cq)


def _two_alu(device, a, ops, cq):
    cq = _queue(device, cq)
    n = a.size // (a.shape[-1] * a.shape[-2])
    ba = _buf(device, a.astype(np.int32), "a")
    res = _out(device, a.shape, np.int8, "res")
    cq.load_buffer_2d(ba, 0, n, 1, n, 0, 0, 0, 0, 0, ACC)
    for k, (op, imm) in enumerate(ops):
        cq.push_alu_op(KernelHandle(f"alu{k}"), _alu_kernel([(n, 1, 1)], [(0, 0)], op, 1, imm))
    cq.dep_push(2, 3)
    cq.dep_pop(2, 3)
    cq.store_buffer_2d(0, OUT, res, 0, n, 1, n)
    cq.synchronize()
    return ProgramResult(res.copy_to(np.int8, a.shape), cq)


def relu(device, a: np.ndarray, cq=None) -> ProgramResult:
    """``test_relu``: MAX #0 then MIN #127."""
    return _two_alu(device, a, ((AluOp.MAX, 0), (AluOp.MIN, 127)), cq)


def shift_and_scale(device, a: np.ndarray, shift: int, scale: int, cq=None) -> ProgramResult:
    """``test_shift_and_scale``: ADD #shift then SHR #scale."""
    return _two_alu(device, a, ((AluOp.ADD, shift), (AluOp.SHR, scale)), cq)


# ------------------------------------------------------------------ C-level tests (§6.3)
def alu_test(device, op, use_imm: bool, a: np.ndarray, imm: int = 0, compressed: bool = False,
             cq=None) -> ProgramResult:
    """``alu_test``: per batch row, LOAD ACC of the row, one ALU op, STORE (spec §6.3).

    ``a``: int32 (batch, sets * tx, BATCH, BLOCK_OUT) with sets = 1 (imm) or 2 (vector: the
    second half of each row is the src operand).  Immediate ops run in place (src = dst, the
    portable form of spec §3.7).  Output: int8 (batch, tx, BATCH, BLOCK_OUT).
    """
    cq = _queue(device, cq)
    batch, width = a.shape[:2]
    sets = 1 if use_imm else 2
    tx = width // sets
    ba = _buf(device, a.astype(np.int32), "a")
    shape = (batch, tx) + a.shape[2:]
    res = _out(device, shape, np.int8, "res")
    src0 = 0 if use_imm else tx
    if compressed:
        kern = _alu_kernel([(tx, 1, 1)], [(0, src0)], op, int(use_imm), imm)
    else:
        kern = _alu_kernel([], [(i, src0 + i) for i in range(tx)], op, int(use_imm), imm)
    handle = KernelHandle("alu_test")
    for b in range(batch):
        if b > 0:
            cq.dep_pop(3, 2)
        cq.load_buffer_2d(ba, b * tx * sets, tx * sets, 1, tx * sets, 0, 0, 0, 0, 0, ACC)
        cq.push_alu_op(handle, kern)
        cq.dep_push(2, 3)
        cq.dep_pop(2, 3)
        cq.store_buffer_2d(0, OUT, res, b * tx, tx, 1, tx)
        cq.dep_push(3, 2)
    cq.dep_pop(3, 2)
    cq.synchronize()
    return ProgramResult(res.copy_to(np.int8, shape), cq)


def _blocked_uops(rows, in_t, out_t, compressed, t):
    src_off, wgt_off = t * rows * in_t, t * out_t * in_t
    if compressed:
        loops = [(in_t, 0, 1, 1), (out_t, 1, 0, in_t)]
        uops = [(b * out_t, src_off + b * in_t, wgt_off) for b in range(rows)]
    else:
        loops = []
        uops = [(b * out_t + k, src_off + b * in_t + j, wgt_off + k * in_t + j)
                for b in range(rows) for j in range(in_t) for k in range(out_t)]
    return loops, uops


def blocked_gemm_test(device, inp: np.ndarray, wgt: np.ndarray, bias: np.ndarray, block: int,
                      compressed: bool = False, virtual_threads: int = 1,
                      cq=None) -> ProgramResult:
    """``blocked_gemm_test``: out = int8(inp . wgt^T + bias), in blocks (spec §6.3).

    inp: (B/BATCH, C/BLOCK_IN, BATCH, BLOCK_IN) int8, wgt: (C/BLOCK_OUT, C/BLOCK_IN, BLOCK_OUT,
    BLOCK_IN) int8, bias: (B/BATCH, C/BLOCK_OUT, BATCH, BLOCK_OUT) int32.  Each (row, column)
    block loads its bias into ACC, accumulates GEMMs over the reduction blocks with the INP/WGT
    loads double-buffered across ``virtual_threads`` (1 or 2) SRAM halves, and stores.
    """
    cq = _queue(device, cq)
    cfg = device.config
    nb_rows, in_tiles = inp.shape[:2]
    out_tiles = wgt.shape[0]
    rows = block // cfg.batch
    in_t, out_t = block // cfg.block_in, block // cfg.block_out
    vt = virtual_threads
    bi, bw, bb = _buf(device, inp, "inp"), _buf(device, wgt, "wgt"), \
        _buf(device, bias.astype(np.int32), "bias")
    shape = (nb_rows, out_tiles) + bias.shape[2:]
    bo = _out(device, shape, np.int8, "out")
    handle = KernelHandle("blocked_gemm")
    kernels = [_gemm_kernel(*_blocked_uops(rows, in_t, out_t, compressed, t)) for t in range(vt)]
    step = 0
    first = True
    for i in range(nb_rows // rows):
        for j in range(out_tiles // out_t):
            if not first:
                cq.dep_pop(3, 2)
            first = False
            cq.load_buffer_2d(bb, i * rows * out_tiles + j * out_t, out_t, rows, out_tiles,
                              0, 0, 0, 0, 0, ACC)
            for k in range(in_tiles // in_t):
                t = step % vt
                if step >= vt:
                    cq.dep_pop(2, 1)
                cq.load_buffer_2d(bw, j * out_t * in_tiles + k * in_t, in_t, out_t, in_tiles,
                                  0, 0, 0, 0, t * out_t * in_t, WGT)
                cq.load_buffer_2d(bi, i * rows * in_tiles + k * in_t, in_t, rows, in_tiles,
                                  0, 0, 0, 0, t * rows * in_t, INP)
                cq.dep_push(1, 2)
                cq.dep_pop(1, 2)
                cq.push_gemm_op(handle, kernels[t], t if vt > 1 else None)
                cq.dep_push(2, 1)
                step += 1
            cq.dep_push(2, 3)
            cq.dep_pop(2, 3)
            cq.store_buffer_2d(0, OUT, bo, i * rows * out_tiles + j * out_t, out_t, rows,
                               out_tiles)
            cq.dep_push(3, 2)
    for _ in range(min(vt, step)):
        cq.dep_pop(2, 1)
    cq.dep_pop(3, 2)
    cq.synchronize()
    return ProgramResult(bo.copy_to(np.int8, shape), cq)


def gemm_test(device, inp: np.ndarray, wgt: np.ndarray, bias: np.ndarray,
              compressed: bool = False, cq=None) -> ProgramResult:
    """``gemm_test``: one unblocked out = int8(inp . wgt^T + bias), the 7-instruction program.

    Shapes as in :func:`blocked_gemm_test`; everything fits the SRAMs at once.
    """
    cq = _queue(device, cq)
    rows, in_t = inp.shape[:2]
    out_t = wgt.shape[0]
    bi, bw, bb = _buf(device, inp, "inp"), _buf(device, wgt, "wgt"), \
        _buf(device, bias.astype(np.int32), "bias")
    shape = (rows, out_t) + bias.shape[2:]
    bo = _out(device, shape, np.int8, "out")
    cq.load_buffer_2d(bb, 0, rows * out_t, 1, rows * out_t, 0, 0, 0, 0, 0, ACC)
    cq.dep_push(2, 1)
    cq.dep_pop(2, 1)
    cq.load_buffer_2d(bw, 0, out_t * in_t, 1, out_t * in_t, 0, 0, 0, 0, 0, WGT)
    cq.load_buffer_2d(bi, 0, rows * in_t, 1, rows * in_t, 0, 0, 0, 0, 0, INP)
    cq.dep_push(1, 2)
    cq.dep_pop(1, 2)
    cq.push_gemm_op(KernelHandle("gemm"), _gemm_kernel(*_blocked_uops(rows, in_t, out_t,
                                                                      compressed, 0)))
    cq.dep_push(2, 3)
    cq.dep_pop(2, 3)
    cq.store_buffer_2d(0, OUT, bo, 0, rows * out_t, 1, rows * out_t)
    cq.synchronize()
    return ProgramResult(bo.copy_to(np.int8, shape), cq)
