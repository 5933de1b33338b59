"""Host loop IR (:mod:`compiler.te.loop_nest`) -> LLVM IR, one function per compute stage.

Each stage becomes ``void @stage(ptr noalias %buf0, ..., i64 %lo, i64 %hi)``: the buffers
are the C-contiguous arrays the stage reads and writes (in :attr:`StageCode.buffers` order)
and ``[lo, hi)`` is the range of the outermost loop, so a caller can run disjoint chunks of
a ``parallel`` loop on several threads.

Numeric semantics are those of :mod:`compiler.te.evaluate`, operation by operation:

* integers: ``add``/``sub``/``mul`` wrap in the node's width; ``//``/``%`` floor, a zero
  divisor gives 0 (numpy), computed in i64 so no division can trap; ``>>`` is arithmetic and
  a negative count shifts left (VTA's SHR); ``min``/``max`` on the exact values; comparisons
  on the exact (sign- or zero-extended) values.
* float32: IEEE ``fadd``/``fsub``/``fmul``/``fdiv``, no fast-math: element-wise results are
  those of numpy's float32 operations bit for bit.  Sum reductions are ``reassoc``
  (vectorizable) and ``acc + a * b`` is ``llvm.fmuladd`` (one FMA where the CPU has it), so
  float sums differ from numpy's by the order and rounding of the sum only; ``min``/``max``
  propagate NaN (``llvm.minimum``/``llvm.maximum``, as ``numpy.minimum``).
* casts: int -> int truncates or extends, int -> float32 rounds to nearest even, float32 ->
  int truncates toward zero, saturating, NaN -> 0 (``llvm.fptosi.sat``'s semantics, written
  with compares and selects so that vectors stay vectors on x86).
* ``exp``: inline float32 arithmetic (:mod:`compiler.cpu.mathfns`: within 1 ulp of the
  exact value, the same bits on every target and vector width; ``exp(min(a, 0.0))`` in a
  shorter form with the same bits); intrinsics:
  ``llvm.log/sqrt/floor/ceil/fabs.f32``, ``round`` is ``llvm.roundeven``
  (numpy.rint), integer ``abs`` is ``llvm.abs`` (wrapping).

A read that :func:`bounds` cannot prove in range is clamped when it sits under a ``select``
(the padding idiom: the value is discarded) and refused otherwise.

A ``vectorized`` loop of extent W becomes LLVM vector code: every value that depends on its
variable is a ``<W x T>`` vector, reads and writes with unit stride are vector loads and
stores, other strides are per-lane loads/stores (gathers); a guard that depends on the
variable (the tail of a non-dividing split) becomes a lane mask (``llvm.masked.load`` /
``llvm.masked.store``; per-lane reads of disabled lanes are clamped into the array).
``unrolled`` loops become straight-line copies; the innermost serial loops are left to
LLVM's loop vectorizer at ``-O3``.
"""

from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from ..te.ir import For, Seq
from ..te.loop_nest import IfThen, Store
from ..te import (DTYPES, Binary, Call, Cast, Const, IterVar, Load, Reduce, Select, Tensor,
                  is_float)
from .errors import CpuError
from .mathfns import emit_exp, emit_exp_nonpositive
from .vecmem import F32, I1, I8, I64, PTR, MemoryAccess, llvm_type
from .vecmem import MAX_SPAN_STRIDE, mem_type  # noqa: F401 (re-exported)
from .indexing import _is_index, bounds
from .share import is_table
from .indexing import check_reads  # noqa: F401 (re-exported for compiler.cpu.kernel)
from .irutil import (_affine_guard, _const_value, _narrow8, _nonpositive_arg, _sat_bounds,
                     _tail_guard, _tyname, _width)

MAX_UNROLL = 256


@dataclass
class StageCode:
    """One stage's function: its name and the tensors its arguments point at."""
    name: str
    tensor: Tensor
    buffers: list           # Tensor per pointer argument
    outer_extent: int       # extent of the loop [lo, hi) splits (1 when there is none)
    parallel: bool


# ----------------------------------------------------------------------------- codegen

