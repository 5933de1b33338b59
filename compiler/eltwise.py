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
pieces; a constant outside the 16-bit immediate split into several ADDs).  Wrapping is
exact: an interval analysis tracks every value, and a node of a narrower dtype than the
accumulator is wrapped (a shift-left/shift-right pair) only when it may overflow and
something above it needs more than its low bits (min, max, a right shift; not a STORE, a
cast or a ring op), so the kernel is bit-exact with :func:`compiler.evaluate` for every
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
:func:`compiler.program.insert_dependencies`: with two virtual threads the STOREs of one
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

Raises
------
EltwiseError
    (a :class:`~compiler.intrin.TensorizeError`) naming the stage and the expression that
    has no exact ALU form, and why.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field

import numpy as np

from isa import AluOp, MemType, VTAConfig

from .intrin import TensorizeError
from .kernel import KernelBase
from .te import DTYPES, Binary, Cast, Const, IterVar, Load, Reduce, Select, Tensor, walk

__all__ = ["EltwiseError", "EltwiseKnobs", "EltwiseWorkload", "EltwiseKernel",
           "recognise_eltwise", "build_eltwise", "is_alu_only",
           "is_gemm_graph", "AluProgram"]


class EltwiseError(TensorizeError):
    """An element-wise graph (or a part of it) with no exact VTA ALU form."""


def store_planes(dtype: str, cfg: VTAConfig, error: type, where: str) -> int:
    """How many OUT-width planes a result of ``dtype`` is STOREd as: 1 for the output dtype,
    ACC/OUT width for the accumulator dtype (byte planes); else ``error`` naming the stage."""
    if dtype == cfg.out_dtype:
        return 1
    if dtype == cfg.acc_dtype:
        return cfg.acc_width // cfg.out_width
    raise error(f"stage {where}: result dtype {dtype}; VTA stores {cfg.out_dtype} (or "
                f"{cfg.acc_dtype} as byte planes)")


@dataclass(frozen=True)
class EltwiseKnobs:
    """Schedule of an ALU-only kernel: ``vthreads`` register files (2: stores overlap the
    next chunk's loads and ALU ops), ``max_tiles`` (None: as many tiles per chunk as the
    ACC SRAM holds) and ``gemm_add``: the sum of two int8 inputs is formed by the GEMM core
    (each input LOADed into the INP SRAM by the load module, under the previous chunk's
    compute, and multiplied by an identity weight tile into the reset accumulator), not by
    LOAD ACC_8BIT + ALU ADD on the compute module (needs BLOCK_IN == BLOCK_OUT)."""
    vthreads: int = 2
    max_tiles: int | None = None
    gemm_add: bool = True

    def __post_init__(self):
        if not isinstance(self.vthreads, int) or self.vthreads < 1:
            raise EltwiseError(f"EltwiseKnobs: vthreads must be a positive integer, not "
                               f"{self.vthreads!r}")
        if self.max_tiles is not None and (not isinstance(self.max_tiles, int)
                                           or self.max_tiles < 1):
            raise EltwiseError(f"EltwiseKnobs: max_tiles must be a positive integer or None, "
                               f"not {self.max_tiles!r}")
        if not isinstance(self.gemm_add, bool):
            raise EltwiseError(f"EltwiseKnobs: gemm_add must be True or False, not "
                               f"{self.gemm_add!r}")

    @classmethod
    def of(cls, knobs, what: str = "an element-wise kernel") -> "EltwiseKnobs":
        """``knobs`` as EltwiseKnobs: None (defaults), a dict of its fields, or itself."""
        if knobs is None:
            return cls()
        if isinstance(knobs, cls):
            return knobs
        if isinstance(knobs, dict):
            bad = sorted(set(knobs) - {"vthreads", "max_tiles", "gemm_add"})
            if bad:
                raise EltwiseError(f"{what} takes the knobs vthreads, max_tiles and gemm_add, not "
                                   f"{', '.join(map(str, bad))}")
            return cls(**knobs)
        raise EltwiseError(f"{what} takes EltwiseKnobs, not {type(knobs).__name__} (GEMM "
                           f"knobs do not apply: there is no GEMM)")


