"""The ALU program of an element-wise tree (:mod:`compiler.vta.eltwise_tree`): the sequence of
VTA ALU steps (ADD, MIN, MAX, MUL, SHR on accumulator tiles, with immediates or second
operands) that computes it exactly, found by :class:`_Lowerer` with an interval analysis of
every value (:func:`_interval`), so narrow dtypes are wrapped only where it matters."""

from __future__ import annotations

from dataclasses import dataclass

from isa import AluOp, VTAConfig

from .eltwise_tree import EltwiseError, Leaf, Node, _range
from ..te import DTYPES


# ----------------------------------------------------------------------------- the ALU program

@dataclass(frozen=True)
class Step:
    """One step of the per-chunk program: ``load`` a leaf into slot ``dst``, or an ``alu`` op
    ``slot[dst] = op(slot[dst], slot[src] | imm)``."""
    kind: str                  # "load" | "alu" | "gemm_add"
    dst: int
    leaf: Leaf | None = None
    opcode: AluOp | None = None
    src: int | None = None
    imm: int = 0
    leaf2: Leaf | None = None

    def __str__(self):
        if self.kind == "load":
            return f"s{self.dst} = load {self.leaf.tensor.name}"
        if self.kind == "gemm_add":
            return (f"s{self.dst} = GEMM(0 + inp {self.leaf.tensor.name} x I + inp "
                    f"{self.leaf2.tensor.name} x I)")
        rhs = f"s{self.src}" if self.src is not None else f"#{self.imm}"
        return f"s{self.dst} = {self.opcode.name}(s{self.dst}, {rhs})"


@dataclass
class AluProgram:
    """The chunk-independent ALU program: ``steps`` over ``slots`` registers (chunk-sized ACC
    regions), the result in slot 0.  A pattern says which of the chunk's rows/cols a slot's
    value varies over (a broadcast operand occupies one row or one tile of its slot)."""
    steps: list
    slots: int
    step_patterns: list       # per step: (dst pattern, src pattern | None)

    def text(self) -> str:
        return "\n".join(map(str, self.steps))


