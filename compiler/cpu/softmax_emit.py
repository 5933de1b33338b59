"""The LLVM building blocks of the hand-written softmax kernels (:mod:`compiler.cpu.
softmax_kernel`, :mod:`compiler.cpu.softmax_column`): the kernel entry, counted loops with
loop-carried values, whole-vector row walks, the row-is-finite test, the exact sum's ``hi
+ lo`` split and its int32 -> int64 lane totals, and the float64 log of the sum
(:mod:`compiler.cpu.softmax_sum` is the same arithmetic in numpy)."""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from .mathfns import _const
from .softmax_sum import LN2_HI, LN2_LO, LOG_C, SQRT2
from .vecmem import F32, I64, PTR

I1, I32 = ir.IntType(1), ir.IntType(32)
#: the quiet NaN a row with a NaN exponential is written as (numpy's ``np.float32(np.nan)``)
NAN_BITS = 0x7FC00000


def _max_of(b, x, acc):
    """``x > acc ? x : acc`` (x86 ``maxps x, acc``)."""
    return b.select(b.fcmp_ordered(">", x, acc), x, acc)


def range_function(mod: ir.Module, name: str) -> ir.Function:
    """A hand-written kernel's entry, ``void @name(ptr noalias out, ptr noalias x, i64 lo,
    i64 hi)`` (``nounwind noinline``): it computes the rows (or groups) ``[lo, hi)``."""
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR, PTR, I64, I64]), name)
    for a in fn.args[:2]:
        a.add_attribute("noalias")
    fn.attributes.add("nounwind")
    fn.attributes.add("noinline")
    return fn


def range_loop(fn: ir.Function, b: ir.IRBuilder, lo, hi, label: str, var: str):
    """Open a kernel's loop over ``[lo, hi)`` from the entry block ``b`` stands in: a
    block ``label`` entered when ``lo < hi``, its ``i64`` induction variable ``var``
    (starting at ``lo``).  Returns the variable and ``close(b, step)``, which steps it by
    ``step`` at ``b``'s block, loops while it is below ``hi`` and returns."""
    entry = b.block
    head = fn.append_basic_block(label)
    done = fn.append_basic_block("done")
    b.cbranch(b.icmp_signed("<", lo, hi), head, done)
    b.position_at_end(head)
    v = b.phi(I64, var)
    v.add_incoming(lo, entry)

    def close(b, step):
        v1 = b.add(v, step)
        v.add_incoming(v1, b.block)
        b.cbranch(b.icmp_signed("<", v1, hi), head, done)
        b.position_at_end(done)
        b.ret_void()
    return v, close


def internal_function(mod: ir.Module, name: str, args: list, noalias: int) -> ir.Function:
    """A kernel's helper ``void @name(args)`` (internal, ``nounwind noinline``: a function
    of its own, so that its loop keeps its accumulators in registers), its first
    ``noalias`` pointer arguments ``noalias``."""
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), args), name)
    for a in fn.args[:noalias]:
        a.add_attribute("noalias")
    fn.attributes.add("nounwind")
    fn.attributes.add("noinline")
    fn.linkage = "internal"
    return fn


def finite_rows(b, mx, clean):
    """``(good, max or 0)`` for rows of maximum ``mx`` (a float32 or a vector of them, one
    row per lane) with no NaN where ``clean`` (i1, or i1 lanes): a row is good when it has
    no NaN and a finite maximum (a ``+inf``, or only ``-inf``: ``x - max`` is NaN somewhere);
    a bad row's passes run on maximum 0 (its values are overwritten)."""
    ty = mx.type
    good = b.and_(b.and_(b.fcmp_ordered("<", mx, _const(ty, float("inf"))),
                         b.fcmp_ordered(">", mx, _const(ty, float("-inf")))), clean)
    return good, b.select(good, mx, _const(ty, 0.0))


def max_plus_log(b, safe, lg):
    """A ReduceLogSumExp's value on a good row: ``float32(float64(max) + L)`` (``L`` the
    float64 log of the exact sum, :meth:`KernelEmitter._log_sum`; one rounding), in lanes
    or scalar as ``safe``."""
    w = safe.type.count if isinstance(safe.type, ir.VectorType) else 0
    f64 = ir.VectorType(ir.DoubleType(), w) if w else ir.DoubleType()
    return b.fptrunc(b.fadd(b.fpext(safe, f64), lg), safe.type)


def bad_row_value(b, mx, nan):
    """A ReduceLogSumExp's value on a row that is not good (:func:`finite_rows`), as
    onnxruntime's: NaN (the quiet ``0x7fc00000``) where the row holds a NaN (``nan``, i1),
    else its maximum: ``+inf``, or ``-inf`` for a row of only ``-inf`` (``log 0``)."""
    nanc = b.bitcast(_const(ir.VectorType(I32, mx.type.count) if isinstance(
        mx.type, ir.VectorType) else I32, NAN_BITS), mx.type)
    return b.select(nan, nanc, mx)


