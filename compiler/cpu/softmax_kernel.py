"""A hand-written LLVM kernel for the float32 softmax over the last axis: three passes per
row instead of the tensor-expression composition's five stages, with ``exp(x - max)``
stored and summed in ONE pass (a stage with two outputs, which a TE stage cannot be).

Rows go in blocks of :func:`block_rows` (8, fewer for rows over 2048): each pass over
every row of the block before the next pass (a block's 8 rows of 197 stay in L1).  Per
row of ``C`` elements, in vectors of ``V`` lanes (the target's SIMD width,
:func:`compiler.cpu.jit.vector_shape`: 16 on AVX-512, 8 on AVX2, 4 on SSE/NEON; the
largest power of two not above ``C`` for shorter rows):

1. the row maximum as ``acc > x ? acc : x`` (x86 ``maxps``, 4 accumulators; either zero
   for (-0, +0): the result is the same for both) and a NaN flag (an OR of ``x != x or
   y != y`` over pairs of vectors, in 32-bit lanes): 2 instructions per vector; the
   partial last vector is the full vector ending at the
   row's end (a maximum does not mind the overlap).  A NaN, or an infinite maximum (a
   ``+inf`` in the row, or only ``-inf``: ``x - max`` is NaN somewhere) makes the row
   all NaN, the quiet NaN ``0x7fc00000`` (:data:`NAN_BITS`), as ``softmax_f32`` writes it;
2. (a function of its own, called once per block: its loop keeps its accumulators in
   registers and its constants are set up once per block)
   ``e = exp(x - max)`` (:func:`compiler.cpu.mathfns.emit_exp_nonpositive` without its
   clamp at 0, which no value of a finite row needs: the bits of the TE kernel's exp)
   stored in the output and, in the same loop, added exactly: ``e`` is split as ``hi +
   lo`` (:func:`split_bits`: ``hi`` a multiple of ``2**-S``, ``lo`` exact), whose
   ``rint(hi 2**S)`` and ``rint(lo 2**K)`` are the bit patterns of ``e + 1.5 2**(23-S)``
   and ``lo + 1.5 2**(23-K)`` less a constant: ``t1 = e + m1``, ``t2 = e - (t1 - (m1 +
   m2))`` (one float addition, two subtractions: ``t1 - (m1 + m2) = hi - m2`` is exact)
   and two int32 lane additions per vector (the constants are taken off once per row, the
   lanes added in int64; a row whose lanes add more than :func:`lane_chunk` values each,
   over about 16,000 elements on AVX2, in chunks of that many vectors, each chunk's lanes
   taken into int64 lanes): **the exact int64 sum ``sum(rint(e * 2**K))`` of**
   :func:`compiler.ops.softmax.softmax_f32`, **whatever the vector width or order**.  The
   row's partial last vector is the full one ending at the row's end, its already-counted
   lanes zeroed before the split; it is not stored but scaled in registers and its new
   lanes stored one by one, so the next pass reads only whole vectors this pass stored
   (a load that straddles two earlier stores cannot be forwarded from them: that pass
   took 0.165 of 0.42 ms on 12 x 197 x 197 before);
3. ``inv = 1 / (float32(sum) * 2**-K)`` once per row (pass 2), ``out = e * inv`` in place
   over the whole vectors.

:class:`LogSoftmaxKernel` is the same with pass 2 storing ``x - max`` instead of ``e``
and leaving the row's exact sum, ``L = log(sum)`` (float64, :func:`log_sum_f64`) for a
block's rows in one vector, and pass 3 ``out - L`` in place (the partial last vector
``(x - max) - L`` from ``x``); :class:`LogSumExpKernel` (ReduceLogSumExp) stores nothing in
pass 2 and one value a row, ``float32(float64(max) + L)``.  Other axes:
:mod:`compiler.cpu.softmax_column`; the exact sum's arithmetic: :mod:`compiler.cpu.
softmax_sum`; the LLVM building blocks shared with the column kernel:
:mod:`compiler.cpu.softmax_emit`.

So the kernel equals :func:`compiler.ops.softmax.softmax_f32` bit for bit on every input,
on every target, and its error bound is that of the TE stages: ``3.5 * 2**-23`` relative
against the float64 softmax of ``fl(x - max)`` (tests/test_cpu_softmax_kernel.py).

:func:`compiler.cpu.softmax.softmax` attaches a :class:`SoftmaxKernel` to its output
(``out.cpu_kernel``); :func:`compiler.cpu.kernel.cpu_build` compiles that instead of the
stages when no schedules are given.  The code depends only on ``C`` and the target (the
rows are the kernel's ``[lo, hi)`` range), so softmaxes of any number of rows of one
length share a compilation.

Example::

    import numpy as np
    from compiler import te
    from compiler.cpu import cpu_build, host_target
    from compiler.cpu.softmax import softmax
    from compiler.ops.softmax import softmax_f32
    x = te.placeholder((3, 197), "float32", "x")
    avx2 = host_target(features="-avx512f")
    xv = np.random.default_rng(0).normal(size=(3, 197)).astype(np.float32)
    kern = cpu_build(softmax(x, target=avx2), target=avx2)
    assert len(kern.codes) == 1                 # one function: the hand-written kernel
    assert np.array_equal(kern.run({x: xv}), softmax_f32(xv))
"""