class _Lowerer:
    def __init__(self, cfg: VTAConfig, view, gemm_add: bool = False, dense=()):
        self.cfg = cfg
        self.gemm_add = gemm_add and cfg.block_in == cfg.block_out
        self.dense = set(dense)       # leaves read element-wise (every output axis)
        self.view = view              # leaf -> (uses rows, uses cols)
        self.steps: list[Step] = []
        self.pats: list = []
        self.slots = 0
        self.acc = cfg.acc_dtype
        self.half = cfg.acc_width // 2

    def emit(self, step: Step, dpat, spat=None):
        self.steps.append(step)
        self.pats.append((dpat, spat))
        self.slots = max(self.slots, step.dst + 1, (step.src or 0) + 1)

    def imm(self, op: AluOp, s: int, pat, imm: int):
        self.emit(Step("alu", s, opcode=op, imm=int(imm)), pat)

    def shift(self, s, pat, right: int):
        """``slot >>= right`` (negative: left), split into portable amounts."""
        if right == 0:
            return
        lim = self.half - 1 if right > 0 else self.half
        left = abs(right)
        while left:
            k = min(left, lim)
            self.imm(AluOp.SHR, s, pat, k if right > 0 else -k)
            left -= k

    def pattern(self, x):
        if isinstance(x, Leaf):
            return self.view[x]
        if isinstance(x, Node):
            pa = self.pattern(x.a)
            pb = self.pattern(x.b) if isinstance(x.b, (Leaf, Node)) else (False, False)
            return (pa[0] or pb[0], pa[1] or pb[1])
        return (False, False)

    def fusable(self, x) -> bool:
        """``x`` is a sum of two int8 inputs read element-wise: one GEMM-core add."""
        return (self.gemm_add and isinstance(x, Node) and x.op == "add"
                and all(self.int8_leaf(y) is not None for y in (x.a, x.b)))

    def int8_leaf(self, y):
        """The int8 input ``y`` reads element-wise (through sign-extending casts), or None."""
        while isinstance(y, Node) and y.op == "cast" and not y.dtype.startswith("uint") \
                and DTYPES[y.dtype] >= 8:
            y = y.a
        return y if isinstance(y, Leaf) and y.tensor.dtype == "int8" and y in self.dense \
            else None

    def need(self, x) -> int:
        if isinstance(x, Leaf) or self.fusable(x):
            return 1
        if isinstance(x, int):
            return 0
        if x.op == "cast" or not isinstance(x.b, (Leaf, Node)):
            return max(1, self.need(x.a)) if not isinstance(x.a, int) else 1
        na, nb = self.need(x.a), self.need(x.b)
        return max(na, nb) if na != nb else na + 1

    def gen(self, x, s: int, low: int | None = None) -> tuple:
        """Evaluate ``x`` into slot ``s``; returns the interval (lo, hi) the slot's value lies
        in.  ``low``: only the low ``low`` bits of the value matter to the consumer (a STORE
        narrowing, a cast, a ring op above one), so wraps that preserve them are skipped."""
        if isinstance(x, Leaf):
            self.emit(Step("load", s, leaf=x), self.view[x])
            return _range(x.tensor.dtype)
        pat = self.pattern(x)
        if x.op == "cast":
            bits = DTYPES[x.dtype]
            iv = self.gen(x.a, s, bits if low is None else min(low, bits))
            return self.fit(x, s, pat, iv, low)
        a, b = x.a, x.b
        if isinstance(a, int) and x.op in ("add", "mul", "min", "max"):
            a, b = b, a
        if isinstance(a, int):
            if x.op == "sub":                       # c - y = (y * -1) + c
                iv = self.gen(b, s, low)
                self.imm_op(x, "mul", s, pat, -1, iv)
                iv = (-iv[1], -iv[0])
                return self.fit(x, s, pat, self.imm_op(x, "add", s, pat, a, iv), low)
            raise AssertionError(x.op)      # shifts by tensors are refused in _Builder
        if isinstance(b, int):
            op, k = x.op, b
            ring = op in ("add", "sub", "mul") or (op == "shl" and k >= 0) or (
                op == "shr" and k <= 0)
            iv = self.gen(a, s, low if ring else None)
            if op == "sub":
                op, k = "add", -b
            return self.fit(x, s, pat, self.imm_op(x, op, s, pat, k, iv), low)
        return self.fit(x, s, pat, self.vector_op(x, a, b, s, pat, low), low)

    def vector_op(self, x: Node, a, b, s, pat, low):
        if self.fusable(x):
            self.emit(Step("gemm_add", s, leaf=self.int8_leaf(a), leaf2=self.int8_leaf(b)), pat)
            return _interval("add", _range("int8"), _range("int8"))
        pa, pb = self.pattern(a), self.pattern(b)
        first, second = a, b
        if pa != pb:
            if pa == pat:
                first, second = a, b
            elif pb == pat:
                first, second = b, a
            else:
                raise EltwiseError(f"stage {x.where}: the operands of {x.op} are broadcast "
                                   f"along different axes; broadcast at most one of them")
        elif self.need(b) > self.need(a):
            first, second = b, a
        sub = low if x.op in ("add", "sub", "mul") else None
        ia = self.gen(first, s, sub)
        ib = self.gen(second, s + 1, sub)
        if first is not a:
            ia, ib = ib, ia
        spat = self.pattern(second)
        if x.op == "sub":
            neg = s + 1 if first is a else s
            self.imm(AluOp.MUL, neg, spat if neg == s + 1 else pat, -1)
            self.emit(Step("alu", s, opcode=AluOp.ADD, src=s + 1), pat, spat)
            return (ia[0] - ib[1], ia[1] - ib[0])
        opcode = {"add": AluOp.ADD, "mul": AluOp.MUL, "min": AluOp.MIN, "max": AluOp.MAX}[x.op]
        self.emit(Step("alu", s, opcode=opcode, src=s + 1), pat, spat)
        return _interval(x.op, ia, ib)

    def imm_op(self, x: Node, op: str, s, pat, k: int, iv) -> tuple:
        lo16, hi16 = -(1 << 15), (1 << 15) - 1
        if op in ("shr", "shl"):
            right = k if op == "shr" else -k
            self.shift(s, pat, right)
            return _interval("shr", iv, (right, right))
        if op == "add":
            left = k
            while left:
                part = max(lo16, min(hi16, left))
                self.imm(AluOp.ADD, s, pat, part)
                left -= part
            return (iv[0] + k, iv[1] + k)
        if op in ("min", "max"):
            if (op == "max" and k <= iv[0]) or (op == "min" and k >= iv[1]):
                return iv                           # provably a no-op on this value
            if not lo16 <= k <= hi16:
                return self.wide_clamp(x, op, s, pat, k, iv)
            self.imm(AluOp.MIN if op == "min" else AluOp.MAX, s, pat, k)
            return _interval(op, iv, (k, k))
        if op == "mul":
            if k == 1:
                return iv
            try:
                factors = _mul_factors(k, lo16, hi16)
            except EltwiseError as e:
                raise EltwiseError(f"stage {x.where}: {e}") from None
            for f in factors:
                if isinstance(f, tuple):
                    self.shift(s, pat, -f[1])
                else:
                    self.imm(AluOp.MUL, s, pat, f)
            return _interval("mul", iv, (k, k))
        raise AssertionError(op)                                          # pragma: no cover

    def wide_clamp(self, x: Node, op: str, s, pat, k: int, iv) -> tuple:
        """``min``/``max`` with a bound ``k`` outside the 16-bit immediate: shift the value
        by ``d`` so the bound fits (``min(v, k) = min(v - d, k - d) + d``), when ``v - d``
        provably stays inside the accumulator (no wrap), else refuse."""
        lo16, hi16 = -(1 << 15), (1 << 15) - 1
        alo, ahi = _range(self.acc)
        d = k - (hi16 if k > hi16 else lo16)
        if not (alo <= iv[0] - d and iv[1] - d <= ahi):
            raise EltwiseError(
                f"stage {x.where}: {op}(.., {k}) needs an immediate outside the ALU's 16-bit "
                f"range [-32768, 32767], and the value [{iv[0]}, {iv[1]}] cannot be offset "
                f"by {-d} to bring it in range without leaving the {self.acc} accumulator")
        self.imm_op(x, "add", s, pat, -d, iv)
        self.imm(AluOp.MIN if op == "min" else AluOp.MAX, s, pat, k - d)
        self.imm_op(x, "add", s, pat, d, iv)
        return _interval(op, iv, (k, k))

    def fit(self, x: Node, s, pat, iv, low=None) -> tuple:
        """Make slot ``s`` hold ``x``'s value in ``x.dtype`` (wrap it when it may leave that
        range), or only its low ``low`` bits when nothing above needs more; returns the
        interval the slot's value lies in."""
        lo, hi = _range(x.dtype)
        alo, ahi = _range(self.acc)
        bits, acc = DTYPES[x.dtype], self.cfg.acc_width
        exact = lo <= iv[0] and iv[1] <= hi and alo <= iv[0] and iv[1] <= ahi
        if low is not None and low <= min(bits, acc):
            return iv if exact else (alo, ahi)        # congruent mod 2^low: skip the wraps
        if lo <= iv[0] and iv[1] <= hi:
            if not exact:
                raise EltwiseError(
                    f"stage {x.where}: the {x.dtype} value may reach [{iv[0]}, {iv[1]}], "
                    f"beyond the {self.acc} accumulator (it would wrap where {x.dtype} "
                    f"does not)")
            return iv
        if x.dtype.startswith("uint") or bits > acc:
            raise EltwiseError(
                f"stage {x.where}: the {x.dtype} result may reach [{iv[0]}, {iv[1]}], which "
                f"the {acc}-bit signed accumulator cannot wrap exactly")
        if bits < acc:
            self.shift(s, pat, -(acc - bits))
            self.shift(s, pat, acc - bits)
        return lo, hi