def split_add(b, e, accs, k, s):
    """The int32 accumulators ``accs`` (hi, lo) plus the split of ``e`` (float32 lanes in
    [0, 1]; :func:`compiler.cpu.softmax_sum.split_bits` ``K``, ``S``): ``t1 = e + m1``, whose
    bits are ``bits(m1) + rint(e 2**S)``, and ``t2 = e - (t1 - (m1 + m2))``, the bits of
    ``m2 + rint(lo 2**K)`` (``t1 - (m1 + m2) = hi - m2`` is exact: ``hi`` a multiple of
    ``2**-S`` in [0, 1], ``m2``'s lowest bit ``2**(22-K)``; ``e - u`` is ``lo + m2``
    rounded once): three float operations and two int32 lane additions per vector; the
    constants ``bits(m)`` are taken off per lane later (:meth:`KernelEmitter._lane_offsets`)."""
    m1, m2 = 1.5 * 2.0 ** (23 - s), 1.5 * 2.0 ** (23 - k)
    # m1 + m2 is a float32 (m2's lowest bit 2**(22-K) >= m1's ulp 2**-S: K <= S + 22)
    assert float(np.float32(m1 + m2)) == m1 + m2, (k, s)
    ity = ir.VectorType(I32, e.type.count)
    t1 = b.fadd(e, _const(e.type, m1))
    t2 = b.fsub(e, b.fsub(t1, _const(e.type, m1 + m2)))
    return [b.add(accs[0], b.bitcast(t1, ity)), b.add(accs[1], b.bitcast(t2, ity))]