# ----------------------------------------------------------------------------- the tree

@dataclass(eq=False)
class Leaf:
    """An input read element-wise or broadcast: ``strides[d]`` is its DRAM tile stride along
    output tile dimension ``d`` (0 where it is broadcast)."""
    tensor: Tensor
    strides: tuple
    where: str


@dataclass(eq=False)
class Node:
    op: str                   # add sub mul min max shr shl cast
    a: object
    b: object                 # Node | Leaf | int | None (cast)
    dtype: str
    where: str


def is_gemm_graph(out: Tensor) -> bool:
    """True when some stage of the graph is a sum reduction of a product (a conv2d or dense
    for the GEMM path); element-wise and pooling graphs are False."""
    for t in _stages(out):
        for e in walk(t.body):
            if isinstance(e, Reduce) and getattr(e, "op", "sum") == "sum" and any(
                    isinstance(n, Binary) and n.op == "mul" and _reads(n.a) and _reads(n.b)
                    for n in _values(e.body)):
                return True
    return False


def _values(e):
    """The nodes of a value expression, not descending into load indices."""
    yield e
    if isinstance(e, Load):
        return
    for k in ("a", "b", "x", "cond", "t", "f", "body"):
        sub = getattr(e, k, None)
        if sub is not None and not isinstance(sub, (str, int)):
            yield from _values(sub)
    for sub in getattr(e, "args", ()) or ():
        yield from _values(sub)


def _reads(e) -> bool:
    return any(isinstance(n, Load) for n in _values(e))


def is_alu_only(out) -> bool:
    """True when ``build`` should compile ``out`` here (or in :mod:`compiler.pool`): a TE
    graph with no GEMM-shaped reduction."""
    return isinstance(out, Tensor) and not out.is_placeholder and not is_gemm_graph(out)


def has_reduction(out: Tensor) -> bool:
    return any(isinstance(e, Reduce) for t in _stages(out) for e in walk(t.body))


def _stages(out: Tensor) -> list:
    seen, order, todo = set(), [], [out]
    while todo:
        t = todo.pop()
        if id(t) in seen or t.is_placeholder:
            continue
        seen.add(id(t))
        order.append(t)
        todo.extend(t.inputs())
    return order


def _range(dtype: str) -> tuple[int, int]:
    bits = DTYPES[dtype]
    if dtype.startswith("uint"):
        return 0, (1 << bits) - 1
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