from __future__ import annotations

import os

import numpy as np
from llvmlite import ir

from .jit import host_target, vector_shape
from .mathfns import _const, emit_exp_nonpositive
from .schedules import PARALLEL_MIN
from .softmax_emit import (I1, I32, NAN_BITS, KernelEmitter, _max_of, bad_row_value,
                           finite_rows, internal_function, max_plus_log, range_function,
                           range_loop, split_add)
from .softmax_sum import lane_chunk, split_bits
from .vecmem import F32, I64, PTR

#: kernel version: part of the cache key
VERSION = 7
#: rows per block: their maxima, then the exp pass over all of them, then the scaling
BLOCK = int(os.environ.get("VTA_CPU_SOFTMAX_BLOCK", 8))
#: a block's input at most this many bytes (:func:`block_rows`: rows to 2048 go 8 a block)
BLOCK_BYTES = 1 << 16


def block_rows(c: int) -> int:
    """Rows per block for rows of ``c``: :data:`BLOCK`, fewer for long rows (a block's input
    at most :data:`BLOCK_BYTES`, at least one row): each pass streams the block's rows
    from L2, and the next pass finds them there (4 x 128256 on AVX-512: 0.38 -> 0.32 ms,
    blocks of 8 against 1)."""
    return max(1, min(BLOCK, BLOCK_BYTES // (4 * max(c, 1))))


def lanes_for(c: int, target=None) -> int:
    """``V``: the target's float32 lanes per SIMD register, or the largest power of two not
    above ``c`` when the row is shorter."""
    bits, _ = vector_shape(host_target(target))
    v = max(1, bits // 32)
    while v > 1 and v > c:
        v //= 2
    return v


class SoftmaxKernel(KernelEmitter):
    """The hand-written softmax of ``x`` (float32, rows of ``c`` = its last axis) for
    ``target``: what :func:`compiler.cpu.kernel.cpu_build` needs to compile it as one
    stage (:meth:`emit`, :meth:`key`, :attr:`inputs`, :attr:`rows`, :attr:`parallel`).

    ``unroll``: vectors per loop step of the (max, exp, scale) passes."""

    #: :class:`LogSoftmaxKernel`: the exp pass only sums, the last pass writes ``x - max - L``
    log = False
    #: every input has its defined output (a NaN row NaN, ...): the graph executor need not
    #: refuse a non-finite feed that only these kernels read
    nonfinite_ok = True
    #: :class:`LogSumExpKernel`: one value a row, ``max + L``
    reduce = False
    what = "softmax"

    def __init__(self, x, unroll=(4, 2, 4), c: int | None = None):
        self.x = x
        self.inputs = [x]
        self.c = int(x.shape[-1]) if c is None else int(c)    # c: rows of trailing axes
        self.rows = int(np.prod(x.shape, dtype=np.int64)) // self.c
        self.parallel = int(np.prod(x.shape)) >= PARALLEL_MIN and self.rows > 1
        self.unroll = tuple(unroll)

    def at(self, target) -> "SoftmaxKernel":
        """This kernel planned for ``target`` (lanes, sum split: a new object; any row
        length: :func:`lane_chunk`)."""
        tgt = host_target(target)
        k = type(self).__new__(type(self))
        k.__dict__.update(self.__dict__)
        k.target, k.v, (k.k, k.s) = tgt, lanes_for(self.c, tgt), split_bits(self.c)
        return k

    def key(self) -> str:
        return (f"hand:{self.what} v{VERSION} c={self.c} lanes={self.v} unroll={self.unroll} "
                f"block={block_rows(self.c)} K={self.k} S={self.s}")

    # ------------------------------------------------------------------ code
    def emit(self, mod: ir.Module, name: str) -> ir.Function:
        """``void @name(ptr noalias out, ptr noalias x, i64 lo, i64 hi)``: rows [lo, hi), in
        blocks of :func:`block_rows` rows: every row's maximum, then one call of the exp pass
        over the block (its constants set up once per block), then every row scaled (or
        filled with NaN)."""
        fn = range_function(mod, name)
        out, x, lo, hi = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        i8 = ir.IntType(8)
        blk = block_rows(self.c)
        nblk = ir.Constant(I64, blk)
        maxes = b.alloca(F32, size=nblk, name="maxes")
        invs = b.alloca(F32, size=nblk, name="invs")
        goods = b.alloca(i8, size=nblk, name="goods")
        raws = b.alloca(F32, size=nblk, name="raws") if self.reduce else None
        r0, close = range_loop(fn, b, lo, hi, "block", "r0")
        left = b.sub(hi, r0)
        nb = b.select(b.icmp_signed("<", left, nblk), left, nblk)
        base = b.mul(r0, ir.Constant(I64, self.c))
        xb = b.gep(x, [base], source_etype=F32)
        ob = b.gep(out, [r0 if self.reduce else base], source_etype=F32)

        def row(b, j, rowp):
            return b.gep(rowp, [b.mul(j, ir.Constant(I64, self.c))], source_etype=F32)

        def max_row(b, j, vals):
            mx, has_nan = self._max(b, fn, row(b, j, xb))
            good, safe = finite_rows(b, mx, b.not_(has_nan))
            b.store(safe, b.gep(maxes, [j], source_etype=F32))
            b.store(b.zext(good, i8), b.gep(goods, [j], source_etype=i8))
            if self.reduce:
                b.store(bad_row_value(b, mx, has_nan), b.gep(raws, [j], source_etype=F32))
            return vals
        self._loop(b, fn, nb, [], max_row, "rows_max")
        if self.log:    # the exp pass leaves each row's exact sum; L for the whole block
            # in one vector (the float64 log is a latency chain: per row it cost 0.07 ->
            # 0.06 ms of 128 x 768 on AVX2); the block's unused lanes hold 2**K
            bty = ir.VectorType(I64, blk)
            sums = b.bitcast(b.alloca(bty, name="sums"), PTR)
            b.store(ir.Constant(bty, [1 << self.k] * blk), sums)
            b.call(self._exp_function(mod, name + ".exp"), [xb, ob, maxes, sums, nb])
            lg = self._log_sum(b, b.load(sums, typ=bty), f64=self.reduce)
            if self.reduce:     # max + L, one rounding (a block's maxima in one vector)
                lg = max_plus_log(b, b.load(b.bitcast(maxes, PTR), typ=ir.VectorType(
                    F32, blk), align=4), lg)
            b.store(lg, b.bitcast(invs, lg.type.as_pointer()), align=4)
        else:
            b.call(self._exp_function(mod, name + ".exp"), [xb, ob, maxes, invs, nb])

        def scale_row(b, j, vals):
            orow = row(b, j, ob)
            inv = b.load(b.gep(invs, [j], source_etype=F32), typ=F32)
            yes = fn.append_basic_block("scale_row")
            no = fn.append_basic_block("nan_row")
            nxt = fn.append_basic_block("row_done")
            flag = b.load(b.gep(goods, [j], source_etype=i8), typ=i8)
            b.cbranch(b.icmp_unsigned("!=", flag, ir.Constant(i8, 0)), yes, no)
            b.position_at_end(no)
            self._fill(b, fn, orow)
            b.branch(nxt)
            b.position_at_end(yes)
            if self.log:
                mx = b.load(b.gep(maxes, [j], source_etype=F32), typ=F32)
                self._log_out(b, fn, orow, row(b, j, xb), mx, inv)
            else:
                self._scale(b, fn, orow, inv)
            b.branch(nxt)
            b.position_at_end(nxt)
            return vals

        def reduce_row(b, j, vals):     # one value: max + L, or the bad row's value
            flag = b.load(b.gep(goods, [j], source_etype=i8), typ=i8)
            y = b.select(b.icmp_unsigned("!=", flag, ir.Constant(i8, 0)),
                         b.load(b.gep(invs, [j], source_etype=F32), typ=F32),
                         b.load(b.gep(raws, [j], source_etype=F32), typ=F32))
            b.store(y, b.gep(ob, [j], source_etype=F32))
            return vals
        self._loop(b, fn, nb, [], reduce_row if self.reduce else scale_row, "rows_out")
        close(b, nblk)
        return fn

    def _max(self, b, fn, xr):
        """``(max, nan)``: the row's maximum and whether it holds a NaN.  The maximum is
        ``acc > x ? acc : x`` (x86 ``maxps acc, x``: one instruction, the load folded into
        it; a NaN ``x`` replaces ``acc``, which does not matter: the row is NaN then;
        either zero for (-0, +0)) in ``u`` accumulators, the NaN flag an OR of ``x != x
        or y != y`` over pairs of vectors (``cmpunordps x, y``) in 32-bit lanes: 2
        instructions per vector (i1 lanes took 3: LLVM packed each compare to 16 bits)."""
        v, nv = self.v, self.c // self.v
        u = max(1, min(self.unroll[0], nv))
        ity = ir.VectorType(I32, v)

        def group(b, offs, vals):
            xs = [self._load(b, xr, o) for o in offs]
            vals = list(vals)
            for q, x in enumerate(xs):
                vals[q] = _max_of(b, vals[q], x)
            for i in range(0, len(xs), 2):
                y = xs[min(i + 1, len(xs) - 1)]
                vals[u] = b.or_(vals[u], b.sext(b.fcmp_unordered("uno", xs[i], y), ity))
            return vals

        def body(b, j, vals):
            start = b.mul(j, ir.Constant(I64, u * v))
            return group(b, [b.add(start, ir.Constant(I64, q * v)) if q else start
                             for q in range(u)], vals)
        first = self._load(b, xr, 0)
        accs = self._loop(b, fn, nv // u, [first] * u + [ir.Constant(ity, [0] * v)], body,
                          "max")
        rest = [q * v for q in range(nv // u * u, nv)]
        if self.c % v:
            rest.append(self.c - v)
        for i in range(0, len(rest), u):
            accs = group(b, rest[i:i + u], accs)
        m = accs[0]
        for a in accs[1:u]:
            m = _max_of(b, a, m)
        rname = f"llvm.vector.reduce.or.v{v}i32"
        red = b.module.globals.get(rname) or ir.Function(
            b.module, ir.FunctionType(I32, [ity]), rname)
        nan = b.icmp_unsigned("!=", b.call(red, [accs[u]]), ir.Constant(I32, 0))
        return self._hreduce(b, m, _max_of), nan

    def _exp_function(self, mod, name):
        """``void @name(ptr x, ptr out, ptr maxes, ptr invs, i64 n)``: :meth:`_exp_sum` of
        ``n`` consecutive rows (their maxima in ``maxes``, the reciprocals written to
        ``invs``) in a function of its own, so that its loop keeps its accumulators in
        registers (inside the kernel's row loop, with the other passes' values live, LLVM
        spilled them) and its constants are set up once per block of rows."""
        fn = internal_function(mod, name, [PTR, PTR, PTR, PTR, I64], 4)
        x, out, maxes, invs, n = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))

        def one(b, j, vals):
            off = b.mul(j, ir.Constant(I64, self.c))
            mx = b.load(b.gep(maxes, [j], source_etype=F32), typ=F32)
            inv = self._exp_sum(b, fn, b.gep(x, [off], source_etype=F32),
                                b.gep(out, [off], source_etype=F32), mx)
            b.store(inv, b.gep(invs, [j], source_etype=inv.type))   # (log: the sum, i64)
            return vals
        self._loop(b, fn, n, [], one, "rows")
        b.ret_void()
        return fn

    def _exp_sum(self, b, fn, xr, orow, mx):
        """Store ``e = exp(x - max)`` and return ``1 / (float32(T) * 2**-K)``, ``T`` the
        exact ``sum(rint(e * 2**K))`` (:func:`split_bits`)."""
        v, kb, sb = self.v, self.k, self.s
        u = max(1, min(self.unroll[1], self.c // v))
        mv = self._broadcast(b, mx)
        ity = ir.VectorType(I32, v)
        zero = _const(self.vty, 0.0)

        def exp_at(b, off):
            d = b.fsub(self._load(b, xr, off), mv)
            e = emit_exp_nonpositive(b, d, clamp_zero=False)
            # a log-softmax stores d = x - max (its last pass subtracts L in place: the
            # output's lines come into the cache here, as the softmax's do; 128 x 768 on
            # AVX2 0.060 -> 0.057 ms), a softmax e
            if not self.reduce:
                self._store(b, d if self.log else e, orow, off)
            return e

        def step(b, off, vals):
            return split_add(b, exp_at(b, off), vals, kb, sb)
        izero = ir.Constant(ity, [0] * v)
        nv, t = self.c // v, self.c % v
        n = nv + (1 if t else 0)                # values per lane
        chunk = lane_chunk(kb, sb) // u * u     # vectors per int32 chunk (long rows)
        if n > lane_chunk(kb, sb):      # chunks of `chunk` vectors, each taken into int64
            def one_chunk(b, j, vals):
                accs = self._vectors(b, fn, u, [izero, izero], step, "exp",
                                     first=b.mul(j, ir.Constant(I64, chunk)), nv=chunk)
                return [b.add(vals[0], self._lanes64(b, accs, chunk))]
            (wide64,) = self._loop(b, fn, nv // chunk,
                                   [ir.Constant(ir.VectorType(I64, v), [0] * v)],
                                   one_chunk, "chunk")
            first = nv // chunk * chunk
            accs = self._vectors(b, fn, u, [izero, izero], step, "exp_rest",
                                 first=ir.Constant(I64, first), nv=nv - first)
            n -= first
        else:
            wide64 = None
            accs = self._vectors(b, fn, u, [izero, izero], step, "exp")
        if t:   # the last full vector: its first v - t lanes were counted above
            mask = ir.Constant(ir.VectorType(I1, v), [int(i >= v - t) for i in range(v)])
            tail = emit_exp_nonpositive(b, b.fsub(self._load(b, xr, self.c - v), mv),
                                        clamp_zero=False)
            accs = split_add(b, b.select(mask, tail, zero), accs, kb, sb)
        if wide64 is not None:
            wide64 = b.add(wide64, self._lanes64(b, accs, n))
            total = self._reduce_add(b, wide64)
        else:
            total = self._lane_total(b, accs, n)
        if self.log:
            return total
        sf = b.fmul(b.sitofp(total, F32), ir.Constant(F32, float(2.0 ** -kb)))
        inv = b.fdiv(ir.Constant(F32, 1.0), sf)
        if t:   # the row's last t elements, scaled here and stored one by one: the scale
            # pass reads only whole vectors this pass stored (no store it cannot forward)
            y = b.fmul(tail, self._broadcast(b, inv))
            for i in range(v - t, v):
                p = b.gep(orow, [ir.Constant(I64, self.c - v + i)], source_etype=F32)
                b.store(b.extract_element(y, ir.Constant(I32, i)), p, align=4)
        return inv

    def _log_out(self, b, fn, orow, xr, mx, lg):
        """``out = (x - max) - L`` (two float32 subtractions, as :func:`compiler.ops.softmax.
        log_softmax_f32`): ``out - L`` in place over the whole vectors (the exp pass
        stored ``x - max`` there), then the row's last ``c % V`` elements from ``x`` by
        the full vector ending at the row's end (``out`` is not ``x``: the overlapped
        elements get the same values again)."""
        mv, lv = self._broadcast(b, mx), self._broadcast(b, lg)
        u = max(1, min(self.unroll[2], self.c // self.v))

        def step(b, off, vals):
            self._store(b, b.fsub(self._load(b, orow, off), lv), orow, off)
            return vals
        self._vectors(b, fn, u, [], step, "logout")
        if self.c % self.v:
            off = self.c - self.v
            self._store(b, b.fsub(b.fsub(self._load(b, xr, off), mv), lv), orow, off)

    def _scale(self, b, fn, orow, inv):
        v = self.v
        u = max(1, min(self.unroll[2], self.c // v))
        iv = self._broadcast(b, inv)

        def step(b, off, vals):        # the whole vectors (the exp pass did the tail)
            self._store(b, b.fmul(self._load(b, orow, off), iv), orow, off)
            return vals
        self._vectors(b, fn, u, [], step, "scale")

    def _fill(self, b, fn, orow):
        nanv = b.bitcast(ir.Constant(ir.VectorType(I32, self.v), [NAN_BITS] * self.v),
                         self.vty)
        u = max(1, min(self.unroll[2], self.c // self.v))

        def step(b, off, vals):
            self._store(b, nanv, orow, off)
            return vals
        self._vectors(b, fn, u, [], step, "fill")
        if self.c % self.v:
            self._store(b, nanv, orow, self.c - self.v)


class LogSoftmaxKernel(SoftmaxKernel):
    """The hand-written log-softmax of ``x`` over its last axis: the same maximum pass, the
    exp pass summing ``exp(x - max)`` exactly without storing it, ``L = log(sum)`` from the
    exact int64 sum (:func:`log_sum_f64`, float64, once per row, rounded to float32) and
    ``out = (x - max) - L`` in float32; a row with a NaN, a ``+inf`` or only ``-inf`` is
    all NaN.  Bit for bit :func:`compiler.ops.softmax.log_softmax_f32`."""

    log = True
    what = "log_softmax"


class LogSumExpKernel(LogSoftmaxKernel):
    """ReduceLogSumExp over rows of ``c`` (the last axis, or the trailing axes flattened):
    the log-softmax's maximum and exact sum (not storing ``x - max``), then one value a
    row, ``float32(float64(max) + L)`` (:func:`compiler.cpu.softmax_emit.max_plus_log`: one
    rounding); a row with a NaN gives NaN, one with a ``+inf`` ``+inf``, one of only
    ``-inf`` ``-inf`` (onnxruntime's values).  Bit for bit :func:`compiler.ops.softmax.
    log_sum_exp_f32`."""

    reduce = True
    what = "log_sum_exp"
