"""Graph passes on the float graph, in the order :data:`FLOAT_PASSES` runs them.

* ``fold_constants`` — a node whose inputs are all constants is evaluated (numpy reference)
  and becomes a constant.
* ``fold_batchnorm`` — Conv -> BatchNormalization becomes one Conv with scaled weights and
  a bias (``w * g / sqrt(v + eps)``, ``(b - m) * g / sqrt(v + eps) + beta``).
* ``fold_bias`` — Dense/Conv followed by Add of a constant per-channel vector takes it as
  its bias (skl2onnx writes MatMul + Add).
* ``fuse`` — TVM's operator fusion on the four pattern categories (:func:`categories`, from the registry):
  a complex-out-fusable anchor (conv, dense) absorbs the injective ops after it whose
  input it is the only producer of (a residual ``add`` with any other tensor, then
  ``relu``/``clip``); an injective ``add`` absorbs a following ``relu``/``clip``.
  Reductions and opaque ops end a group.  Fused steps are recorded in ``attrs["post"]``.
* ``dce`` — nodes and constants no graph output depends on are removed.

Example::

    from compiler.graph.models import resnet18
    from compiler.graph.onnx_import import import_onnx
    from compiler.graph.passes import float_pipeline
    pm = float_pipeline()
    g = pm.run(import_onnx(resnet18(image=32, width=16, classes=10)))
    assert not any(n.op == "batchnorm" for n in g.nodes)
    assert "post=" in pm.show("fuse")
"""

from __future__ import annotations

import numpy as np

from ..ops import registry
from .ir import Graph, PassManager
from .fuse_pool import fuse_conv_pool
from .reference import run_node



def categories() -> dict:
    """TVM's operator pattern category of every registered operator (``OpDef.category``)."""
    return {name: op.category for name, op in registry.all_ops().items()}


def fold_constants(g: Graph) -> Graph:
    keep = []
    for n in g.nodes:
        if n.inputs and all(i in g.params for i in n.inputs):
            v = g.values[n.output]
            arr = run_node(n, [g.params[i] for i in n.inputs])
            g.params[n.output] = np.ascontiguousarray(arr)
            v.shape, v.dtype = tuple(arr.shape), str(arr.dtype)
        else:
            keep.append(n)
    g.nodes = keep
    return g


def _single_use(g: Graph):
    users = g.users()
    return lambda v: len(users.get(v, [])) == 1 and v not in g.outputs


def fold_batchnorm(g: Graph) -> Graph:
    prod = g.producer()
    users = g.users()
    single = _single_use(g)
    keep = []
    for n in g.nodes:
        src = prod.get(n.inputs[0]) if n.inputs else None
        if (n.op == "batchnorm" and src is not None and src.op == "conv"
                and single(src.output) and all(i in g.params for i in n.inputs[1:])
                and src.inputs[1] in g.params):
            gam, beta, mean, var = (g.params[i].astype(np.float64) for i in n.inputs[1:])
            k = gam / np.sqrt(var + n.attrs["epsilon"])
            w = g.params[src.inputs[1]].astype(np.float64) * k.reshape(-1, 1, 1, 1)
            b0 = (g.params[src.inputs[2]].astype(np.float64) if len(src.inputs) > 2
                  else np.zeros_like(k))
            wn, bn = g.fresh(src.name + "_wfold"), g.fresh(src.name + "_bfold")
            g.add_param(wn, w.astype(np.float32))
            g.add_param(bn, ((b0 - mean) * k + beta).astype(np.float32))
            src.inputs = [src.inputs[0], wn, bn]
            _replace_uses(g, n.output, src.output, users, prod)
            continue
        keep.append(n)
    g.nodes = keep
    return g


def _replace_uses(g: Graph, old: str, new: str, users: dict, prod: dict) -> None:
    """Make every use of value ``old`` read ``new``; the graph output keeps its name.
    ``users`` ({value: [nodes]}) and ``prod`` ({value: node}) are kept up to date, so a
    pass that calls this per node stays linear in the graph's size."""
    if old in g.outputs:        # rename the producer's output instead (the model's name)
        p = prod.pop(new)
        v = g.values.pop(new)
        g.values.pop(old, None)
        v.name = old
        g.values[old] = v
        moved = users.pop(new, [])
        for n in moved:
            n.inputs = [old if i == new else i for i in n.inputs]
        users[old] = moved
        p.output = p.name = old
        prod[old] = p
        return
    moved = users.pop(old, [])
    for n in moved:
        n.inputs = [new if i == old else i for i in n.inputs]
    users.setdefault(new, []).extend(m for m in moved if m not in users.get(new, []))


