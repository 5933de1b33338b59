"""Per-operator checks of an ONNX model's nodes, run by :func:`.onnx_import.check_model`
after ``onnx.checker`` (with strict shape inference) and before any node is imported.

The checker does not check every value a schema leaves open (an even LRN size,
``keepdims = 7``, a NaN scale, a Pad by 2^40); onnxruntime refuses those, and so must the
importer, before it computes shapes with them.

The checks are a table, :data:`CHECKS`: ONNX op type -> the checks of its attributes and
constant inputs, each a function ``(node) -> None`` over a :class:`NodeView` that raises
:class:`OnnxImportError` naming the model, the node, the operator, the attribute (or input)
and its value.  :func:`check_arity` (input and output counts against the operator's schema
at the model's opset, required inputs present) and :func:`check_finite_attrs` (float
attributes are finite) run for every node.

Example::

    from onnx import TensorProto, helper
    from compiler.graph.onnx_checks import check_nodes
    from compiler.ops.errors import OnnxImportError
    n = helper.make_node("LRN", ["x"], ["y"], size=4)
    m = helper.make_model(helper.make_graph(
        [n], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 5, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 5, 5])]))
    try:
        check_nodes(m, "m.onnx")
    except OnnxImportError as e:
        assert "attribute 'size' = 4" in str(e)
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from ..ops.errors import OnnxImportError

#: largest constant input read for a check (elements): index lists, not weights
_SMALL = 1 << 16
#: largest tensor a node may produce (elements; the importer's MAX_ELEMENTS)
MAX_ELEMENTS = 1 << 28


class NodeView:
    """One node with what its checks need: ``attrs`` (name -> python value), ``shape(i)``
    of input ``i`` (a tuple with None for unknown dimensions, or None), ``const(i)`` (a
    small constant input as an array, or None) and :meth:`fail`."""

    def __init__(self, node, index: int, where: str, shapes: dict, consts: dict,
                 opset: int):
        from onnx import helper
        self.node, self.where, self.opset = node, where, opset
        self.name = node.name or f"{node.op_type}_{index}"
        self.op = node.op_type
        self.attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        self._shapes, self._consts = shapes, consts

    def input(self, i: int) -> str:
        return self.node.input[i] if i < len(self.node.input) else ""

    def shape(self, i: int):
        return self._shapes.get(self.input(i)) if self.input(i) else None

    def rank(self, i: int = 0):
        s = self.shape(i)
        return None if s is None else len(s)

    def const(self, i: int):
        return self._consts.get(self.input(i)) if self.input(i) else None

    def fail(self, what: str, value, why: str):
        v = value.tolist() if isinstance(value, np.ndarray) else value
        if isinstance(v, bytes):
            v = v.decode(errors="replace")
        raise OnnxImportError(f"{self.where}: node {self.name!r} ({self.op}): {what} = "
                              f"{v!r}: {why}")

    def attr(self, key: str, default=None):
        v = self.attrs.get(key, default)
        return v.decode(errors="replace") if isinstance(v, bytes) else v


Check = Callable[[NodeView], None]


# ------------------------------------------------------------------ check builders
def ints_at_least(key: str, low: int) -> Check:
    """Every value of an ints attribute is >= low (low = 1: positive)."""
    def check(n: NodeView):
        v = n.attrs.get(key)
        if v is None:
            return
        vals = v if isinstance(v, (list, tuple)) else [v]
        if any(int(x) < low for x in vals):
            n.fail(f"attribute {key!r}", v, "must be positive" if low == 1 else
                   f"every value must be at least {low}")
    return check


def one_of(key: str, allowed) -> Check:
    def check(n: NodeView):
        v = n.attr(key)
        if v is not None and v not in allowed:
            n.fail(f"attribute {key!r}", v, "must be one of " + ", ".join(map(str, allowed)))
    return check


def float_range(key: str, low: float, high: float = math.inf, low_open: bool = False,
                why: str = "") -> Check:
    def check(n: NodeView):
        v = n.attrs.get(key)
        if v is None:
            return
        v = float(v)
        bad = (not math.isfinite(v) or v < low or v > high or (low_open and v == low))
        if bad:
            rng = why or (f"must be {'above' if low_open else 'at least'} {low:g}"
                          + (f" and at most {high:g}" if high != math.inf else ""))
            n.fail(f"attribute {key!r}", v, rng)
    return check


def _axis_ok(a: int, r: int, extra: int = 0) -> bool:
    return -(r + extra) <= a < r + extra


def axis(key: str = "axis", of: int = 0, extra: int = 0) -> Check:
    """An axis attribute in [-(r + extra), r + extra), r the rank of input ``of``."""
    def check(n: NodeView):
        v, r = n.attrs.get(key), n.rank(of)
        if v is None or r is None:
            return
        if not _axis_ok(int(v), r, extra):
            n.fail(f"attribute {key!r}", v, f"out of range for rank {r} "
                   f"([{-(r + extra)}, {r + extra - 1}])")
    return check


def _axes_list(n: NodeView, key: str, inp: int):
    """The axes (attribute ``key`` or constant input ``inp``), with where they came from."""
    if key in n.attrs:
        return list(n.attrs[key]), f"attribute {key!r}"
    if inp is not None and n.input(inp):
        c = n.const(inp)
        if c is not None:
            return [int(x) for x in np.asarray(c).reshape(-1)], f"input {inp} (axes)"
    return None, ""


def axes(key: str = "axes", inp: int | None = None, extra_by_count: bool = False) -> Check:
    """Axes in range and not repeated (``extra_by_count``: Unsqueeze, counted against the
    output rank)."""
    def check(n: NodeView):
        ax, what = _axes_list(n, key, inp)
        r = n.rank(0)
        if ax is None or r is None:
            return
        rr = r + (len(ax) if extra_by_count else 0)
        if any(not -rr <= a < rr for a in ax):
            n.fail(what, ax, f"out of range for rank {rr}")
        if len({a % rr for a in ax}) != len(ax):
            n.fail(what, ax, "repeats an axis")
    return check


def keepdims(key: str = "keepdims") -> Check:
    return one_of(key, (0, 1))


# ------------------------------------------------------------------ conv-like operators
def _spatial(n: NodeView):
    r = n.rank(0)
    return None if r is None else r - 2


def window(kernel_from_weight: bool) -> Check:
    """kernel_shape / strides / dilations positive and one per spatial axis, pads >= 0 and
    two per spatial axis, auto_pad known; with a weight: the kernel is the weight's."""
    def check(n: NodeView):
        sp = _spatial(n)
        for key in ("kernel_shape", "strides", "dilations"):
            v = n.attrs.get(key)
            if v is None:
                continue
            if any(int(x) < 1 for x in v):
                n.fail(f"attribute {key!r}", v, "must be positive")
            if sp is not None and len(v) != sp:
                n.fail(f"attribute {key!r}", v, f"needs {sp} values (one per spatial axis)")
        p = n.attrs.get("pads")
        if p is not None:
            if any(int(x) < 0 for x in p):
                n.fail("attribute 'pads'", p, "must not be negative")
            if sp is not None and len(p) != 2 * sp:
                n.fail("attribute 'pads'", p, f"needs {2 * sp} values (begin and end per "
                       f"spatial axis)")
        one_of("auto_pad", ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"))(n)
        ws = n.shape(1)
        ks = n.attrs.get("kernel_shape")
        if kernel_from_weight and ws is not None and ks is not None and None not in ws[2:]:
            if tuple(ks) != tuple(ws[2:]):
                n.fail("attribute 'kernel_shape'", ks, f"the weight's kernel is "
                       f"{list(ws[2:])}")
    return check


def pool_pads(n: NodeView):
    """A pool's pads are smaller than its (dilated) window, as onnxruntime requires."""
    ks, p = n.attrs.get("kernel_shape"), n.attrs.get("pads")
    if ks is None or p is None or len(p) != 2 * len(ks):
        return
    dl = list(n.attrs.get("dilations", [1] * len(ks)))
    for k, kk in enumerate(ks):
        span = (int(kk) - 1) * int(dl[k] if k < len(dl) else 1) + 1
        if int(p[k]) >= span or int(p[k + len(ks)]) >= span:
            n.fail("attribute 'pads'", p, f"a pad must be smaller than the window "
                   f"({span} on spatial axis {k})")


def conv_group(transpose: bool) -> Check:
    """group >= 1 divides the channels; a bias has one value per output channel."""
    def check(n: NodeView):
        g = int(n.attrs.get("group", 1))
        xs, ws = n.shape(0), n.shape(1)
        if g < 1:
            n.fail("attribute 'group'", g, "must be positive")
        if xs is None or ws is None or None in (xs[1], ws[0], ws[1]):
            return
        cin = xs[1]
        if cin % g or (ws[0] % g if not transpose else 0):
            n.fail("attribute 'group'", g, f"does not divide the {cin} input channels"
                   + ("" if transpose else f" and {ws[0]} output channels"))
        out_ch = ws[1] * g if transpose else ws[0]
        ys = n._shapes.get(n.node.output[0]) if n.node.output else None
        if not transpose and ys and None not in ys and None not in ws:
            cols = math.prod(ys) // max(ws[0], 1) * math.prod(ws[1:])
            if cols > MAX_ELEMENTS:
                n.fail("output shape", list(ys), f"its im2col holds {cols:.3g} elements, "
                       f"more than {MAX_ELEMENTS:,} (are the pads or the input that large?)")
        bs = n.shape(2)
        if bs is not None and tuple(bs) != (out_ch,):
            n.fail("input 2 (bias) shape", list(bs), f"must be [{out_ch}], one value per "
                   f"output channel")
    return check


def conv_fits(n: NodeView):
    """With explicit pads, the dilated kernel fits the padded input on every spatial axis
    (1-D, 2-D and 3-D convs alike)."""
    xs, ws, p = n.shape(0), n.shape(1), n.attrs.get("pads")
    auto = n.attrs.get("auto_pad", "NOTSET")
    if xs is None or ws is None or len(xs) != len(ws) or None in xs[2:] or None in ws[2:] \
            or (auto.decode() if isinstance(auto, bytes) else auto) not in ("NOTSET", ""):
        return
    sp = len(xs) - 2
    p = list(p) if p is not None and len(p) == 2 * sp else [0] * (2 * sp)
    dl = list(n.attrs.get("dilations") or [1] * sp)
    for a in range(sp):
        if len(dl) == sp and xs[2 + a] + p[a] + p[a + sp] < int(dl[a]) * (ws[2 + a] - 1) + 1:
            n.fail("attribute 'pads'", p, f"spatial axis {a}: the dilated kernel "
                   f"({int(dl[a]) * (ws[2 + a] - 1) + 1}) is larger than the padded input "
                   f"({xs[2 + a] + p[a] + p[a + sp]})")


def output_padding(n: NodeView):
    op = n.attrs.get("output_padding")
    if op is None:
        return
    sp = _spatial(n) or len(op)
    st = list(n.attrs.get("strides", [1] * sp))
    dl = list(n.attrs.get("dilations", [1] * sp))
    if len(op) != sp:
        n.fail("attribute 'output_padding'", op, f"needs {sp} values")
    for k, v in enumerate(op):
        lim = max(st[k] if k < len(st) else 1, dl[k] if k < len(dl) else 1)
        if not 0 <= int(v) < lim:
            n.fail("attribute 'output_padding'", op, f"each value must be in [0, stride or "
                   f"dilation) = [0, {lim})")


# ------------------------------------------------------------------ other operators
def perm(n: NodeView):
    p, r = n.attrs.get("perm"), n.rank(0)
    if p is None:
        return
    if sorted(int(x) for x in p) != list(range(len(p))) or (r is not None and len(p) != r):
        n.fail("attribute 'perm'", p, f"must be a permutation of 0..{(r or len(p)) - 1}")


def split_sizes(n: NodeView):
    r, xs = n.rank(0), n.shape(0)
    ax = int(n.attrs.get("axis", 0))
    if r is None or not _axis_ok(ax, r):
        return
    d = xs[ax % r]
    sizes = n.attrs.get("split")
    what = "attribute 'split'"
    if sizes is None and n.const(1) is not None:
        sizes, what = [int(v) for v in np.asarray(n.const(1)).reshape(-1)], "input 1 (split)"
    k = len(n.node.output)
    if sizes is not None:
        if any(int(s) < 0 for s in sizes):
            n.fail(what, sizes, "sizes must not be negative")
        if d is not None and sum(int(s) for s in sizes) != d:
            n.fail(what, sizes, f"sums to {sum(int(s) for s in sizes)}, axis {ax} has {d}")
        if len(sizes) != k:
            n.fail(what, sizes, f"{len(sizes)} sizes for {k} outputs")
    elif "num_outputs" in n.attrs and int(n.attrs["num_outputs"]) != k:
        n.fail("attribute 'num_outputs'", n.attrs["num_outputs"], f"the node has {k} outputs")


def blocksize(n: NodeView):
    b, xs = n.attrs.get("blocksize"), n.shape(0)
    if b is None:
        return
    if int(b) < 1:
        n.fail("attribute 'blocksize'", b, "must be positive")
    if xs is None or len(xs) != 4:
        return
    if n.op == "DepthToSpace" and xs[1] is not None and xs[1] % (b * b):
        n.fail("attribute 'blocksize'", b, f"{b}x{b} does not divide the {xs[1]} channels")
    if n.op == "SpaceToDepth" and any(d is not None and d % b for d in xs[2:]):
        n.fail("attribute 'blocksize'", b, f"does not divide the spatial size {list(xs[2:])}")


def lrn(n: NodeView):
    s = n.attrs.get("size")
    if s is not None and (int(s) < 1 or int(s) % 2 == 0):
        n.fail("attribute 'size'", s, "must be a positive odd number")
    float_range("alpha", 0.0, low_open=True)(n)
    float_range("beta", 0.0, low_open=True)(n)


def mod_fmod(n: NodeView):
    f = int(n.attrs.get("fmod", 0))
    if f not in (0, 1):
        n.fail("attribute 'fmod'", f, "must be 0 or 1")
    if f == 0 and n.node.input and _elem(n, 0) in (1, 10, 11, 16):
        n.fail("attribute 'fmod'", f, "must be 1 for floating-point inputs (onnx spec)")


def _elem(n: NodeView, i: int):
    return n._shapes.get(("type", n.input(i)))


def const_finite(i: int, what: str) -> Check:
    """A constant input holds no NaN (and, for sizes/scales, no Inf)."""
    def check(n: NodeView):
        c = n.const(i)
        if c is not None and c.dtype.kind == "f" and np.isnan(c).any():
            n.fail(f"input {i} ({what})", c, "holds NaN")
    return check


def resize_scales(n: NodeView):
    c = n.const(2)
    if c is not None and c.size:
        if not np.isfinite(c).all() or (c <= 0).any():
            n.fail("input 2 (scales)", c, "must be finite and positive")
    s = n.const(3)
    if s is not None and s.size and (s < 1).any():
        n.fail("input 3 (sizes)", s, "must be positive")


def pad_amounts(n: NodeView):
    c, xs, what = n.const(1), n.shape(0), "input 1 (pads)"
    if "pads" in n.attrs:
        c, what = np.asarray(n.attrs["pads"]), "attribute 'pads'"
    if c is None or xs is None:
        return
    p = [int(v) for v in np.asarray(c).reshape(-1)]
    if n.input(3):                 # pads for the given axes only
        return
    if len(p) != 2 * len(xs):
        n.fail(what, p, f"needs {2 * len(xs)} values for rank {len(xs)}")
    for k, d in enumerate(xs):
        lo, hi = p[k], p[k + len(xs)]
        if d is not None and d + lo + hi < 1:
            n.fail(what, p, f"axis {k} of size {d} would become {d + lo + hi}")
        if d is not None and max(-lo, 0) + max(-hi, 0) > d:
            n.fail(what, p, f"crops more than the {d} values of axis {k}")
    v = n.const(2)
    if v is not None and v.size != 1:
        n.fail("input 2 (constant_value)", v, "must be a scalar")


def reduce_axes(n: NodeView):
    axes("axes", 1)(n)
    keepdims()(n)
    one_of("noop_with_empty_axes", (0, 1))(n)


def clip_bounds(n: NodeView):
    for i, what in ((1, "min"), (2, "max")):
        c = n.const(i)
        if c is not None and c.size != 1:
            n.fail(f"input {i} ({what})", c, "must be a scalar")
    const_finite(1, "min")(n)
    const_finite(2, "max")(n)


def slice_steps(n: NodeView):
    c = n.const(4)
    if c is not None and (np.asarray(c) == 0).any():
        n.fail("input 4 (steps)", c, "a step of 0")
    axes("axes", 3)(n)


#: largest Range the importer folds into a constant (elements)
MAX_RANGE = 1 << 24


def range_count(n: NodeView):
    """Range's start, limit and delta finite, delta not 0, and a count it can fold."""
    vals = [n.const(i) for i in range(3)]
    for i, (what, v) in enumerate(zip(("start", "limit", "delta"), vals)):
        if v is not None and v.size == 1 and v.dtype.kind == "f" and not np.isfinite(v).all():
            n.fail(f"input {i} ({what})", v.reshape(-1)[0].item(), "must be finite")
    if any(v is None or v.size != 1 for v in vals):
        return
    start, limit, delta = (v.reshape(-1)[0].item() for v in vals)
    if delta == 0:
        n.fail("input 2 (delta)", delta, "must not be 0")
    count = max(math.ceil((limit - start) / delta), 0)
    if count > MAX_RANGE:
        n.fail("input 2 (delta)", delta, f"{count:,} elements from {start} to {limit}, "
               f"more than the {MAX_RANGE:,} folded into a constant here")


def shape_not_empty(n: NodeView):
    c = n.const(0)
    if c is not None and c.size == 0:
        n.fail("input 0 (shape)", c, "an empty shape (a scalar result) is not supported")


def celu_alpha(n: NodeView):
    a = n.attrs.get("alpha")
    if a is not None and float(a) == 0.0:
        n.fail("attribute 'alpha'", a, "must not be 0 (Celu divides by it)")


def lstm(n: NodeView):
    ints_at_least("hidden_size", 1)(n)
    one_of("direction", ("forward", "reverse", "bidirectional"))(n)
    one_of("layout", (0, 1))(n)
    one_of("input_forget", (0, 1))(n)


#: ONNX op type -> its checks (arity and finite float attributes are checked for all).
CHECKS: dict[str, tuple[Check, ...]] = {
    "Conv": (window(True), conv_group(False), conv_fits),
    "ConvTranspose": (window(True), conv_group(True), output_padding),
    "MaxPool": (window(False), pool_pads, one_of("ceil_mode", (0, 1)),
                one_of("storage_order", (0, 1))),
    "AveragePool": (window(False), pool_pads, one_of("ceil_mode", (0, 1)),
                    one_of("count_include_pad", (0, 1))),
    "LRN": (lrn,),
    "BatchNormalization": (float_range("epsilon", 0.0),
                           one_of("training_mode", (0, 1))),
    "InstanceNormalization": (float_range("epsilon", 0.0),),
    "LayerNormalization": (axis(), float_range("epsilon", 0.0),
                           one_of("stash_type", (1,))),
    "Softmax": (axis(),),
    "LogSoftmax": (axis(),),
    "Flatten": (axis(extra=1),),
    "Concat": (axis(),),
    "Gather": (axis(),),
    "ArgMax": (axis(), keepdims(), one_of("select_last_index", (0, 1))),
    "Split": (axis(), split_sizes),
    "Transpose": (perm,),
    "Squeeze": (axes("axes", 1),),
    "Unsqueeze": (axes("axes", 1, extra_by_count=True),),
    "DepthToSpace": (blocksize, one_of("mode", ("DCR", "CRD"))),
    "SpaceToDepth": (blocksize,),
    "Pad": (one_of("mode", ("constant", "reflect", "edge", "wrap")), pad_amounts),
    "Slice": (slice_steps,),
    "Clip": (clip_bounds,),
    "Resize": (resize_scales, one_of("mode", ("nearest", "linear", "cubic")),
               one_of("nearest_mode", ("round_prefer_floor", "round_prefer_ceil", "floor",
                                       "ceil")),
               one_of("coordinate_transformation_mode",
                      ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",
                       "align_corners", "asymmetric", "tf_crop_and_resize",
                       "tf_half_pixel_for_nn")),      # Resize-11's, which onnxruntime still runs
               one_of("exclude_outside", (0, 1)), one_of("antialias", (0, 1)),
               one_of("keep_aspect_ratio_policy", ("stretch", "not_larger", "not_smaller"))),
    "Upsample": (resize_scales, one_of("mode", ("nearest", "linear", "bilinear"))),
    "Gemm": (one_of("transA", (0, 1)), one_of("transB", (0, 1))),
    "Mod": (mod_fmod,),
    "Gelu": (one_of("approximate", ("none", "tanh")),),
    "Celu": (celu_alpha,),
    "Dropout": (float_range("ratio", 0.0, 1.0),),
    "LSTM": (lstm,),
    "Range": (range_count,),
    "ConstantOfShape": (shape_not_empty,),
    "DequantizeLinear": (axis(),),
    "QuantizeLinear": (axis(), one_of("saturate", (0, 1))),
    "CumSum": (one_of("exclusive", (0, 1)), one_of("reverse", (0, 1))),
}
for _op in ("ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax",
            "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare"):
    CHECKS[_op] = (reduce_axes,)

