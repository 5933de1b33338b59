"""Small valid one-node ONNX graphs, one per operator family the importer supports, and the
mutations the property test applies to them (an attribute set to a random value of its
kind or removed, an input dropped or added, a constant input's values replaced).

``SPECS`` maps a name to ``(op_type, inputs, attrs, opset, n_outputs)``; an input is
``(name, shape)`` for a graph input (float32, random) or ``(name, array)`` for an
initializer.  :func:`build` makes the model, :func:`feeds` its inputs."""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

R = np.random.default_rng(0)


def _f(*shape):
    return (R.normal(size=shape) * 0.5).astype(np.float32)


def _i(*v):
    return np.array(v, np.int64)


X4 = ("x", (1, 4, 6, 6))
X2 = ("x", (3, 4))

SPECS = {
    "Conv": ("Conv", [X4, ("w", _f(4, 2, 3, 3)), ("b", _f(4))],
             dict(kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1], dilations=[1, 1],
                  group=2), 17, 1),
    "ConvTranspose": ("ConvTranspose", [X4, ("w", _f(4, 2, 3, 3))],
                      dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                           output_padding=[1, 1], dilations=[1, 1], group=1), 17, 1),
    "MaxPool": ("MaxPool", [X4], dict(kernel_shape=[2, 2], strides=[2, 2], pads=[0, 0, 0, 0],
                                      dilations=[1, 1], ceil_mode=0), 17, 1),
    "AveragePool": ("AveragePool", [X4], dict(kernel_shape=[3, 3], strides=[1, 1],
                                              pads=[1, 1, 1, 1], count_include_pad=0,
                                              ceil_mode=0), 17, 1),
    "GlobalAveragePool": ("GlobalAveragePool", [X4], {}, 17, 1),
    "LRN": ("LRN", [X4], dict(size=3, alpha=1e-4, beta=0.75, bias=1.0), 17, 1),
    "BatchNormalization": ("BatchNormalization", [X4, ("s", _f(4)), ("bb", _f(4)),
                                                  ("m", _f(4)), ("v", np.abs(_f(4)) + 1)],
                           dict(epsilon=1e-5, momentum=0.9), 17, 1),
    "InstanceNormalization": ("InstanceNormalization", [X4, ("s", _f(4)), ("bb", _f(4))],
                              dict(epsilon=1e-5), 17, 1),
    "LayerNormalization": ("LayerNormalization", [X4, ("s", _f(6)), ("bb", _f(6))],
                           dict(axis=-1, epsilon=1e-5), 17, 1),
    "Softmax": ("Softmax", [X4], dict(axis=1), 17, 1),
    "LogSoftmax": ("LogSoftmax", [X4], dict(axis=-1), 17, 1),
    "Flatten": ("Flatten", [X4], dict(axis=1), 17, 1),
    "Concat": ("Concat", [X4, ("c", _f(1, 4, 6, 6))], dict(axis=1), 17, 1),
    "Split": ("Split", [X4, ("sp", _i(1, 3))], dict(axis=1), 17, 2),
    "Transpose": ("Transpose", [X4], dict(perm=[0, 2, 3, 1]), 17, 1),
    "Gather": ("Gather", [X4, ("ix", _i(0, 2, -1))], dict(axis=1), 17, 1),
    "ArgMax": ("ArgMax", [X4], dict(axis=1, keepdims=1, select_last_index=0), 17, 1),
    "ReduceMean": ("ReduceMean", [X4], dict(axes=[2, 3], keepdims=1), 17, 1),
    "ReduceSum": ("ReduceSum", [X4, ("ax", _i(1))], dict(keepdims=0), 17, 1),
    "ReduceMax": ("ReduceMax", [X4], dict(axes=[-1], keepdims=1), 17, 1),
    "Squeeze": ("Squeeze", [("x", (1, 4, 1, 6)), ("ax", _i(2))], {}, 17, 1),
    "Unsqueeze": ("Unsqueeze", [X2, ("ax", _i(0, 3))], {}, 17, 1),
    "DepthToSpace": ("DepthToSpace", [X4], dict(blocksize=2, mode="DCR"), 17, 1),
    "SpaceToDepth": ("SpaceToDepth", [X4], dict(blocksize=2), 17, 1),
    "Pad": ("Pad", [X4, ("p", _i(0, 0, 1, 2, 0, 0, 2, 1))], dict(mode="constant"), 17, 1),
    "Tile": ("Tile", [X2, ("r", _i(2, 1))], {}, 17, 1),
    "Expand": ("Expand", [("x", (3, 1)), ("sh", _i(2, 3, 4))], {}, 17, 1),
    "Reshape": ("Reshape", [X4, ("sh", _i(1, -1, 6))], dict(allowzero=0), 17, 1),
    "Slice": ("Slice", [X4, ("st", _i(0, 1)), ("en", _i(3, 5)), ("ax", _i(1, 3)),
                        ("sp", _i(1, 2))], {}, 17, 1),
    "Clip": ("Clip", [X2, ("lo", np.array(-0.2, np.float32)), ("hi", np.array(0.3, np.float32))],
             {}, 17, 1),
    "LeakyRelu": ("LeakyRelu", [X2], dict(alpha=0.1), 17, 1),
    "Elu": ("Elu", [X2], dict(alpha=1.0), 17, 1),
    "Selu": ("Selu", [X2], dict(alpha=1.6, gamma=1.05), 17, 1),
    "HardSigmoid": ("HardSigmoid", [X2], dict(alpha=0.2, beta=0.5), 17, 1),
    "Celu": ("Celu", [X2], dict(alpha=1.0), 17, 1),
    "ThresholdedRelu": ("ThresholdedRelu", [X2], dict(alpha=0.1), 17, 1),
    "Gelu": ("Gelu", [X2], dict(approximate="tanh"), 20, 1),
    "Resize": ("Resize", [X4, ("roi", np.zeros(0, np.float32)),
                          ("sc", np.array([1, 1, 2, 2], np.float32))],
               dict(mode="nearest", coordinate_transformation_mode="asymmetric",
                    nearest_mode="floor"), 17, 1),
    "Cast": ("Cast", [X2], dict(to=TensorProto.INT32), 17, 1),
    "Gemm": ("Gemm", [X2, ("w", _f(5, 4)), ("c", _f(5))],
             dict(alpha=1.0, beta=1.0, transA=0, transB=1), 17, 1),
    "MatMul": ("MatMul", [X2, ("w", _f(4, 5))], {}, 17, 1),
    "Einsum": ("Einsum", [X2, ("w", _f(4, 5))], dict(equation="ij,jk->ik"), 17, 1),
    "PRelu": ("PRelu", [X4, ("sl", _f(4, 1, 1))], {}, 17, 1),
    "Add": ("Add", [X4, ("c", _f(4, 1, 1))], {}, 17, 1),
    "Mod": ("Mod", [X2, ("c", np.full((4,), 0.7, np.float32))], dict(fmod=1), 17, 1),
    "Tanh": ("Tanh", [X2], {}, 17, 1),
    "Shape": ("Shape", [X4], dict(start=1, end=-1), 17, 1),
    "Where": ("Where", [("w", np.array([[True, False, True, False]] * 3)), X2,
                        ("c", _f(3, 4))], {}, 17, 1),
    "Pow": ("Pow", [X2, ("c", np.full((4,), 2.0, np.float32))], {}, 17, 1),
    "Sum": ("Sum", [X2, ("c", _f(3, 4)), ("d", _f(4))], {}, 17, 1),
    "Max": ("Max", [X2, ("c", _f(1, 4))], {}, 17, 1),
    "Softplus": ("Softplus", [X2], {}, 17, 1),
    "HardSwish": ("HardSwish", [X2], {}, 17, 1),
    "Erf": ("Erf", [X2], {}, 17, 1),
    "GlobalMaxPool": ("GlobalMaxPool", [X4], {}, 17, 1),
    "ConstantOfShape": ("ConstantOfShape", [("sh", _i(2, 3))],
                        dict(value=numpy_helper.from_array(np.array([1.5], np.float32))),
                        17, 1),
    "Range": ("Range", [("a", np.array(0.0, np.float32)), ("b", np.array(5.0, np.float32)),
                        ("d", np.array(1.5, np.float32))], {}, 17, 1),
}