class _Builder:
    """TE graph -> expression tree over :class:`Leaf` s, with every stage inlined."""

    def __init__(self, out: Tensor, cfg: VTAConfig, stop: Tensor | None = None):
        self.out, self.cfg = out, cfg
        self.lead = out.shape[:-2]
        self.leaves: list[Leaf] = []
        self.stop = stop              # a stage computed elsewhere (a pooling): an input here

    def tree(self):
        out = self.out
        if out.is_placeholder:
            raise EltwiseError(f"{out.name} is an input: there is nothing to compute")
        tile = (self.cfg.batch, self.cfg.block_out)
        if out.ndim < 3 or out.shape[-2:] != tile:
            raise EltwiseError(
                f"stage {out.name}: shape {out.shape} is not a packed layout whose last two "
                f"dimensions are one accumulator tile (BATCH, BLOCK_OUT) = {tile}; pack it "
                f"with ops.pack_nchw")
        env = {a: a for a in out.axes}
        return self.expr(out.body, env, out)

    def expr(self, e, env, t: Tensor):
        where = t.name
        if isinstance(e, Const):
            return int(e.value)
        if isinstance(e, Cast):
            if e.dtype not in ("int8", "int16", "int32", "int64", "uint8"):
                raise EltwiseError(f"stage {where}: cast to {e.dtype} has no VTA ALU form "
                                   f"(integer arithmetic only)")
            x = self.expr(e.x, env, t)
            if isinstance(x, int):
                return _wrap_int(x, e.dtype)
            return Node("cast", x, None, e.dtype, where)
        if isinstance(e, Load):
            return self.load(e, env, t)
        if isinstance(e, Binary):
            if e.op in ("lt", "le", "ge", "gt", "and"):
                raise EltwiseError(f"stage {where}: comparison {e!r} has no VTA ALU form "
                                   f"(min/max/clip do; select does not)")
            a, b = self.expr(e.a, env, t), self.expr(e.b, env, t)
            dtype = e.dtype or "int32"
            if e.op == "div":
                if not (isinstance(b, int) and b > 0 and b & (b - 1) == 0):
                    raise EltwiseError(f"stage {where}: {e!r} divides by "
                                       f"{b if isinstance(b, int) else 'a tensor'}; VTA "
                                       f"divides only by a positive power of two (a shift)")
                return Node("shr", a, b.bit_length() - 1, dtype, where) if not isinstance(
                    a, int) else _wrap_int(a // b, dtype)
            if e.op not in ("add", "sub", "mul", "min", "max", "shr", "shl"):
                raise EltwiseError(f"stage {where}: {e!r} has no VTA ALU form (supported: "
                                   f"+ - * min max >> << and // by a power of two)")
            if isinstance(a, int) and isinstance(b, int):
                return _wrap_int(_fold(e.op, a, b), dtype)
            if e.op in ("shr", "shl") and not isinstance(b, int):
                raise EltwiseError(f"stage {where}: shift amounts must be constants ({e!r}; "
                                   f"the ALU has no portable vector shift)")
            return Node(e.op, a, b, dtype, where)
        if isinstance(e, Select):
            raise EltwiseError(f"stage {where}: {e!r} has no VTA ALU form (the ALU has no "
                               f"compare-and-select; write a relu as max(x, 0), a clamp as "
                               f"min/max)")
        if isinstance(e, Reduce):
            raise EltwiseError(f"stage {where}: a reduction is not element-wise")
        if isinstance(e, IterVar):
            raise EltwiseError(f"stage {where}: the index {e.name} used as a value has no "
                               f"VTA ALU form")
        raise EltwiseError(f"stage {where}: {e!r} ({type(e).__name__}) has no VTA ALU form")

    def load(self, e: Load, env, t: Tensor):
        src = e.tensor
        idx = [_subst(i, env) for i in e.indices]
        axes = self.out.axes
        if not src.is_placeholder and src is not self.stop:
            if src.shape == self.out.shape and all(i is a for i, a in zip(idx, axes)):
                sub = {a: i for a, i in zip(src.axes, idx)}
                return self.expr(src.body, sub, src)
            raise EltwiseError(f"stage {t.name}: reads stage {src.name} as {e!r}, not "
                               f"element-wise; an ALU-only kernel inlines element-wise stages "
                               f"only")
        nl = len(self.lead)
        if len(idx) < 2 or idx[-2] is not axes[-2] or idx[-1] is not axes[-1] \
                or src.shape[-2:] != self.out.shape[-2:]:
            raise EltwiseError(f"stage {t.name}: input {src.name} read as {e!r}: the last two "
                               f"indices must be the tile axes {axes[-2].name}, {axes[-1].name} "
                               f"(VTA's ALU cannot broadcast inside a (BATCH, BLOCK) tile)")
        pitch = [int(np.prod(src.shape[d + 1:-2], dtype=np.int64)) for d in range(len(idx) - 2)]
        strides = [0] * nl
        for d, i in enumerate(idx[:-2]):
            if isinstance(i, Const) and i.value == 0 and src.shape[d] == 1:
                continue
            k = next((j for j in range(nl) if axes[j] is i), None)
            if k is None or strides[k] or src.shape[d] != self.out.shape[k]:
                raise EltwiseError(f"stage {t.name}: input {src.name} read as {e!r}: index "
                                   f"{d} must be an output axis of the same extent or 0 on a "
                                   f"dimension of extent 1 (a broadcast)")
            strides[k] = pitch[d]
        if src.dtype not in ("int8", self.cfg.acc_dtype):
            raise EltwiseError(f"stage {t.name}: input {src.name} is {src.dtype}; VTA loads "
                               f"int8 (sign-extended) or {self.cfg.acc_dtype} accumulator "
                               f"tiles")
        for lf in self.leaves:
            if lf.tensor is src and lf.strides == tuple(strides):
                return lf
        lf = Leaf(src, tuple(strides), t.name)
        self.leaves.append(lf)
        return lf


def _subst(e, env):
    if isinstance(e, IterVar):
        return env.get(e, e)
    return e


def _fold(op: str, a: int, b: int) -> int:
    from .evaluate import shift
    return {"add": a + b, "sub": a - b, "mul": a * b, "min": min(a, b), "max": max(a, b),
            "shr": int(shift(a, b)) if abs(b) < 63 else (0 if a >= 0 or b < 0 else -1),
            "shl": int(shift(a, -b)) if abs(b) < 63 else 0}[op]


def _wrap_int(v: int, dtype: str) -> int:
    lo, hi = _range(dtype)
    return (v - lo) % (hi - lo + 1) + lo


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
                raise EltwiseError(f"stage {x.where}: {op}(.., {k}) needs an immediate "
                                   f"outside the ALU's 16-bit range [-32768, 32767]")
            self.imm(AluOp.MIN if op == "min" else AluOp.MAX, s, pat, k)
            return _interval(op, iv, (k, k))
        if op == "mul":
            if not lo16 <= k <= hi16:
                raise EltwiseError(f"stage {x.where}: multiplication by {k} needs an "
                                   f"immediate outside the ALU's 16-bit range [-32768, 32767]")
            if k != 1:
                self.imm(AluOp.MUL, s, pat, k)
            return _interval("mul", iv, (k, k))
        raise AssertionError(op)                                          # pragma: no cover

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

@dataclass
class _Nest:
    opcode: AluOp
    use_imm: bool
    imm: int
    reset: bool = False
    mode: str = "alu"


@dataclass
class _Kernel:
    nest: _Nest
    loops: tuple
    uops: tuple


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
    """The flat op program (``compiler.program.Op`` s) of every chunk, in order."""
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
                                       offset=off + p * tiles, y=r, x=c, stride=pitch,
                                       pad=(0, 0, 0, 0)),
                      reads=(("acc", sram, sram + r * c),)))
        if p + 1 < wl.planes:
            st = Step("alu", 0, opcode=AluOp.SHR, imm=cfg.out_width)
            ops.append(alu_op(st, ((True, True), None), sram, None, r, c, sites))
    return ops


