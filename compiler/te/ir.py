"""The loop IR: a small, target-neutral statement tree that prints readably after every pass.

Statements (each carries the pipeline ``stage`` that executes it: "load", "compute",
"store", or "" for control):

* :class:`For` -- a loop over an :class:`~compiler.te.IterVar`; ``kind`` is "serial",
  "vthread" (a virtual thread: independent iterations to interleave) or "unrolled".
* :class:`Seq` -- statements in order.
* :class:`IfElse` -- a guard: the edge-tile variant of a leaf (loop partitioning of a
  non-dividing split happens per leaf, so virtual-thread injection still sees leaves), or
  the validity guard of a virtual thread with no tile left; ``orelse`` may be None.
* :class:`Copy` -- a DMA box copy between a DRAM tensor and an on-chip buffer (in tiles).
* :class:`UopNest` -- a tensorized affine loop nest of one micro-op (GEMM or ALU): what the
  GEMM/ALU intrinsic becomes before loop folding.
* :class:`UopKernel` -- the folded form: <= 2 loops around a list of micro-ops.
* :class:`Buffer` -- an on-chip buffer in a VTA scope (inp, wgt, acc), with per-vthread slots.

Index expressions are :mod:`compiler.te` expressions over loop variables.  The IR knows
nothing of instruction encodings; the VTA code generator and the numpy executor interpret it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .expr import Binary, Const, Expr, IterVar


class IRError(ValueError):
    """A malformed IR tree (names the node)."""


# ----------------------------------------------------------------------------- expressions

def const(v: int) -> Const:
    return Const(int(v))


def add(*terms) -> Expr:
    out = None
    for t in terms:
        t = const(t) if isinstance(t, int) else t
        out = t if out is None else Binary("add", out, t)
    return out if out is not None else const(0)


def mul(a, k: int) -> Expr:
    a = const(a) if isinstance(a, int) else a
    return Binary("mul", a, const(k))


def eval_int(e: Expr, env: dict) -> int:
    """Evaluate an integer index expression with loop variables bound in ``env``."""
    if isinstance(e, int):
        return e
    if isinstance(e, Const):
        return e.value
    if isinstance(e, IterVar):
        try:
            return env[e]
        except KeyError:
            raise IRError(f"loop variable {e.name} is not bound here") from None
    if isinstance(e, Binary):
        a, b = eval_int(e.a, env), eval_int(e.b, env)
        return {"add": a + b, "sub": a - b, "mul": a * b, "div": a // b if b else 0,
                "mod": a % b if b else 0, "min": min(a, b), "max": max(a, b),
                "lt": int(a < b), "le": int(a <= b), "ge": int(a >= b), "gt": int(a > b),
                "and": int(bool(a and b))}[e.op]
    raise IRError(f"cannot evaluate index {e!r}")


_PY_OPS = {"add": "+", "sub": "-", "mul": "*", "div": "//", "mod": "%", "lt": "<", "le": "<=",
           "ge": ">=", "gt": ">"}


def compile_int(e: Expr):
    """``eval_int`` compiled once into a Python function of the loop environment (the
    unrolling evaluates the same index expressions thousands of times)."""
    keys: dict = {}

    def src(x) -> str:
        if isinstance(x, int):
            return str(x)
        if isinstance(x, Const):
            return f"({x.value})"
        if isinstance(x, IterVar):
            return f"env[_k{keys.setdefault(x, len(keys))}]"
        if isinstance(x, Binary) and x.op in ("div", "mod"):
            a, b = src(x.a), src(x.b)
            return f"(({a}) {_PY_OPS[x.op]} ({b}) if ({b}) else 0)"
        if isinstance(x, Binary) and x.op in _PY_OPS:
            op = f"({src(x.a)} {_PY_OPS[x.op]} {src(x.b)})"
            return op if x.op in ("add", "sub", "mul") else f"int{op}"
        if isinstance(x, Binary) and x.op in ("min", "max", "and"):
            f = {"min": "min", "max": "max", "and": "_and"}[x.op]
            return f"{f}({src(x.a)}, {src(x.b)})"
        raise IRError(f"cannot evaluate index {x!r}")
    body = src(e)
    glob = {f"_k{i}": v for v, i in keys.items()}
    glob["_and"] = lambda a, b: int(bool(a and b))
    fn = eval(f"lambda env: {body}", glob)  # noqa: S307 - source built from the IR above

    def run(env):
        try:
            return fn(env)
        except KeyError as err:
            raise IRError(f"loop variable {err.args[0].name} is not bound here") from None
    return run


def fmt_cond(e) -> str:
    """Print a guard condition (comparisons of index expressions)."""
    sym = {"lt": "<", "le": "<=", "ge": ">=", "gt": ">"}
    if isinstance(e, Binary) and e.op in sym:
        return f"{fmt(e.a)} {sym[e.op]} {fmt(e.b)}"
    if isinstance(e, Binary) and e.op == "and":
        return f"{fmt_cond(e.a)} and {fmt_cond(e.b)}"
    return repr(e)


def fmt(e) -> str:
    """Print an index expression as a sum of terms: ``1024*v + 56*y + x + 3``; floor
    division and modulo (fused loops) print as ``(2*hw + v) // 3``."""
    if isinstance(e, int):
        return str(e)
    coefs, k = _linear(e)
    parts = []
    for atom, c in coefs.values():
        a = atom.name if isinstance(atom, IterVar) else \
            f"({fmt(atom.a)}) {'//' if atom.op == 'div' else '%'} {fmt(atom.b)}"
        parts.append(a if c == 1 else f"{c}*{a}" if isinstance(atom, IterVar) else f"{c}*({a})")
    if k or not parts:
        parts.append(str(k))
    return " + ".join(parts).replace("+ -", "- ")