def _mul_factors(k: int, lo: int, hi: int) -> list:
    """``k`` (outside ``[lo, hi]``) as ALU steps whose product is ``k`` in the accumulator's
    ring: immediates ``m`` of ``[lo, hi]`` and ``("shl", e)`` left shifts, fewest steps
    first (``k = m * 2**e``, then ``m1 * m2 * 2**e``).  Multiplication and left shifts wrap
    modulo ``2**acc_width`` alike, so the product is exact whenever ``a * k`` is (the caller's
    interval analysis decides the wrap).  Raises :class:`EltwiseError` when ``k`` has no such
    form (a prime above 32767, ...)."""
    if lo <= k <= hi:
        return [k]
    e = (abs(k) & -abs(k)).bit_length() - 1
    m = k >> e
    if lo <= m <= hi:
        return ([m] if m != 1 else []) + [("shl", e)]
    a = abs(m)
    for f in range(max(2, -(-a // hi)), min(a, hi) + 1):
        if a % f == 0 and a // f <= hi:
            g = a // f if m > 0 else -(a // f)
            return [f, g] + ([("shl", e)] if e else [])
    raise EltwiseError(f"multiplication by {k} needs an immediate outside the ALU's 16-bit "
                       f"range [{lo}, {hi}], and {k} is not a product of in-range factors "
                       f"and a power of two (m * 2**e or m1 * m2 * 2**e)")


def _interval(op, a, b) -> tuple:
    if op == "add":
        return a[0] + b[0], a[1] + b[1]
    if op == "mul":
        c = [x * y for x in a for y in b]
        return min(c), max(c)
    if op == "min":
        return min(a[0], b[0]), min(a[1], b[1])
    if op == "max":
        return max(a[0], b[0]), max(a[1], b[1])
    if op == "shr":                                 # b is (k, k)
        k = b[0]
        return (a[0] >> k, a[1] >> k) if k >= 0 else (a[0] << -k, a[1] << -k)
    raise AssertionError(op)