class KernelEmitter:
    """What the row and column kernels share: loads and stores of ``V``-lane vectors
    (``self.v``), loops, the exact sum's lane totals (``self.k``, ``self.s``, ``self.c``)
    and its log."""

    @property
    def vty(self):
        return ir.VectorType(F32, self.v)

    def _load(self, b, row, off):
        p = b.gep(row, [off if isinstance(off, ir.Value) else ir.Constant(I64, off)],
                  source_etype=F32)
        return b.load(p, typ=self.vty, align=4)

    def _store(self, b, value, row, off):
        p = b.gep(row, [off if isinstance(off, ir.Value) else ir.Constant(I64, off)],
                  source_etype=F32)
        b.store(value, p, align=4)

    def _loop(self, b, fn, n, carried, body, tag):
        """``for j in range(n)`` (``n`` a Python int, or an i64 value >= 1) with loop-carried values
        ``carried`` (a list); ``body(b, j, values) -> new values``; returns the final
        values (the builder positioned after the loop)."""
        if isinstance(n, int) and n <= 0:
            return carried
        pre = b.block
        loop = fn.append_basic_block(tag)
        after = fn.append_basic_block(tag + "_end")
        b.branch(loop)
        b.position_at_end(loop)
        j = b.phi(I64, tag + "_j")
        j.add_incoming(ir.Constant(I64, 0), pre)
        phis = []
        for k, v in enumerate(carried):
            p = b.phi(v.type, f"{tag}_a{k}")
            p.add_incoming(v, pre)
            phis.append(p)
        new = body(b, j, phis)
        j1 = b.add(j, ir.Constant(I64, 1))
        end = b.block
        j.add_incoming(j1, end)
        for p, v in zip(phis, new):
            p.add_incoming(v, end)
        b.cbranch(b.icmp_signed("<", j1, n if isinstance(n, ir.Value) else
                                ir.Constant(I64, n)), loop, after)
        b.position_at_end(after)
        return new

    def _vectors(self, b, fn, u, carried, step, tag, first=None, nv=None):
        """Call ``step(b, offset, values) -> values`` for every full vector of the row
        (offset ``i V``), ``u`` per loop iteration, then the ``nv % u`` left over; ``first``
        (an i64 value, vectors) and ``nv``: only the vectors ``[first, first + nv)``."""
        v, nv = self.v, self.c // self.v if nv is None else nv
        f0 = None if first is None else b.mul(first, ir.Constant(I64, v))

        def at(b, o):                   # o: an i64 value or an int
            if f0 is None:
                return o
            return b.add(f0, o if isinstance(o, ir.Value) else ir.Constant(I64, o))

        def body(b, j, vals):
            start = b.mul(j, ir.Constant(I64, u * v))
            for q in range(u):
                vals = step(b, at(b, b.add(start, ir.Constant(I64, q * v)) if q else start),
                            vals)
            return vals
        vals = self._loop(b, fn, nv // u, carried, body, tag)
        for q in range(nv // u * u, nv):
            vals = step(b, at(b, q * v), vals)
        return vals

    def _hreduce(self, b, vec, op):
        """The lanes of ``vec`` combined by ``op`` pairwise (halves), a scalar."""
        w = vec.type.count
        while w > 1:
            h = w // 2
            lo = b.shuffle_vector(vec, vec, ir.Constant(ir.VectorType(I32, h), list(range(h))))
            hi = b.shuffle_vector(vec, vec, ir.Constant(ir.VectorType(I32, h),
                                                        list(range(h, w))))
            vec = op(b, lo, hi)
            w = h
        return b.extract_element(vec, ir.Constant(I32, 0))

    def _lane_offsets(self, n):
        """``[(shift, m, offset)]`` for the hi and lo accumulators: each lane added ``n``
        values, ``n bits(m)`` too much (``offset``, mod ``2**32`` as an int32)."""
        kb, sb = self.k, self.s
        out = []
        for m, sh in ((1.5 * 2.0 ** (23 - sb), kb - sb), (1.5 * 2.0 ** (23 - kb), 0)):
            bits = int(np.array(m, np.float32).view(np.uint32))
            out.append((sh, ((n * bits) & 0xFFFFFFFF) - ((n * bits) & 0x80000000) * 2))
        return out

    def _lanes64(self, b, accs, n):
        """The int64 lanes ``(hi << (K - S)) + lo`` of the int32 accumulators ``accs`` (hi,
        lo: each lane added ``n <=`` :func:`lane_chunk` values, its sums fit in int32)."""
        w = accs[0].type.count
        i64v = ir.VectorType(I64, w)
        total = None
        for acc, (sh, off) in zip(accs, self._lane_offsets(n)):
            part = b.sext(b.sub(acc, ir.Constant(acc.type, [off] * w)), i64v)
            if sh:
                part = b.shl(part, ir.Constant(i64v, [sh] * w))
            total = part if total is None else b.add(total, part)
        return total

    @staticmethod
    def _reduce_add(b, lanes):
        """The lanes of an integer vector added (``llvm.vector.reduce.add``)."""
        w, ety = lanes.type.count, lanes.type.element
        rname = f"llvm.vector.reduce.add.v{w}i{ety.width}"
        radd = b.module.globals.get(rname) or ir.Function(
            b.module, ir.FunctionType(ety, [lanes.type]), rname)
        return b.call(radd, [lanes])

    def _lane_total(self, b, accs, n):
        """The row's exact int64 sum from its int32 accumulators (hi, lo), every lane having
        added ``n <=`` :func:`lane_chunk` values: the offsets taken off per lane (each
        lane's sum then fits in int32), the lanes added in int32 when a row's hi and lo
        totals fit (``c 2**S`` and ``c 2**(K-S-1)`` below ``2**31``), else in int64."""
        kb, sb, v = self.k, self.s, self.v
        wide = self.c * 2 ** max(sb, kb - sb - 1) >= 2 ** 31
        total = None
        for acc, (sh, off) in zip(accs, self._lane_offsets(n)):
            lanes = b.sub(acc, ir.Constant(acc.type, [off] * v))
            if wide:
                lanes = b.sext(lanes, ir.VectorType(I64, v))
            part = self._reduce_add(b, lanes)
            if not wide:
                part = b.sext(part, I64)
            if sh:
                part = b.shl(part, ir.Constant(I64, sh))
            total = part if total is None else b.add(total, part)
        return total

    def _log_sum(self, b, total, f64=False):
        """float32 (``f64``: float64) ``log(total * 2**-K)`` of the exact sum ``total`` (int64, or a vector of
        them: one per lane of the column kernel; >= 2**K on a good row: its maximum adds
        ``exp(0) = 1``): :func:`log_sum_f64`'s float64 operations, rounded to float32."""
        w = total.type.count if isinstance(total.type, ir.VectorType) else 0
        d = ir.VectorType(ir.DoubleType(), w) if w else ir.DoubleType()
        i64 = ir.VectorType(I64, w) if w else I64

        def c(v):
            return _const(d, float(v))

        def ci(v):
            return _const(i64, int(v))
        s = b.sitofp(total, d)
        bits = b.bitcast(s, i64)
        e = b.sub(b.lshr(bits, ci(52)), ci(1023))
        m = b.bitcast(b.or_(b.and_(bits, ci((1 << 52) - 1)), ci(1023 << 52)), d)  # [1, 2)
        big = b.fcmp_ordered(">", m, c(SQRT2))
        m = b.select(big, b.fmul(m, c(0.5)), m)
        fe = b.sitofp(b.sub(b.add(e, b.zext(big, i64)), ci(self.k)), d)
        f = b.fdiv(b.fsub(m, c(1.0)), b.fadd(m, c(1.0)))
        z = b.fmul(f, f)
        q = c(LOG_C[-1])
        for k in LOG_C[-2::-1]:
            q = b.fadd(b.fmul(q, z), c(k))
        lm = b.fmul(b.fadd(f, f), q)
        lg = b.fadd(b.fmul(fe, c(LN2_HI)), b.fadd(b.fmul(fe, c(LN2_LO)), lm))
        return lg if f64 else b.fptrunc(lg, ir.VectorType(F32, w) if w else F32)

    def _broadcast(self, b, scalar):
        v = self.v
        vec = b.insert_element(ir.Constant(self.vty, ir.Undefined), scalar, ir.Constant(I32, 0))
        return b.shuffle_vector(vec, vec, ir.Constant(ir.VectorType(I32, v), [0] * v))