#: float attributes that may be infinite (clip bounds, fill values)
_INF_OK = frozenset({"min", "max", "value_float", "value_floats", "extrapolation_value",
                     "value"})


def check_arity(n: NodeView) -> None:
    """Input and output counts in the schema's range at the model's opset; required
    (non-optional) inputs not left empty."""
    import onnx
    try:
        schema = onnx.defs.get_schema(n.op, n.opset or onnx.defs.onnx_opset_version(),
                                      n.node.domain)
    except Exception:                     # not an onnx-domain operator: its rule checks
        return
    ni, no = len(n.node.input), len(n.node.output)
    if not schema.min_input <= ni <= schema.max_input:
        n.fail("input count", ni, f"{n.op} takes {schema.min_input} to "
               f"{schema.max_input} inputs")
    if not schema.min_output <= no <= schema.max_output:
        n.fail("output count", no, f"{n.op} has {schema.min_output} to "
               f"{schema.max_output} outputs")
    OPT = onnx.defs.OpSchema.FormalParameterOption
    for k, p in enumerate(schema.inputs[:ni]):
        if p.option == OPT.Single and not n.node.input[k]:
            n.fail(f"input {k} ({p.name})", "", "is required")


def check_finite_attrs(n: NodeView) -> None:
    for k, v in n.attrs.items():
        vals = v if isinstance(v, (list, tuple)) else [v]
        if k in _INF_OK:
            if any(isinstance(x, float) and math.isnan(x) for x in vals):
                n.fail(f"attribute {k!r}", v, "is NaN")
            continue
        if any(isinstance(x, float) and not math.isfinite(x) for x in vals):
            n.fail(f"attribute {k!r}", v, "must be finite")


