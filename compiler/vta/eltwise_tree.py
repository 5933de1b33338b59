"""The element-wise graph as a tree, the first step of :mod:`compiler.vta.eltwise`: which graphs
are ALU-only, their errors and knobs, and the :class:`_Builder` that turns a chain of
element-wise ``compute`` stages into a tree of :class:`Leaf` reads, constants and
:class:`Node` operations (constants folded, wrapping of narrow dtypes made explicit)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from isa import AluOp, VTAConfig

from .intrin import TensorizeError
from ..te import DTYPES, Binary, Cast, Const, IterVar, Load, Reduce, Select, Tensor, walk


@dataclass
class _Nest:
    """One ALU (or GEMM-reset) instruction's operation: the kernels built from explicit
    op lists (eltwise, pool, resize, interleave) share it."""
    opcode: AluOp
    use_imm: bool
    imm: int
    reset: bool = False
    mode: str = "alu"


@dataclass
class _Kernel:
    """A micro-kernel: its nest, loop extents and micro-ops."""
    nest: _Nest
    loops: tuple
    uops: tuple


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
    """True when ``build`` should compile ``out`` here (or in :mod:`compiler.vta.pool`): a TE
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
    from ..te.evaluate import shift
    return {"add": a + b, "sub": a - b, "mul": a * b, "min": min(a, b), "max": max(a, b),
            "shr": int(shift(a, b)) if abs(b) < 63 else (0 if a >= 0 or b < 0 else -1),
            "shl": int(shift(a, -b)) if abs(b) < 63 else 0}[op]


def _wrap_int(v: int, dtype: str) -> int:
    lo, hi = _range(dtype)
    return (v - lo) % (hi - lo + 1) + lo