def _linear(e) -> tuple[dict, int]:
    """``e`` as {id: (atom, coef)} + const, atoms being loop variables or div/mod nodes."""
    if isinstance(e, Const):
        return {}, e.value
    if isinstance(e, IterVar) or (isinstance(e, Binary) and e.op in ("div", "mod")):
        return {id(e): (e, 1)}, 0
    if isinstance(e, Binary) and e.op in ("add", "sub", "mul"):
        (ca, ka), (cb, kb) = _linear(e.a), _linear(e.b)
        if e.op == "mul":
            if ca and cb:
                return {id(e): (e, 1)}, 0
            if not ca:
                ca, ka, cb, kb = cb, kb, ca, ka
            return {i: (a, c * kb) for i, (a, c) in ca.items() if c * kb}, ka * kb
        sgn = 1 if e.op == "add" else -1
        out = dict(ca)
        for i, (a, c) in cb.items():
            out[i] = (a, out.get(i, (a, 0))[1] + sgn * c)
        return {i: v for i, v in out.items() if v[1]}, ka + sgn * kb
    return {id(e): (e, 1)}, 0


# ----------------------------------------------------------------------------- statements

@dataclass(eq=False)
class Buffer:
    """An on-chip buffer: ``tiles`` per slot, ``slots`` copies (one per virtual thread)."""
    name: str
    scope: str                 # "inp" | "wgt" | "acc"
    tiles: int
    slots: int = 1
    base: int | None = None    # set by storage flattening (tile index of slot 0)

    def __str__(self):
        where = f"@{self.base}" if self.base is not None else ""
        return f"{self.scope}.{self.name}{where}[{self.slots}x{self.tiles}]"


class Stmt:
    """Base of statements; leaf statements have a ``stage`` field."""


@dataclass(eq=False)
class Seq(Stmt):
    body: list


@dataclass(eq=False)
class For(Stmt):
    var: IterVar
    extent: int
    body: Stmt
    kind: str = "serial"      # serial | vthread | unrolled