def fold_bias(g: Graph) -> Graph:
    prod = g.producer()
    users = g.users()
    single = _single_use(g)
    keep = []
    for n in g.nodes:
        if n.op == "add" and n.inputs[1] in g.params:
            src = prod.get(n.inputs[0])
            c = g.params[n.inputs[1]]
            if src is not None and src.op in ("dense", "conv") and single(src.output):
                co = g.values[src.output].shape[1]
                ok = c.size == co and (src.op == "dense" and c.shape[-1] == co or
                                       src.op == "conv" and c.reshape(-1).shape == (co,)
                                       and (c.ndim < 3 or c.shape[-1] == c.shape[-2] == 1))
                if ok:
                    b = c.reshape(-1).astype(np.float64)
                    if len(src.inputs) > 2:
                        b = b + g.params[src.inputs[2]]
                    bn = g.fresh(src.name + "_bias")
                    g.add_param(bn, b.astype(np.float32))
                    src.inputs = src.inputs[:2] + [bn]
                    _replace_uses(g, n.output, src.output, users, prod)
                    continue
        keep.append(n)
    g.nodes = keep
    return g


def fuse(g: Graph) -> Graph:
    """Absorb each conv/dense/add's single-use chain of add (a residual), relu and clip into
    it.  Linear in the graph's size: the users and positions are computed once."""
    prod = g.producer()
    users = g.users()
    pos = {id(m): k for k, m in enumerate(g.nodes)}

    def single(v):
        return len(users.get(v, [])) == 1 and v not in g.outputs
    dead: set[int] = set()
    for n in g.nodes:
        if n.op not in ("conv", "dense", "add") or id(n) in dead:
            continue
        if n.op != "add" and len(n.inputs) == 2:       # fused nodes always carry a bias
            co = g.values[n.output].shape[1]
            bn = g.fresh(n.name + "_zero_bias")
            g.add_param(bn, np.zeros(co, np.float32))
            n.inputs.append(bn)
        n.attrs.setdefault("post", [])
        cur = n
        while single(cur.output):
            u = users[cur.output][0]
            steps = n.attrs["post"]
            if (u.op == "add" and n.op != "add" and not steps
                    and u.inputs[0] != u.inputs[1]
                    and g.values[u.output].shape == g.values[cur.output].shape):
                other = u.inputs[1] if u.inputs[0] == cur.output else u.inputs[0]
                if other in g.params:
                    break
                # the residual must be computed before this node (topological order)
                if other in prod and pos[id(prod[other])] > pos[id(n)]:
                    break
                steps.append(["add"])
                n.inputs.append(other)
                users.setdefault(other, []).append(n)
            elif u.op == "relu" and not any(s[0] in ("relu", "clip") for s in steps):
                steps.append(["relu"])
            elif u.op == "clip" and not any(s[0] in ("relu", "clip") for s in steps):
                steps.append(["clip", u.attrs["min"], u.attrs["max"]])
            else:
                break
            dead.add(id(u))
            cur = u
        if cur is not n:
            # the fused node produces the last absorbed value (whose name it keeps)
            old = n.output
            g.values.pop(old)
            n.output = n.name = cur.output
            prod[cur.output] = n
            for m in users.get(old, []):
                m.inputs = [cur.output if i == old else i for i in m.inputs]
    g.nodes = [m for m in g.nodes if id(m) not in dead]
    return g


def dce(g: Graph) -> Graph:
    live = set(g.outputs)
    keep = []
    for n in reversed(g.nodes):
        if n.output in live:
            keep.append(n)
            live.update(n.inputs)
    g.nodes = keep[::-1]
    for p in list(g.params):
        if p not in live:
            del g.params[p]
            g.values.pop(p, None)
    return g


FLOAT_PASSES = [("fold_constants", fold_constants), ("fold_batchnorm", fold_batchnorm),
                ("fold_bias", fold_bias), ("dce", dce), ("fuse", fuse),
                ("fuse_pool", fuse_conv_pool)]


def float_pipeline() -> PassManager:
    return PassManager(FLOAT_PASSES)