#: random values for attributes and constant inputs, by kind
INTS = [-(1 << 31), -5, -2, -1, 0, 1, 2, 3, 4, 7, 100, 1 << 16, 1 << 40]
FLOATS = [float("nan"), float("inf"), -float("inf"), -1.0, 0.0, 1e-7, 0.5, 2.0, 100.0]
STRINGS = ["", "bogus", "DCR", "CRD", "constant", "reflect", "edge", "nearest", "linear",
           "cubic", "floor", "ceil", "half_pixel", "tanh", "none", "ij,jk->ik", "i,j->",
           "ij->ji", "ijk,jk->ik"]


def build(op, inputs, attrs, opset, n_out, ir=None):
    """The one-node model (graph inputs float32, initializers as given)."""
    vis, inits, names = [], [], []
    for name, v in inputs:
        names.append(name)
        if name == "":
            continue
        if isinstance(v, tuple):
            vis.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, v))
        else:
            inits.append(numpy_helper.from_array(np.asarray(v), name))
    outs = [f"y{k}" for k in range(n_out)]
    node = helper.make_node(op, names, outs, name="n0", **attrs)
    g = helper.make_graph([node], "g", vis,
                          [helper.make_tensor_value_info(o, 0, None) for o in outs], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = ir or 8
    try:                            # the outputs' element types, where inference knows them
        known = {v.name: v.type.tensor_type.elem_type
                 for v in onnx.shape_inference.infer_shapes(m).graph.output}
    except Exception:
        known = {}
    for o in m.graph.output:
        o.type.tensor_type.elem_type = known.get(o.name) or TensorProto.FLOAT
    return m


def feeds(inputs, seed=0):
    rng = np.random.default_rng(seed)
    return {n: rng.normal(size=v).astype(np.float32) for n, v in inputs
            if n and isinstance(v, tuple)}


def mutate_value(v, pick):
    """A random value of the kind of ``v`` (``pick(seq)`` chooses; ``pick(n)`` an index)."""
    if isinstance(v, bool) or isinstance(v, int):
        return pick(INTS)
    if isinstance(v, float):
        return pick(FLOATS)
    if isinstance(v, str):
        return pick(STRINGS)
    if isinstance(v, list):
        return [pick(INTS) for _ in range(pick(list(range(6))))]
    return v


def mutate(spec, draw_kind, pick):
    """One mutation of ``spec``: returns (inputs, attrs) and a description."""
    op, inputs, attrs, opset, n_out = spec
    inputs, attrs = list(inputs), dict(attrs)
    kind = draw_kind
    if kind == "attr" and attrs:
        k = pick(sorted(attrs))
        attrs[k] = mutate_value(attrs[k], pick)
        return inputs, attrs, f"{k}={attrs[k]!r}"
    if kind == "drop_attr" and attrs:
        k = pick(sorted(attrs))
        del attrs[k]
        return inputs, attrs, f"no {k}"
    if kind == "drop_input" and inputs:
        k = pick(list(range(len(inputs))))
        desc = f"no input {inputs[k][0]}"
        if k == len(inputs) - 1:
            del inputs[k]
        else:
            inputs[k] = ("", None)
        return inputs, attrs, desc
    if kind == "extra_input":
        inputs.append(("extra", _f(4)))
        return inputs, attrs, "extra input"
    consts = [k for k, (_, v) in enumerate(inputs) if isinstance(v, np.ndarray)]
    if consts:
        k = pick(consts)
        name, a = inputs[k]
        if a.dtype.kind not in "if":
            return inputs, attrs, "unchanged"
        if a.dtype == np.int64:
            n = pick(list(range(max(a.size, 1) + 2)))
            new = np.array([pick(INTS) for _ in range(n)], np.int64)
        else:
            new = a.copy().reshape(-1)
            if new.size:
                new[pick(list(range(new.size)))] = pick(FLOATS)
            new = new.reshape(a.shape)
        inputs[k] = (name, new)
        return inputs, attrs, f"{name}={new.tolist()!r}"
    return inputs, attrs, "unchanged"