@dataclass(eq=False)
class Copy(Stmt):
    """DMA box copy of whole tiles.

    ``direction`` "load": ``buffer[offset + row-major box]`` <- ``tensor[origin + box]``,
    out-of-range source tiles become zeros (padding) when ``pad`` is true.
    "store": ``tensor[origin + box]`` <- ``buffer[offset + box]`` (narrowed to the tensor
    dtype).  ``origin``/``box`` cover the tensor's tile dimensions (all but the last two).
    """
    stage: str
    direction: str
    buffer: Buffer
    offset: Expr
    tensor: object
    origin: tuple
    box: tuple
    pad: bool = False
    step: tuple = ()          # per-dimension stride of the box in the tensor (default 1)
    layout: tuple = ()        # the SRAM box the data sits in (row pitch); default: ``box``

    def step_of(self, d: int) -> int:
        return self.step[d] if self.step else 1

    @property
    def sram_box(self) -> tuple:
        return self.layout or self.box


@dataclass(eq=False)
class UopNest(Stmt):
    """A tensorized affine nest: for each point of ``dims`` (name, extent, (dst, src, wgt)
    strides), one micro-op at ``base + sum(i * stride)``.

    ``mode`` "gemm": acc[dst] (+)= inp[src] x wgt[wgt] (``reset`` zeroes acc[dst]).
    ``mode`` "alu": acc[dst] = op(acc[dst], acc[src] or imm)."""
    stage: str
    mode: str
    dims: tuple               # ((name, extent, (dst_stride, src_stride, wgt_stride)), ...)
    dst: Expr
    src: Expr
    wgt: Expr
    buffers: tuple            # (dst Buffer, src Buffer | None, wgt Buffer | None)
    reset: bool = False
    opcode: object = None     # AluOp for mode "alu"
    use_imm: bool = False
    imm: int = 0

    @property
    def n_uops(self) -> int:
        n = 1
        for _, e, _ in self.dims:
            n *= e
        return n


@dataclass(eq=False)
class UopKernel(Stmt):
    """A folded micro-op kernel: ``loops`` (extent, dst_f, src_f, wgt_f), at most two, around
    ``uops`` ((dst, src, wgt) offsets relative to ``dst``/``src``/``wgt`` bases)."""
    stage: str
    nest: UopNest
    loops: tuple
    uops: tuple


@dataclass(eq=False)
class IfElse(Stmt):
    """``if cond: then else: orelse`` (``orelse`` None: nothing).  Its pipeline ``stage`` is
    that of the statements it guards (one stage per guard, so it is a leaf for vthreads)."""
    cond: Expr
    then: Stmt
    orelse: Stmt | None = None

    @property
    def stage(self) -> str:
        for s in walk(self.then):
            if not isinstance(s, (Seq, For, IfElse)):
                return s.stage
        return ""


def walk(s: Stmt):
    yield s
    if isinstance(s, Seq):
        for c in s.body:
            yield from walk(c)
    elif isinstance(s, For):
        yield from walk(s.body)
    elif isinstance(s, IfElse):
        yield from walk(s.then)
        if s.orelse is not None:
            yield from walk(s.orelse)


def transform(s: Stmt, fn) -> Stmt:
    """Post-order rewrite: ``fn(node)`` returns a replacement (or the node)."""
    if isinstance(s, Seq):
        s = replace(s, body=[transform(c, fn) for c in s.body])
    elif isinstance(s, For):
        s = replace(s, body=transform(s.body, fn))
    elif isinstance(s, IfElse):
        s = replace(s, then=transform(s.then, fn),
                    orelse=None if s.orelse is None else transform(s.orelse, fn))
    return fn(s)


# ----------------------------------------------------------------------------- printing