def check_output_sizes(n: NodeView) -> None:
    """Every output whose shape inference knows holds at most MAX_ELEMENTS elements (a Pad
    by 2^20 or a Tile by 2^20 is refused before its shape is computed)."""
    for o in n.node.output:
        s = n._shapes.get(o) if o else None
        if s and None not in s and math.prod(s) > MAX_ELEMENTS:
            n.fail(f"output {o!r} shape", list(s), f"{math.prod(s):.3g} elements, more than "
                   f"the {MAX_ELEMENTS:,} a tensor may have here")


def _shapes_and_consts(model):
    """Value name -> shape tuple (None for unknown dims) and ("type", name) -> elem type;
    value name -> small constant array (initializers and Constant nodes)."""
    from onnx import helper, numpy_helper
    g = model.graph
    shapes: dict = {}
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        tt = vi.type.tensor_type
        if tt.elem_type:
            shapes[("type", vi.name)] = tt.elem_type
        if tt.HasField("shape"):
            shapes[vi.name] = tuple(d.dim_value if d.HasField("dim_value") and
                                    d.dim_value > 0 else None for d in tt.shape.dim)
    consts: dict = {}
    for t in g.initializer:
        shapes[t.name] = tuple(int(d) for d in t.dims)
        shapes[("type", t.name)] = t.data_type
        if math.prod(t.dims) <= _SMALL:
            consts[t.name] = numpy_helper.to_array(t)
    for node in g.node:
        if node.op_type == "Constant" and node.output:
            for a in node.attribute:
                if a.name == "value":
                    t = helper.get_attribute_value(a)
                    if math.prod(t.dims) <= _SMALL:
                        consts[node.output[0]] = numpy_helper.to_array(t)
    return shapes, consts


def check_nodes(model, where: str = "model") -> None:
    """Run :func:`check_arity`, :func:`check_finite_attrs` and the :data:`CHECKS` of each
    node of ``model`` (shape-inferred, for the ranks); raises :class:`OnnxImportError`."""
    shapes, consts = _shapes_and_consts(model)
    for vi in model.graph.input:          # an input too large to build is named first
        s = shapes.get(vi.name)
        if s and None not in s and (math.prod(s) > MAX_ELEMENTS or max(s) > MAX_ELEMENTS):
            raise OnnxImportError(f"{where}: graph input {vi.name!r}: shape "
                                  f"{'x'.join(map(str, s))} ({math.prod(s):.3g} elements) is "
                                  f"more than the {MAX_ELEMENTS:,} elements a tensor may "
                                  f"have here")
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    for i, node in enumerate(model.graph.node):
        n = NodeView(node, i, where, shapes, consts, opset)
        if node.domain in ("", "ai.onnx"):
            check_arity(n)
        check_finite_attrs(n)
        for chk in CHECKS.get(node.op_type, ()):
            chk(n)
        check_output_sizes(n)
