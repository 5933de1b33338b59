"""Float-graph fusion of a conv with the max pool that reads it (after ``fuse``).

``conv`` (its bias, a fused relu / clip, no residual) whose only user is a ``maxpool``
becomes one ``conv`` node with ``attrs["pool"]`` = {"kernel", "strides", "pads", "conv_hw"}
and the pool's output (quantised: ``qconv_pool``, :mod:`compiler.ops.conv_pool`), where the fused VTA kernel
(:mod:`compiler.vta.conv_pool`) can pay: a conv with few input channels and a KxK kernel
(the layout turns it into a 1x1 GEMM over the host im2col: an RGB stem) or a 1x1 stride-1
unpadded conv, and a pool whose windows each have a row and a column no other window reads.
Exact: max pooling commutes with a relu / clip (both monotone), and the integer epilogue is
monotone too.  Everything else keeps the conv and the pool apart.
"""

from __future__ import annotations

from .ir import Graph


def fusable(conv, pool, g: Graph) -> bool:
    """Whether ``conv`` + ``pool`` (its only user, a maxpool) become one pooled conv."""
    a, p = conv.attrs, pool.attrs
    w = g.params.get(conv.inputs[1]) if len(conv.inputs) > 1 else None
    if w is None or w.ndim != 4 or any(s[0] == "add" for s in a.get("post", [])):
        return False
    if pool.output in g.outputs and not a.get("post"):
        return False                # quantised, a graph output keeps its int32 accumulator
    if a.get("group", 1) != 1 or tuple(a.get("dilations", (1, 1))) != (1, 1) or \
            a["strides"][0] != a["strides"][1] or len(conv.inputs) != 3:
        return False
    kh, kw = w.shape[2:]
    stem = w.shape[1] < 8 and kh * kw > 1
    one = (kh, kw) == (1, 1) and tuple(a["strides"]) == (1, 1) and not any(a["pads"])
    if not (stem or one):
        return False
    if tuple(p.get("dilations", (1, 1))) != (1, 1):
        return False                # the fused kernel's windows are contiguous
    (ph, pw), (sy, sx), (pt, pl, pb, pr) = p["kernel"], p["strides"], p["pads"]
    h, wd = g.values[conv.output].shape[2:4]
    oh, ow = g.values[pool.output].shape[2:4]
    from ..vta.conv_pool import own_tap      # the kernel's own rule for a window's tap
    return (max(pt, pb) < ph and max(pl, pr) < pw and own_tap(ph, sy, pt, h, oh) is not None
            and own_tap(pw, sx, pl, wd, ow) is not None)


def fuse_conv_pool(g: Graph) -> Graph:
    """The pass (see the module docstring); linear in the graph's size."""
    users = g.users()
    dead: set[int] = set()
    for n in g.nodes:
        if n.op != "conv" or n.output in g.outputs:
            continue
        us = users.get(n.output, [])
        if len(us) != 1 or us[0].op != "maxpool" or not fusable(n, us[0], g):
            continue
        m = us[0]
        n.attrs["pool"] = {"kernel": tuple(m.attrs["kernel"]),
                           "strides": tuple(m.attrs["strides"]),
                           "pads": tuple(m.attrs["pads"]),
                           "conv_hw": tuple(g.values[n.output].shape[2:4])}
        g.values.pop(n.output)
        n.output = n.name = m.output
        dead.add(id(m))
    g.nodes = [m for m in g.nodes if id(m) not in dead]
    return g