def to_text(s: Stmt, indent: int = 0) -> str:
    pad = "  " * indent
    if isinstance(s, Seq):
        return "\n".join(to_text(c, indent) for c in s.body)
    if isinstance(s, For):
        kind = "" if s.kind == "serial" else f"  // {s.kind}"
        return (f"{pad}for {s.var.name} in 0..{s.extent}:{kind}\n" + to_text(s.body, indent + 1))
    if isinstance(s, IfElse):
        out = f"{pad}if {fmt_cond(s.cond)}:\n" + to_text(s.then, indent + 1)
        if s.orelse is not None and not (isinstance(s.orelse, Seq) and not s.orelse.body):
            out += f"\n{pad}else:\n" + to_text(s.orelse, indent + 1)
        return out
    if isinstance(s, Copy):
        org = ", ".join(f"{fmt(o)}:+{b}" + (f":{s.step_of(d)}" if s.step_of(d) > 1 else "")
                        for d, (o, b) in enumerate(zip(s.origin, s.box)))
        sram = f"{s.buffer.scope}.{s.buffer.name}[{fmt(s.offset)}]"
        dram = f"{s.tensor.name}[{org}]"
        padded = " (zero-pad out of range)" if s.pad else ""
        if s.direction == "load":
            return f"{pad}[{s.stage}] dma {sram} <- {dram}{padded}"
        return f"{pad}[{s.stage}] dma {dram} <- {sram}"
    if isinstance(s, UopNest):
        return pad + f"[{s.stage}] " + _nest_text(s)
    if isinstance(s, UopKernel):
        lp = "; ".join(f"loop {e} (dst+{d}, src+{r}, wgt+{w})" for e, d, r, w in s.loops)
        return (f"{pad}[{s.stage}] uop-kernel {len(s.uops)} uops, {lp or 'no loops'} of "
                f"{{ {_nest_text(s.nest, short=True)} }}")
    if isinstance(s, DmaInsn):
        return f"{pad}[{s.stage}] {s}"
    if hasattr(s, "to_text"):
        return s.to_text(indent)
    return f"{pad}{s!r}"


def _nest_text(s: UopNest, short=False) -> str:
    dims = ", ".join(f"{n}<{e}" for n, e, _ in s.dims)
    dst = f"acc[{fmt(s.dst)}]"
    if s.mode == "gemm":
        body = f"{dst} = 0" if s.reset else \
            f"{dst} += inp[{fmt(s.src)}] x wgt[{fmt(s.wgt)}]"
    else:
        arg = str(s.imm) if s.use_imm else f"acc[{fmt(s.src)}]"
        body = f"{dst} = {s.opcode.name}({dst}, {arg})"
    if short:
        return body
    strides = "; ".join(f"{n}: dst*{d} src*{r} wgt*{w}" for n, _, (d, r, w) in s.dims)
    return f"{s.mode} {body}  for {dims or 'one'}  ({strides})"


@dataclass(eq=False)
class DmaInsn(Stmt):
    """A 2-D DMA (after DMA inference): concrete-per-iteration fields as expressions, padding
    computed from the source bounds at emission (``clip``)."""
    stage: str
    direction: str
    copy: Copy
    rows_dim: int             # tensor dim walked by y (or -1 for a 1-D copy)
    cols_dim: int             # tensor dim walked by x (contiguous tiles)
    outer: tuple = field(default_factory=tuple)   # ((dim, extent), ...) split into separate DMAs

    def __str__(self):
        c = self.copy
        sram = f"{c.buffer.scope}[{fmt(c.offset)}]"
        org = ", ".join(fmt(o) for o in c.origin)
        kind = "LOAD" if self.direction == "load" else "STORE"
        run = 1
        for b in c.box[self.cols_dim:]:
            run *= b
        rows = c.box[self.rows_dim] if self.rows_dim >= 0 else 1
        step = c.step_of(self.rows_dim) if self.rows_dim >= 0 else 1
        rep = " x ".join(str(e) for _, e in self.outer)
        return (f"{kind} {rows} row(s){f' every {step}th' if step > 1 else ''} x {run} tile(s)"
                f" {sram} {'<-' if kind == 'LOAD' else '->'} {c.tensor.name}[{org}]"
                f"{f' (x {rep} DMAs)' if rep else ''}{' zero-pad' if c.pad else ''}")