class StageEmitter(MemoryAccess):
    """Emit the LLVM function of one lowered stage into ``module``."""

    def __init__(self, module: ir.Module, fname: str, stage: str, stmt, buffers: list,
                 nsz: bool = False, alias: dict | None = None, ordered: bool = False,
                 overlap: bool = False):
        self.module, self.stage, self.buffers = module, stage, buffers
        self.nsz = ("nsz",) if nsz else ()     # min/max: either zero for (-0, +0)
        self.ordered = ordered                 # float sums: plain fadd / fmul, in loop order
        self.overlap = overlap                 # a row's partial vector: a full one, shifted
        fnty = ir.FunctionType(ir.VoidType(), [PTR] * len(buffers) + [I64, I64])
        self.fn = ir.Function(module, fnty, fname)
        for a in self.fn.args[:len(buffers)]:
            a.add_attribute("noalias")
        self.fn.attributes.add("nounwind")
        self.fn.attributes.add("noinline")      # run_all calls it: one copy of the code
        self.ptr = {t: self.fn.args[i] for i, t in enumerate(buffers)}
        for t, o in (alias or {}).items():    # t lives in o's memory: one pointer for both
            if t in self.ptr and o in self.ptr:
                self.ptr[t] = self.ptr[o]
        self.lo, self.hi = self.fn.args[-2], self.fn.args[-1]
        self.b = ir.IRBuilder(self.fn.append_basic_block("entry"))
        self.env: dict = {}
        self.stmt = stmt
        self.vec, self.lanes = None, 1      # the vectorized loop variable and its extent
        self.mask = None                    # lanes enabled by the guards (vector i1)

    def emit(self):
        self.stmt_(self.stmt, top=True)
        self.b.ret_void()
        return self.fn

    def fail(self, node, why):
        raise CpuError(f"stage {self.stage}: {why}: {node!r}")

    # -------------------------------------------------------------- statements
    def stmt_(self, s, top=False):
        if isinstance(s, Seq):
            for c in s.body:
                self.stmt_(c)
        elif isinstance(s, For):
            self.loop(s, top)
        elif isinstance(s, IfThen):
            cond = self.as_bool(s.cond)
            if isinstance(cond.type, ir.VectorType) and self.mask is None:
                self.guarded_vector(s.cond, cond, s.body)
            elif isinstance(cond.type, ir.VectorType):    # per-lane guard: a mask
                outer = self.mask
                self.mask = cond if outer is None else self.b.and_(outer, cond)
                self.stmt_(s.body)
                self.mask = outer
            else:
                with self.b.if_then(cond):
                    self.stmt_(s.body)
        elif isinstance(s, Store):
            v = self.fmuladd(s)
            if v is None:
                v = self.conv(self.expr(s.value), self._dt(s.value), s.tensor.dtype)
            if s.tensor.dtype == "bool":
                v = self.b.zext(v, self.like(v, I8))
            self.access(s.tensor, s.indices, clamp=False, value=v)
        else:
            self.fail(s, f"cannot compile statement {type(s).__name__}")

    def guarded_vector(self, e, cond, body):
        """``body`` under the outermost per-lane guard ``e`` (``cond``: its vector of
        lanes): plain vector code when every lane is on (a row's full vectors: only its
        tail is partial), else masked code.  The same values either way; the branch goes
        the same way for all but a row's last vector.  Whether every lane is on: two
        scalar compares when ``e`` compares affine index expressions (:func:`all_lanes`),
        else the mask's bits.  (A 197-wide softmax row on AVX2: the exp stage 0.43 ->
        0.18 ms for 12 x 197 x 197; every vector had computed its mask from 64-bit
        compares and used masked loads and stores.)"""
        n = cond.type.count
        full = self.all_lanes(e) if _affine_guard(e) else self.b.icmp_unsigned(
            "==", self.b.bitcast(cond, ir.IntType(n)), ir.Constant(ir.IntType(n), (1 << n) - 1))
        tail = self.overlap and _tail_guard(e, self.vec, n)
        with self.b.if_else(full) as (then, otherwise):
            with then:
                self.stmt_(body)
            with otherwise:
                if tail:
                    self.overlap_tail(e, body)
                else:
                    self.mask = cond
                    self.stmt_(body)
                    self.mask = None

    def overlap_tail(self, e, body):
        """``body`` for the partial vector of a row under the tail guard ``e`` (``a + v <
        n``, :func:`_tail_guard`): the full vector that ends at the row's end (lanes ``n -
        W .. n - 1``, overlapping the previous vector) instead of masked code, so the
        lanes before the partial ones are computed again, to the same values (a stage
        that reads what it writes must not: :func:`compiler.cpu.kernel.cpu_build` refuses
        it).  The vector variable is shifted by ``n - W - (a + 0)``."""
        v, vec_env, w = self.vec, self.env[self.vec], self.lanes
        self.vec, self.lanes = None, 1
        self.env[v] = ir.Constant(I64, 0)
        try:
            start = self.index(e.a)               # the first lane's index, scalar
        finally:
            self.vec, self.env[v], self.lanes = v, vec_env, w
        shift = self.b.sub(ir.Constant(I64, int(e.b.value) - w), start)
        self.env[v] = self.b.add(vec_env, self.splat(shift, w))
        try:
            self.stmt_(body)
        finally:
            self.env[v] = vec_env

    def all_lanes(self, e):
        """Scalar i1: guard ``e`` (comparisons of affine index expressions, each true on an
        interval of lanes) holds on every lane, i.e. on the first and the last."""
        v, vec_env, lanes = self.vec, self.env[self.vec], self.lanes
        self.vec, self.lanes, ends = None, 1, []
        try:
            for k in (0, lanes - 1):
                self.env[v] = ir.Constant(I64, k)
                ends.append(self.as_bool(e))
        finally:
            self.vec, self.env[v], self.lanes = v, vec_env, lanes
        return self.b.and_(*ends)

    def loop(self, s: For, top: bool):
        if s.kind == "vectorized" and not top and self.vec is None:
            self.vec = s.var
            self.env[s.var] = ir.Constant(ir.VectorType(I64, s.extent), list(range(s.extent)))
            self.lanes = s.extent
            self.stmt_(s.body)
            del self.env[s.var]
            self.vec, self.lanes = None, 1
            return
        if s.kind in ("unrolled", "vectorized") and not top:
            if s.extent > MAX_UNROLL:
                self.fail(s.var, f"{s.kind} loop of extent {s.extent} (at most {MAX_UNROLL}; "
                                 f"split it first)")
            for i in range(s.extent):
                self.env[s.var] = ir.Constant(I64, i)
                self.stmt_(s.body)
            del self.env[s.var]
            return
        lo, hi = (self.lo, self.hi) if top else (ir.Constant(I64, 0), ir.Constant(I64, s.extent))
        pre = self.b.block
        head = self.fn.append_basic_block(f"{s.var.name}.head")
        body = self.fn.append_basic_block(f"{s.var.name}.body")
        done = self.fn.append_basic_block(f"{s.var.name}.done")
        self.b.branch(head)
        self.b.position_at_end(head)
        i = self.b.phi(I64, s.var.name)
        i.add_incoming(lo, pre)
        self.b.cbranch(self.b.icmp_signed("<", i, hi), body, done)
        self.b.position_at_end(body)
        self.env[s.var] = i
        self.stmt_(s.body)
        nxt = self.b.add(i, ir.Constant(I64, 1), flags=["nuw", "nsw"])
        i.add_incoming(nxt, self.b.block)
        self.b.branch(head)
        self.b.position_at_end(done)
        del self.env[s.var]

    def fmuladd(self, s: Store):
        """A float32 sum-reduction update ``acc = acc + body`` with ``reassoc`` (so LLVM
        may vectorize the sum), as ``llvm.fmuladd`` when the body is a product (one FMA
        where the CPU has it); else None.  Float reductions are order-dependent anyway:
        the tests compare them with a tolerance.  An ``ordered`` stage
        (:func:`compiler.cpu.schedules.ordered_sum`) gets None: its update is the plain
        IEEE ``fadd`` (and ``fmul``) of the expression, in loop order, no contraction."""
        e = s.value
        if self.ordered or not (is_float(s.tensor.dtype) and isinstance(e, Binary) and e.op == "add"
                and isinstance(e.a, Load) and e.a.tensor is s.tensor and is_float(e.dtype)):
            return None
        acc = self.expr(e.a)
        if isinstance(e.b, Binary) and e.b.op == "mul" and is_float(e.b.dtype):
            x = self.conv(self.expr(e.b.a), self._dt(e.b.a), "float32")
            y = self.conv(self.expr(e.b.b), self._dt(e.b.b), "float32")
            x, y, acc = self.match(x, y, acc)
            return self.intrinsic("llvm.fmuladd", [x, y, acc], fastmath=("reassoc",))
        x, acc = self.match(self.conv(self.expr(e.b), self._dt(e.b), "float32"), acc)
        r = self.b.fadd(acc, x)
        r.flags.append("reassoc")
        return r

    # -------------------------------------------------------------- vector helpers
    def c(self, ty, value):
        """A constant of type ``ty`` (splatted when ``ty`` is a vector type)."""
        if isinstance(ty, ir.VectorType):
            return ir.Constant(ty, [value] * ty.count)
        return ir.Constant(ty, value)

    def like(self, v, scalar_ty):
        """``scalar_ty``, as a vector type when ``v`` is a vector."""
        return ir.VectorType(scalar_ty, v.type.count) if isinstance(v.type, ir.VectorType) \
            else scalar_ty

    def splat(self, v, n):
        if isinstance(v.type, ir.VectorType):
            return v
        vty = ir.VectorType(v.type, n)
        if isinstance(v, ir.Constant):
            return ir.Constant(vty, [v.constant] * n)
        one = self.b.insert_element(ir.Constant(vty, ir.Undefined), v, ir.Constant(
            ir.IntType(32), 0))
        return self.b.shuffle_vector(one, ir.Constant(vty, ir.Undefined), ir.Constant(
            ir.VectorType(ir.IntType(32), n), [0] * n))

    def match(self, *vals):
        """Splat scalars to the vector width of the others."""
        n = next((v.type.count for v in vals if isinstance(v.type, ir.VectorType)), None)
        return vals if n is None else tuple(self.splat(v, n) for v in vals)

    def ranges(self) -> dict:
        """The value interval of every loop variable in scope: an unrolled loop's variable
        is its current constant, the others span their loop."""
        out = {}
        for v, val in self.env.items():
            c = val.constant if isinstance(val, ir.Constant) and not isinstance(
                val.type, ir.VectorType) else None
            out[v] = (c, c) if isinstance(c, int) else (0, v.extent - 1)
        return out

    def decided(self, e: Binary):
        """True/False when the interval bounds of an integer comparison's operands decide
        it for every iteration in scope (a padding guard that cannot fail here), else
        None."""
        if not (_is_index(e.a) and _is_index(e.b)):
            return None
        r = self.ranges()
        ra, rb = bounds(e.a, r), bounds(e.b, r)
        if ra is None or rb is None:
            return None
        lt = {"lt": (ra[1] < rb[0], ra[0] >= rb[1]), "le": (ra[1] <= rb[0], ra[0] > rb[1]),
              "gt": (ra[0] > rb[1], ra[1] <= rb[0]), "ge": (ra[0] >= rb[1], ra[1] < rb[0])}
        yes, no = lt[e.op]
        return True if yes else False if no else None

    def _in_bounds(self, e, n):
        ranges = self.ranges()
        r = bounds(e, ranges)
        return r is not None and r[0] >= 0 and r[1] < n

    def index(self, e):
        """An index expression as i64 (exact: no wrapping for pure index arithmetic)."""
        return self.conv(self.expr(e), e.dtype if not _is_index(e) else None, None)

    # -------------------------------------------------------------- expressions
    def expr(self, e, guarded=False):
        """Emit ``e``; the value has :func:`llvm_type` of ``e.dtype`` (i64 for pure index
        expressions, i1 for conditions)."""
        b = self.b
        if isinstance(e, Const):
            if is_float(e.dtype):
                return ir.Constant(F32, float(e.value))
            if e.dtype is None:
                return ir.Constant(I64, int(e.value))
            if e.dtype == "bool":
                return ir.Constant(I1, int(bool(e.value)))
            bits = DTYPES[e.dtype]
            return ir.Constant(ir.IntType(bits), int(e.value) & ((1 << bits) - 1))
        if isinstance(e, IterVar):
            if e not in self.env:
                self.fail(e, f"axis {e.name} used outside its loop")
            return self.env[e]
        if isinstance(e, Load):
            v = self.access(e.tensor, e.indices, clamp=guarded)
            return b.icmp_unsigned("!=", v, self.c(v.type, 0)) if e.dtype == "bool" else v
        if isinstance(e, Cast):
            return self.conv(self.expr(e.x, guarded), self._dt(e.x), e.dtype)
        if isinstance(e, Select):
            c = self.as_bool(e.cond, guarded)
            t = self.conv(self.expr(e.t, True), self._dt(e.t), self._dt(e))
            f = self.conv(self.expr(e.f, True), self._dt(e.f), self._dt(e))
            c, t, f = self.match(c, t, f)
            return b.select(c, t, f)
        if isinstance(e, Call):
            return self.call(e, guarded)
        if isinstance(e, Binary):
            return self.binary(e, guarded)
        if isinstance(e, Reduce):
            self.fail(e, "a reduction inside another expression of a lowered statement "
                         "(one reduction per stage)")
        self.fail(e, f"cannot compile {type(e).__name__}")

    def _dt(self, e):
        """The dtype the emitted value of ``e`` has (None: an i64 index)."""
        if _is_index(e):
            return None
        return e.dtype

    def as_bool(self, e, guarded=False):
        return self.conv(self.expr(e, guarded), self._dt(e), "bool")

    def binary(self, e: Binary, guarded):
        b = self.b
        if _is_index(e):
            x, y = self.match(self.expr(e.a, guarded), self.expr(e.b, guarded))
            if e.op in ("div", "mod") and isinstance(e.b, Const) and e.b.value > 0:
                r = bounds(e.a, self.ranges())
                if r is not None and r[0] >= 0:      # non-negative: plain unsigned division
                    return (b.udiv if e.op == "div" else b.urem)(x, y)
            return self.int_op(e.op, x, y, signed=True, index=True)
        da, db = self._dt(e.a), self._dt(e.b)
        if e.op in ("lt", "le", "ge", "gt"):
            sym = {"lt": "<", "le": "<=", "ge": ">=", "gt": ">"}[e.op]
            known = self.decided(e)
            if known is not None:
                return ir.Constant(I1, int(known))
            od = e.a.dtype or e.b.dtype
            tgt = "float32" if is_float(od) else None
            x, y = self.match(self.conv(self.expr(e.a, guarded), da, tgt),
                              self.conv(self.expr(e.b, guarded), db, tgt))
            return b.fcmp_ordered(sym, x, y) if tgt else b.icmp_signed(sym, x, y)
        if e.op == "and":
            return b.and_(*self.match(self.as_bool(e.a, guarded), self.as_bool(e.b, guarded)))
        dt = e.dtype
        if is_float(dt):
            x, y = self.match(self.conv(self.expr(e.a, guarded), da, dt),
                              self.conv(self.expr(e.b, guarded), db, dt))
            if e.op in ("min", "max"):
                return self.intrinsic(f"llvm.{e.op}imum", [x, y], fastmath=self.nsz)
            fn = {"add": b.fadd, "sub": b.fsub, "mul": b.fmul, "div": b.fdiv}.get(e.op)
            if fn is None:
                self.fail(e, f"operation {e.op} on float32")
            return fn(x, y)
        unsigned = dt.startswith("uint")
        if e.op == "mul" and DTYPES[dt] >= 16 and _narrow8(e.a) and _narrow8(e.b):
            # an 8-bit x 8-bit product (one side signed) fits in i16: multiply there
            x = self.conv(self.expr(e.a.x, guarded), e.a.x.dtype, "int16")
            y = self.conv(self.expr(e.b.x, guarded), e.b.x.dtype, "int16")
            x, y = self.match(x, y)
            return self.conv(b.mul(x, y, flags=["nsw"]), "int16", dt)
        if e.op in ("add", "sub", "mul"):         # modular: exact in the node's width
            x, y = self.match(self.conv(self.expr(e.a, guarded), da, dt),
                              self.conv(self.expr(e.b, guarded), db, dt))
            return self.int_op(e.op, x, y, signed=not unsigned)
        if e.op in ("min", "max") and da == dt and db == dt:
            x, y = self.match(self.expr(e.a, guarded), self.expr(e.b, guarded))
            return self.int_op(e.op, x, y, signed=not unsigned)
        if e.op in ("shr", "shl") and isinstance(e.b, Const) and da == dt:
            return self.const_shift(e, self.expr(e.a, guarded), dt)
        if e.op in ("shr", "shl") and da == dt and db == dt and isinstance(e.b, Load) \
                and is_table(e.b.tensor):
            # a shift amount from a constant table (compiler.cpu.share): in [0, bits - 1]
            x, y = self.match(self.expr(e.a, guarded), self.expr(e.b, guarded))
            if e.op == "shl":
                return b.shl(x, y)
            return (b.lshr if unsigned else b.ashr)(x, y)
        x, y = self.match(self.conv(self.expr(e.a, guarded), da, None),   # exact, in i64
                          self.conv(self.expr(e.b, guarded), db, None))
        return self.conv(self.int_op(e.op, x, y, signed=True), None, dt)

    def const_shift(self, e, x, dt):
        bits = DTYPES[dt]
        k = int(e.b.value) if e.op == "shr" else -int(e.b.value)
        ty = x.type
        if k >= 0:
            if dt.startswith("uint") and k >= bits:
                return self.c(ty, 0)
            return (self.b.lshr if dt.startswith("uint") else self.b.ashr)(
                x, self.c(ty, min(k, bits - 1)))
        if -k >= bits:
            return self.c(ty, 0)
        return self.b.shl(x, self.c(ty, -k))

    def int_op(self, op, x, y, signed, index=False):
        b = self.b
        ty = x.type
        zero, one, m1 = self.c(ty, 0), self.c(ty, 1), self.c(ty, -1)
        fl = ["nsw"] if index else []
        if op == "add":
            return b.add(x, y, flags=fl)
        if op == "sub":
            return b.sub(x, y, flags=fl)
        if op == "mul":
            return b.mul(x, y, flags=fl)
        if op in ("min", "max"):
            return self.intrinsic(f"llvm.{'s' if signed else 'u'}{op}", [x, y])
        if op in ("div", "mod"):
            cval = _const_value(y)
            if cval is not None and cval > 0:
                yy, bad = y, None
            else:
                bad = b.or_(b.icmp_signed("==", y, zero), b.icmp_signed("==", y, m1))
                yy = b.select(bad, one, y)
            q, r = b.sdiv(x, yy), b.srem(x, yy)
            # floor: a nonzero remainder whose sign differs from the divisor's
            adj = b.and_(b.icmp_signed("!=", r, zero),
                         b.xor(b.icmp_signed("<", r, zero), b.icmp_signed("<", yy, zero)))
            if op == "div":
                res = b.select(adj, b.sub(q, one), q)
                if bad is not None:      # y == 0 -> 0; y == -1 -> -x (wrapping)
                    res = b.select(b.icmp_signed("==", y, zero), zero,
                                   b.select(b.icmp_signed("==", y, m1), b.sub(zero, x), res))
                return res
            res = b.select(adj, b.add(r, yy), r)
            return res if bad is None else b.select(bad, zero, res)
        if op in ("shr", "shl"):
            right = y if op == "shr" else b.sub(zero, y)
            c63 = self.c(ty, 63)
            rs = self.intrinsic("llvm.smin", [self.intrinsic("llvm.smax", [right, zero]), c63])
            ls = self.intrinsic("llvm.smin", [self.intrinsic("llvm.smax", [
                b.sub(zero, right), zero]), c63])
            return b.select(b.icmp_signed(">=", right, zero), b.ashr(x, rs), b.shl(x, ls))
        raise CpuError(f"stage {self.stage}: unknown integer operation {op}")

    def call(self, e: Call, guarded):
        a = _nonpositive_arg(e)
        if a is not None:          # exp(min(a, 0)): no result above 1, a shorter exp
            return emit_exp_nonpositive(self.b, self.conv(self.expr(a, guarded),
                                                          self._dt(a), e.dtype))
        x = self.conv(self.expr(e.args[0], guarded), self._dt(e.args[0]), e.dtype)
        if e.name == "abs" and not is_float(e.dtype):
            if e.dtype.startswith("uint") or e.dtype == "bool":
                return x
            return self.intrinsic("llvm.abs", [x, ir.Constant(I1, 0)], overload=[x.type])
        if e.name == "exp":
            return emit_exp(self.b, x)
        name = { "log": "llvm.log", "sqrt": "llvm.sqrt",
                "round": "llvm.roundeven", "floor": "llvm.floor", "ceil": "llvm.ceil",
                "abs": "llvm.fabs"}.get(e.name)
        if name is None:
            self.fail(e, f"intrinsic {e.name}")
        return self.intrinsic(name, [x])

    def intrinsic(self, name, args, ret=None, overload=None, fastmath=()):
        """Call ``name`` overloaded on ``overload`` (default: the first argument's type);
        the result type is ``ret`` (default: the first argument's type)."""
        ret = ret or args[0].type
        full = name + "." + ".".join(_tyname(t) for t in (overload or [args[0].type]))
        fn = self.module.globals.get(full)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ret, [a.type for a in args]), full)
        return self.b.call(fn, args, fastmath=fastmath)

    def float_to_int(self, v, dst, ty):
        """Truncate toward zero, saturating, NaN -> 0 (``llvm.fptosi.sat`` semantics),
        written with compares and selects so that vectors stay vectors on x86."""
        b = self.b
        lo, hi, bits = _sat_bounds(dst)
        hi_f = float(hi) if hi < (1 << 24) else float(2 ** (bits - 1) - 2 ** (bits - 25)) \
            if lo < 0 else float(2 ** bits - 2 ** (bits - 24))
        c = b.select(b.fcmp_ordered("<", v, self.c(v.type, float(lo))),
                     self.c(v.type, float(lo)), v)
        c = b.select(b.fcmp_ordered(">", c, self.c(v.type, hi_f)), self.c(v.type, hi_f), c)
        c = b.select(b.fcmp_unordered("uno", v, v), self.c(v.type, 0.0), c)
        wide = self.like(v, ir.IntType(max(32, bits if lo < 0 else bits + 1)))
        r = b.fptosi(c, wide)
        if hi >= (1 << 24):        # hi itself is not a float: x >= hi + 1 saturates
            r = b.select(b.fcmp_ordered(">=", v, self.c(v.type, float(hi) + 1.0)),
                         self.c(wide, hi), r)
        return r if _width(wide) == _width(ty) else (
            b.trunc(r, ty) if _width(wide) > _width(ty) else b.sext(r, ty))

    # -------------------------------------------------------------- conversions
    def conv(self, v, src, dst):
        """Convert a value of dtype ``src`` (None: i64 index) to ``dst`` (None: i64);
        vectors stay vectors."""
        b = self.b
        if src == dst:
            return v
        if dst == "bool":
            if is_float(src):
                return b.fcmp_unordered("!=", v, self.c(v.type, 0.0))
            return b.icmp_unsigned("!=", v, self.c(v.type, 0))
        if is_float(dst):
            if is_float(src):
                return v
            if src == "bool" or (src or "").startswith("uint"):
                return b.uitofp(v, self.like(v, F32))
            return b.sitofp(v, self.like(v, F32))
        ty = self.like(v, llvm_type(dst))
        if is_float(src):
            return self.float_to_int(v, dst or "int64", ty)
        w_src, w_dst = _width(v.type), _width(ty)
        if w_src == w_dst:
            return v
        if w_src > w_dst:
            return b.trunc(v, ty)
        if src == "bool" or (src or "").startswith("uint"):
            return b.zext(v, ty)
        return b.sext(v, ty)
