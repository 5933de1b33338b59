"""Element-wise chains of one activation as one int8 lookup table.

Real networks write their activations out of small pieces: PaddleOCR's PP-LCNetV3 follows
every conv by a learnable affine block (``x * a + b``, scalars), a hard-swish written as
``x * clip(x + 3, 0, 6) / 6``, and another affine block: seven element-wise nodes, each of
which, quantised on its own, rounds its result to int8 at its own scale.  Every one of these
nodes is a function of one int8 value (the conv's output), so together they are one function
of 256 inputs: one table, one rounding (:func:`lut_regions` finds them, :func:`emit_region`
builds the table from the nodes' float references in float64).

A region is a set of element-wise nodes (one-input functions; add, sub, mul, div, pow with a
one-element constant or with both operands inside the region) whose only activation input is
one value (its *root*), with exactly one value read outside it (its last node's, not a
divisor: a table's output may round to 0, as :mod:`compiler.ops.unary` notes).  The
quantiser uses a region only when the root is already int8; a region with a node to stay
float stays float as a whole (quantised node by node around it, it would round once per
node); a region of ReLUs and Clips only (exact in int8 node by node) is left as it is.
"""

from __future__ import annotations

import numpy as np

#: one-input element-wise operators whose float reference is a function of the value alone
_ONE_INPUT = ("abs", "celu", "ceil", "clip", "elu", "erf", "exp", "floor", "gelu",
              "hardsigmoid", "hardswish", "leaky_relu", "log", "mish", "neg", "reciprocal",
              "relu", "round", "selu", "sigmoid", "sign", "softplus", "softsign", "sqrt",
              "tanh", "thresholded_relu")
_TWO_INPUT = ("add", "sub", "mul", "div", "pow")
_WINDOW = 48            # graph-order distance within which a region grows
#: exact node by node in int8 (the input's scale kept): a region of only these stays as is
#: (on VTA's ALU), there is no rounding for one table to save
_EXACT = ("relu", "clip")


def _acts(g, n) -> list:
    return [i for i in n.inputs if i and i not in g.params]


def _fusable(g, n) -> bool:
    if g.values[n.output].dtype != "float32" or n.name.startswith("__"):
        return False
    if n.op in _ONE_INPUT:
        return len(_acts(g, n)) == 1 and len(n.inputs) == 1
    if n.op in _TWO_INPUT and len(n.inputs) == 2:
        return all(np.size(g.params[i]) == 1 if i in g.params else
                   (i in g.values and g.values[i].dtype == "float32") for i in n.inputs)
    return False


def lut_regions(g, min_nodes: int = 2) -> list[tuple[str, list]]:
    """``[(root value, [nodes in graph order])]`` of float graph ``g``: the element-wise
    regions of at least ``min_nodes`` nodes (see the module docstring), disjoint."""
    users = g.users()
    nodes = list(g.nodes)
    outs_g = set(g.outputs)
    claimed: set = set()
    found = []
    for k, n in enumerate(nodes):
        if n.name in claimed or not _fusable(g, n):
            continue
        acts = set(_acts(g, n))
        if len(acts) != 1:
            continue
        root = acts.pop()
        if g.values[root].shape != g.values[n.output].shape:
            continue
        region, outs, last = [n], {n.output}, k
        for j in range(k + 1, len(nodes)):
            if j - last > _WINDOW:
                break
            m = nodes[j]
            if m.name in claimed or not _fusable(g, m):
                continue
            a = set(_acts(g, m))
            if a and a <= outs | {root} and a & outs and \
                    g.values[m.output].shape == g.values[root].shape:
                region.append(m)
                outs.add(m.output)
                last = j
        while len(region) >= min_nodes:             # one value read outside, the last's
            names = {r.name for r in region}
            exits = [r.output for r in region if r.output in outs_g or any(
                u.name not in names for u in users.get(r.output, []))]
            divisor = any((u.op == "div" and u.inputs[1] == exits[-1]) or u.op == "reciprocal"
                          for u in users.get(exits[-1], [])) if exits else False
            if exits == [region[-1].output] and not divisor:     # a table may give 0
                break
            region.pop()
        if len(region) >= min_nodes and any(r.op not in _EXACT for r in region):
            found.append((root, region))
            claimed.update(r.name for r in region)
    return found


def region_fn(g, root: str, region: list):
    """The region as a numpy function of its root's values (float64 in, float64 out)."""
    from .reference import run_node

    def f(v):
        env = {root: np.asarray(v, np.float64)}
        for n in region:
            ins = [env[i] if i in env else np.asarray(g.params[i], np.float64).reshape(())
                   for i in n.inputs]
            with np.errstate(all="ignore"):
                env[n.output] = np.asarray(run_node(n, ins), np.float64)
        out = np.broadcast_to(env[region[-1].output], np.shape(v))
        return np.nan_to_num(out, nan=0.0, posinf=1e9, neginf=-1e9)
    return f


def emit_region(qc, root: str, region: list) -> None:
    """Emit the region as one ``qlut`` from the int8 root (at its scale) to the last
    node's calibrated scale."""
    from ..ops.lut import lut_table
    last = region[-1]
    x = qc.as_int(root, last)
    fo = qc.f_of(last.output)
    t = qc.q.fresh(last.name + "_lut")
    qc.q.add_param(t, lut_table(region_fn(qc.g, root, region), qc.fracs[x], fo), frac=fo)
    ops = ", ".join(n.op for n in region)
    qc.emit_q(last, "qlut", [x, t], {"why": f"one int8 table for {len(region)} element-wise "
                                            f"ops of one value ({ops[:60]})"}, fo)


#: Why the quantiser keeps a divisor's element-wise chain float (the partition report's detail).
WHY_DIVISOR = ("computes a divisor: in int8 a small value rounds to 0 (an eps added after the "
               "rounding is kept), and the division would give inf or NaN")


def divisor_chains(g) -> list[str]:
    """Names of the element-wise nodes of float graph ``g`` that compute a divisor (a Div's
    second input, a Reciprocal's input) from one activation: walking back from the divisor
    through one-input functions and operations with a one-element constant (``sqrt(|h| +
    eps)``), up to the first other node."""
    prod = {n.output: n for n in g.nodes}
    out: set = set()
    for n in g.nodes:
        if n.op == "div" and len(n.inputs) == 2 and n.inputs[1] not in g.params:
            v = n.inputs[1]
        elif n.op == "reciprocal":
            v = n.inputs[0]
        else:
            continue
        p = prod.get(v)
        while p is not None and p.name not in out and _fusable(g, p) and \
                len(set(_acts(g, p))) == 1:
            out.add(p.name)
            p = prod.get(_acts(g, p)[0])
        if n.op == "reciprocal":
            out.add(n.name)
    order = {n.name: k for k, n in enumerate(g.nodes)}
    return sorted(out, key=order.get)
