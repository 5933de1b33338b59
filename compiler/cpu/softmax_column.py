"""Softmax and log-softmax over an axis that is not the last (e.g. NCHW channels): the
rows are strided, so each SIMD lane holds one row (:class:`ColumnSoftmaxKernel`; 2, 4 or
8 rows, fewer than a vector's lanes, interleaved in full vectors), with the passes, exact
sum (in chunks for long axes) and log of :mod:`compiler.cpu.softmax_kernel` (the twins'
bits).

Example::

    import numpy as np
    from compiler import te
    from compiler.cpu import cpu_build
    from compiler.cpu.softmax import softmax_axis
    from compiler.ops.softmax import softmax_f32
    x = te.placeholder((2, 12, 7, 7), "float32", "x")
    xv = np.random.default_rng(0).normal(size=(2, 12, 7, 7)).astype(np.float32)
    got = cpu_build(softmax_axis(x, 1)).run({x: xv})
    assert np.array_equal(got, softmax_f32(xv, 1))
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from .jit import host_target
from .mathfns import _const, emit_exp_nonpositive
from .schedules import PARALLEL_MIN
from .softmax_emit import (I32, _max_of, bad_row_value, finite_rows, internal_function,
                           max_plus_log, range_function, range_loop, split_add)
from .softmax_kernel import NAN_BITS, VERSION, SoftmaxKernel, lanes_for
from .softmax_sum import lane_chunk, split_bits
from .vecmem import F32, I64, PTR


def group_segments(inner: int, v: int) -> list[tuple[int, int]]:
    """``[(count, lanes)]``: the ``inner`` strided rows of an outer index in groups of ``4
    V``, ``2 V`` and ``V`` lanes (a group's vectors span whole cache lines, its ``exp``
    chains overlap: 2 x 8192 x 64 on AVX2 2.62 -> 1.30 ms, AVX-512 1.62 -> 0.67), then one
    lane at a time; the wider groups only when ``V`` is the target's width."""
    out, left = [], inner
    for w in ((4 * v, 2 * v, v) if inner >= 2 * v else (v,)):
        if left // w:
            out.append((left // w, w))
            left %= w
    if left:
        out.append((left, 1))
    return out


class ColumnSoftmaxKernel(SoftmaxKernel):
    """The softmax (``log=False``) or log-softmax of ``x`` over an axis ``axis`` that is not
    the last and has ``inner`` > 1 elements after it (e.g. NCHW channels): the rows are
    strided by ``inner``, so each SIMD lane holds one row (``V`` adjacent rows, contiguous
    in memory, per vector: :func:`lanes_for` of ``inner``; groups of 4, 2 or 1 vectors,
    :func:`group_segments`; the last ``inner % V`` rows of each outer index one lane at a
    time).  Per group of rows the same three passes as
    :class:`SoftmaxKernel` (maximum and NaN flag, ``exp(x - max)`` summed exactly in int32
    lanes, the scaling or ``(x - max) - L``), the sum one per lane (``c`` values each, in
    chunks of :func:`lane_chunk` taken into int64 lanes), so the bits are those of the twins
    (:func:`compiler.ops.softmax.softmax_f32` / ``log_softmax_f32`` on that axis).  The
    work unit of the kernel's ``[lo, hi)`` range is one group.  When ``inner`` is a power
    of two below the target's lanes (2, 4; 8 on AVX-512) the ``inner`` rows of an outer
    index go interleaved in full vectors instead (``interleaved``, one group per outer
    index: :meth:`_interleaved_function`)."""

    def __init__(self, x, axis: int, log: bool = False, reduce: bool = False,
                 last: int | None = None):
        shape = [int(d) for d in x.shape]
        self.x, self.inputs, self.unroll = x, [x], (1, 1, 1)
        self.axis = axis % len(shape)
        last = self.axis if last is None else last % len(shape)     # axes [axis, last]
        self.c = int(np.prod(shape[self.axis:last + 1], dtype=np.int64))
        self.outer = int(np.prod(shape[:self.axis], dtype=np.int64))
        self.inner = int(np.prod(shape[last + 1:], dtype=np.int64))
        self.log, self.reduce = log or reduce, reduce
        self.what = ("log_sum_exp_column" if reduce else
                     "log_softmax_column" if log else "softmax_column")
        self.rows = 0                                # groups: set by at()
        self.parallel = False

    def at(self, target):
        tgt = host_target(target)
        v = lanes_for(self.inner, tgt)
        k = type(self).__new__(type(self))
        k.__dict__.update(self.__dict__)
        k.target, k.v, (k.k, k.s) = tgt, v, split_bits(self.c)
        k.segments = group_segments(self.inner, v)
        k.groups = sum(n for n, _ in k.segments)             # per outer index
        vi = lanes_for(self.c * self.inner, tgt)
        k.interleaved = 1 < self.inner < vi and vi % self.inner == 0
        if k.interleaved:        # the rows of an outer index interleaved in full vectors
            k.v, k.groups, k.segments = vi, 1, [(1, vi)]
        k.rows = self.outer * k.groups
        k.parallel = int(np.prod(self.x.shape)) >= PARALLEL_MIN and k.rows > 1
        return k

    def key(self) -> str:
        return (f"hand:{self.what} v{VERSION} c={self.c} inner={self.inner} "
                f"lanes={self.v} K={self.k} S={self.s} groups={self.segments}"
                + (" interleaved" if self.interleaved else ""))

    def emit(self, mod: ir.Module, name: str) -> ir.Function:
        """``void @name(ptr noalias out, ptr noalias x, i64 lo, i64 hi)``: groups [lo, hi)
        (group ``u``: outer index ``u // G``, ``G`` groups per outer index: those of
        :func:`group_segments`, widest first, then the last ``inner % V`` rows one lane
        at a time)."""
        fn = range_function(mod, name)
        out, x, lo, hi = fn.args
        inner = self.inner
        if self.interleaved:
            return self._emit_interleaved(mod, name, fn)
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        u, close = range_loop(fn, b, lo, hi, "group", "u")
        g = ir.Constant(I64, self.groups)
        o, q = b.udiv(u, g), b.urem(u, g)
        obase = b.mul(o, ir.Constant(I64, self.c * inner))
        nxt = fn.append_basic_block("next")
        q0 = i0 = 0
        for j, (n, w) in enumerate(self.segments):     # groups [q0, q0 + n): w lanes each
            grp = self._group_function(mod, f"{name}.w{w}", w)
            lane0 = b.add(ir.Constant(I64, i0 - q0 * w), b.mul(q, ir.Constant(I64, w)))
            base = b.add(obase, lane0)
            # a ReduceLogSumExp writes one value a row: out[o inner + lane]
            ob = b.add(b.mul(o, ir.Constant(I64, inner)), lane0) if self.reduce else base
            args = [b.gep(x, [base], source_etype=F32), b.gep(out, [ob], source_etype=F32)]
            if j == len(self.segments) - 1:
                b.call(grp, args)
                b.branch(nxt)
            else:
                yes = fn.append_basic_block(f"w{w}")
                no = fn.append_basic_block(f"not_w{w}")
                b.cbranch(b.icmp_unsigned("<", q, ir.Constant(I64, q0 + n)), yes, no)
                b.position_at_end(yes)
                b.call(grp, args)
                b.branch(nxt)
                b.position_at_end(no)
            q0, i0 = q0 + n, i0 + n * w
        b.position_at_end(nxt)
        close(b, ir.Constant(I64, 1))
        return fn

    def _emit_interleaved(self, mod, name, fn):
        """:meth:`emit` when the ``inner`` rows of an outer index go interleaved in full
        vectors (:meth:`_interleaved_function`, once per outer index)."""
        out, x, lo, hi = fn.args
        grp = self._interleaved_function(mod, name + ".i")
        entry = fn.append_basic_block("entry")
        b = ir.IRBuilder(entry)

        def one(b, j, vals):
            base = b.mul(b.add(lo, j), ir.Constant(I64, self.c * self.inner))
            ob = b.mul(b.add(lo, j), ir.Constant(I64, self.inner)) if self.reduce else base
            b.call(grp, [b.gep(x, [base], source_etype=F32),
                         b.gep(out, [ob], source_etype=F32)])
            return vals
        body = fn.append_basic_block("groups")
        done = fn.append_basic_block("done")
        b.cbranch(b.icmp_signed("<", lo, hi), body, done)
        b.position_at_end(body)
        self._loop(b, fn, b.sub(hi, lo), [], one, "outer")
        b.branch(done)
        b.position_at_end(done)
        b.ret_void()
        return fn

    def _interleaved_function(self, mod, name):
        """``void @name(ptr x, ptr out)``: the ``i = inner`` rows of one outer index when
        ``i`` divides ``V`` (a power of two below it, e.g. NCHW logits with 2 or 4
        positions, or 8 on AVX-512): the slice's ``c i`` elements read as a row of full
        ``V``-lane vectors (the last one ending at the slice's end, as the row kernel's
        partial vector), lane ``l`` always of row ``l % i``.  Each lane keeps its own
        maximum, NaN flag and exact split sums (chunked, :func:`lane_chunk`); the lanes of
        a row are folded (maxima, flags, int64 sums: exact in any order) and broadcast
        back, so each row gets the twins' bits.  Before: vectors of ``i`` lanes, one row
        per lane (1 x 128256 x 2 on AVX2: 1.6x onnxruntime's time)."""
        fn = internal_function(mod, name, [PTR, PTR], 2)
        x, out = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        v, i, kb, sb = self.v, self.inner, self.k, self.s
        n_el = self.c * i
        nv, t = n_el // v, n_el % v             # t: a multiple of i
        vty, ity = ir.VectorType(F32, v), ir.VectorType(I32, v)

        def off(b, j):                          # vector j (an i64 value) -> element offset
            return b.mul(j, ir.Constant(I64, v))

        def load(b, p, o):
            return b.load(b.gep(p, [o], source_etype=F32), typ=vty, align=4)

        def store(b, val, p, o):
            b.store(val, b.gep(p, [o], source_etype=F32), align=4)

        def shuffle(b, vec, lanes):
            return b.shuffle_vector(vec, vec, ir.Constant(ir.VectorType(I32, len(lanes)),
                                                          lanes))

        def fold(b, vec, op):
            """``vec``'s lanes of each row combined by ``op`` (halves: ``V/2`` is a
            multiple of ``i``) and broadcast back to every lane of the row."""
            w = v
            while w > i:
                h = w // 2
                vec = op(b, shuffle(b, vec, list(range(h))), shuffle(b, vec, list(range(h, w))))
                w = h
            return shuffle(b, vec, [lane % i for lane in range(v)])
        tail_off = ir.Constant(I64, n_el - v)
        # 1: each lane's maximum and NaN flag, folded per row
        first = load(b, x, ir.Constant(I64, 0))

        def nan_of(b, xv):
            return b.sext(b.fcmp_unordered("uno", xv, xv), ity)

        def mx_step(b, j, vals):
            xv = load(b, x, off(b, b.add(j, ir.Constant(I64, 1))))
            return [_max_of(b, vals[0], xv), b.or_(vals[1], nan_of(b, xv))]
        acc, nan = self._loop(b, fn, nv - 1, [first, nan_of(b, first)], mx_step, "max")
        if t:
            xv = load(b, x, tail_off)
            acc, nan = _max_of(b, acc, xv), b.or_(nan, nan_of(b, xv))
        acc = fold(b, acc, _max_of)
        nan = fold(b, nan, lambda b, p, q: b.or_(p, q))
        good, mv = finite_rows(b, acc, b.icmp_unsigned("==", nan, ir.Constant(ity, [0] * v)))
        # 2: exp (stored by a softmax) and the exact split sums per lane

        def exp_of(b, o):
            return emit_exp_nonpositive(b, b.fsub(load(b, x, o), mv), clamp_zero=False)

        def exp_step(b, j, vals):
            o = off(b, j)
            e = exp_of(b, o)
            if not self.log:
                store(b, e, out, o)
            return split_add(b, e, vals, kb, sb)
        izero = ir.Constant(ity, [0] * v)
        zero64 = ir.Constant(ir.VectorType(I64, v), [0] * v)
        n = nv + (1 if t else 0)                # values per lane
        m = lane_chunk(kb, sb)
        total = zero64
        first_rest = 0
        if n > m:       # chunks of m vectors, each chunk's lanes taken into int64
            def chunk(b, q, vals):
                j0 = b.mul(q, ir.Constant(I64, m))
                accs = self._loop(b, fn, m, [izero, izero],
                                  lambda b, j, vv: exp_step(b, b.add(j0, j), vv), "exp")
                return [b.add(vals[0], self._lanes64(b, accs, m))]
            (total,) = self._loop(b, fn, nv // m, [zero64], chunk, "chunk")
            first_rest = nv // m * m
        j0 = ir.Constant(I64, first_rest)
        accs = self._loop(b, fn, nv - first_rest, [izero, izero],
                          lambda b, j, vv: exp_step(b, b.add(j0, j), vv), "exp_rest")
        if t:           # the last vector: its first v - t lanes were counted above
            mask = ir.Constant(ir.VectorType(ir.IntType(1), v),
                               [int(lane >= v - t) for lane in range(v)])
            accs = split_add(b, b.select(mask, exp_of(b, tail_off), _const(vty, 0.0)), accs,
                             kb, sb)
        total = b.add(total, self._lanes64(b, accs, n - first_rest))
        total = fold(b, total, lambda b, p, q: b.add(p, q))
        nanv = b.bitcast(ir.Constant(ity, [NAN_BITS] * v), vty)
        if self.reduce:         # one value a row: lane l of the first i lanes is row l
            y = self._reduce_value(b, good, mv, acc, nan, total)
            b.store(shuffle(b, y, list(range(i))), out, align=4)
            b.ret_void()
            return fn
        # 3: the scaling (in place over the stored e) or (x - max) - L
        if self.log:
            lg = self._log_sum(b, total)

            def y_at(b, o, from_x):
                return b.fsub(b.fsub(load(b, x, o), mv), lg)
        else:
            inv = b.fdiv(_const(vty, 1.0), b.fmul(b.sitofp(total, vty),
                                                  _const(vty, float(2.0 ** -kb))))

            def y_at(b, o, from_x):     # the last vector: e again from x (its first lanes
                # were scaled in place already; the same bits are stored again)
                return b.fmul(exp_of(b, o) if from_x else load(b, out, o), inv)

        def out_step(b, j, vals):
            o = off(b, j)
            store(b, b.select(good, y_at(b, o, False), nanv), out, o)
            return vals
        self._loop(b, fn, nv, [], out_step, "out")
        if t:
            store(b, b.select(good, y_at(b, tail_off, True), nanv), out, tail_off)
        b.ret_void()
        return fn

    def _reduce_value(self, b, good, mv, acc, nan, total):
        """A ReduceLogSumExp's lanes: ``max + L`` on a good row (``good``; ``mv``: its
        maximum or 0), else the bad row's value from the maximum ``acc`` and the NaN flags
        ``nan`` (int32 lanes)."""
        dirty = b.icmp_unsigned("!=", nan, ir.Constant(nan.type, [0] * nan.type.count))
        return b.select(good, max_plus_log(b, mv, self._log_sum(b, total, f64=True)),
                        bad_row_value(b, acc, dirty))

    def _group_function(self, mod, name, w):
        """``void @name(ptr x, ptr out)``: the ``w`` rows starting at ``x`` (element ``j``
        of lane ``l`` at ``x[j inner + l]``), all three passes."""
        fn = internal_function(mod, name, [PTR, PTR], 2)
        x, out = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        vty, ity = ir.VectorType(F32, w), ir.VectorType(I32, w)
        c, kb, sb = self.c, self.k, self.s
        stride = ir.Constant(I64, self.inner)

        def at(p, j):
            return b.gep(p, [b.mul(j, stride)], source_etype=F32)

        def load(p, j):
            return b.load(at(p, j), typ=vty, align=4)
        # 1: the lanes' maxima and NaN flags
        first = load(x, ir.Constant(I64, 0))

        def mx_step(b, j, vals):
            xv = load(x, b.add(j, ir.Constant(I64, 1)))
            return [_max_of(b, vals[0], xv),
                    b.or_(vals[1], b.sext(b.fcmp_unordered("uno", xv, xv), ity))]
        acc, nan = self._loop(b, fn, c - 1, [first, b.sext(
            b.fcmp_unordered("uno", first, first), ity)], mx_step, "max")
        good, mv = finite_rows(b, acc, b.icmp_unsigned("==", nan, ir.Constant(ity, [0] * w)))
        # 2: exp, stored (softmax) and summed exactly per lane

        def exp_step(b, j, vals):
            e = emit_exp_nonpositive(b, b.fsub(load(x, j), mv), clamp_zero=False)
            if not self.log:
                b.store(e, at(out, j), align=4)
            return split_add(b, e, vals, kb, sb)
        izero = ir.Constant(ity, [0] * w)
        m = lane_chunk(kb, sb)
        if c > m:       # a long axis: chunks of m values per lane, each taken into int64
            def chunk(b, q, vals):
                j0 = b.mul(q, ir.Constant(I64, m))
                accs = self._loop(b, fn, m, [izero, izero],
                                  lambda b, j, v: exp_step(b, b.add(j0, j), v), "exp")
                return [b.add(vals[0], self._lanes64(b, accs, m))]
            (total,) = self._loop(b, fn, c // m, [ir.Constant(ir.VectorType(I64, w), [0] * w)],
                                  chunk, "chunk")
            if c % m:
                j0 = ir.Constant(I64, c // m * m)
                accs = self._loop(b, fn, c % m, [izero, izero],
                                  lambda b, j, v: exp_step(b, b.add(j0, j), v), "exp_rest")
                total = b.add(total, self._lanes64(b, accs, c % m))
        else:
            accs = self._loop(b, fn, c, [izero, izero], exp_step, "exp")
            total = self._lanes64(b, accs, c)
        nanv = b.bitcast(ir.Constant(ity, [NAN_BITS] * w), vty)
        if self.reduce:         # one value a row (lane)
            y = self._reduce_value(b, good, mv, acc, nan, total)
            b.store(y, out, align=4)
            b.ret_void()
            return fn
        if self.log:
            lg = self._log_sum(b, total)

            def out_step(b, j, vals):
                y = b.fsub(b.fsub(load(x, j), mv), lg)
                b.store(b.select(good, y, nanv), at(out, j), align=4)
                return vals
        else:
            sf = b.fmul(b.sitofp(total, vty), _const(vty, float(2.0 ** -kb)))
            inv = b.fdiv(_const(vty, 1.0), sf)

            def out_step(b, j, vals):
                y = b.fmul(load(out, j), inv)
                b.store(b.select(good, y, nanv), at(out, j), align=4)
                return vals
        self._loop(b, fn, c, [], out_step, "out")
        b.ret_void()
        return fn