# ----------------------------------------------------------------------------- kernel

class EltwiseKernel(KernelBase):
    """A compiled ALU-only (or pooling) kernel with the interface of
    :class:`~compiler.pipeline.CompiledKernel`: ``run(device, feeds)``, ``show(stage)``,
    ``listing()``, ``instructions()``, ``stages``, ``ops``, ``inputs``, ``output``."""

    error = EltwiseError

    @property
    def inputs(self) -> list:
        return self.workload.inputs

    @property
    def output(self) -> Tensor:
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
            raise EltwiseError(f"show: no stage {stage!r}; this kernel has "
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


def build_eltwise(out, cfg: VTAConfig | None = None, knobs: EltwiseKnobs | None = None):
    """Compile the element-wise graph ending in ``out`` into an :class:`EltwiseKernel`."""
    t0 = time.perf_counter()
    cfg = cfg or VTAConfig()
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
    from .codegen import check_fields
    from .program import eliminate_redundant_loads, insert_dependencies
    stages["unroll"] = f"{len(ops)} ops"
    n = len(ops)
    ops = eliminate_redundant_loads(ops)
    stages["reuse"] = f"{len(ops)} ops after dropping {n - len(ops)} redundant loads"
    ops = insert_dependencies(ops)
    check_fields(ops, cfg)
    stages["coproc_sync"] = f"{len(ops)} ops with tokens (see listing())"
    return EltwiseKernel(cfg, wl, knobs, stages, ops, time.perf_counter() - t0,
                         out_tensor=out_tensor)
