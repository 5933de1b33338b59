"""Layout: VTA operators read and write the packed layouts (NCHW{b}n{c}c, channels
zero-padded to the block); layout-agnostic CPU kernels (pooling, element-wise: operators
whose :attr:`~compiler.ops.registry.OpDef.layout` is "agnostic") run in whichever layout
their input has (a batch that is not a multiple of BATCH is zero-padded like the
channels), and ``(N, C, 1, 1) -> (N, C)`` is free in the packed layouts, so a pack is
inserted only where plain data meets a packed consumer and an unpack only where packed data
meets a plain consumer (for ResNet-18: one of each).  A flatten of packed data feeding a
VTA dense is a pure reshape: the dense weights are permuted to the packed order instead."""

from __future__ import annotations

from isa import VTAConfig

from ..ops import registry
from .ir import Graph, Node


def _pad_to(n: int, b: int) -> int:
    return -(-n // b) * b


def packed_shape(shape, cfg: VTAConfig) -> tuple:
    b, bl = cfg.batch, cfg.block_out
    if len(shape) == 4:
        n, c, h, w = shape
        return (_pad_to(n, b) // b, _pad_to(c, bl) // bl, h, w, b, bl)
    n, c = shape
    return (_pad_to(n, b) // b, _pad_to(c, bl) // bl, b, bl)


def _reads_packed_flatten(n: Node) -> bool:
    op = registry.get(n.op)
    return op is not None and op.packed_flatten is not None


def layout(g: Graph, cfg: VTAConfig) -> Graph:
    """Insert the pack / unpack nodes (see the module docstring); returns a new graph."""
    out = Graph(g.name)
    out.params = dict(g.params)
    for p in g.params:
        out.values[p] = g.values[p]
    for i in g.inputs:
        out.values[i] = g.values[i]
        out.inputs.append(i)
    lay: dict[str, str] = {i: "plain" for i in g.inputs}
    packed_of: dict[str, str] = {}
    plain_of: dict[str, str] = {}
    out.transforms = 0

    def want(name, layout_):
        if name in g.params or lay.get(name) in (layout_, "weights"):
            return name
        if layout_ == "packed":
            if name not in packed_of:
                v = out.values[name]
                nn = out.fresh(name + "_packed")
                out.add_node("pack", nn, [name], packed_shape(v.shape, cfg), v.dtype,
                             {"batch": cfg.batch, "block": cfg.block_out}, frac=v.frac,
                             layout="packed")
                out.nodes[-1].target = "host"
                lay[nn] = "packed"
                packed_of[name] = nn
                out.transforms += 1
            return packed_of[name]
        if name not in plain_of:
            v = out.values[name]
            nn = out.fresh(name + "_plain")
            out.add_node("unpack", nn, [name], v.plain_shape, v.dtype,
                         {"shape": v.plain_shape}, frac=v.frac)
            out.nodes[-1].target = "host"
            lay[nn] = "plain"
            plain_of[name] = nn
            out.transforms += 1
        return plain_of[name]

    users = g.users()
    flat: dict[str, tuple] = {}
    for n in g.nodes:
        op = registry.get(n.op)
        reshape = op is not None and op.layout == "reshape"
        v = g.values[n.output]
        acts = [i for i in n.inputs if i not in g.params]
        if n.target == "vta":
            mode = "packed"
        elif op is not None and op.layout == "weights":
            mode = "weights"    # an activation staged on the host as a GEMM weight operand
        elif op is not None and op.layout == "agnostic":
            # packed if its data is, or if every reader is a VTA kernel anyway (then the one
            # pack moves before this op, which can then run on VTA too)
            readers = users.get(n.output, [])
            mode = "packed" if any(lay.get(i) == "packed" for i in acts) or (
                readers and n.output not in g.outputs
                and all(u.target == "vta" for u in readers)) else "plain"
            if mode == "packed" and op.vta_when_packed is not None and \
                    op.vta_when_packed(n) and cfg.block_in == \
                    cfg.block_out and n.target == "cpu" and not getattr(g, "cpu_only", False):
                n.target = "vta"
        elif reshape and acts and lay.get(acts[0]) == "packed" and \
                len(v.shape) == 2 and g.values[n.inputs[0]].shape[2:] == (1, 1):
            mode = "packed"
        elif reshape and acts and lay.get(acts[0]) == "packed" and \
                len(v.shape) == 2 and cfg.batch == 1 and len(users.get(n.output, [])) == 1 \
                and _reads_packed_flatten(users[n.output][0]) \
                and users[n.output][0].target == "vta" and n.output not in g.outputs:
            # flatten of packed (1, C/bl, H, W, 1, bl) is a pure reshape to the dense layout
            # in (c-block, y, x, c) order; the reader's weights are permuted to match instead
            mode = "packed_flatten"
        else:
            mode = "plain"
        new = op.relayout(n, g, out, want, lay, cfg) \
            if op is not None and op.relayout is not None and n.target == "vta" else None
        if new is not None:           # its data re-laid by a host node (a stem conv's im2col)
            n = Node(n.op, n.name, new[0], n.output, new[1], n.target)
            acts = [i for i in n.inputs if i not in g.params]
        if op is not None and op.packed_flatten is not None and n.inputs[0] in flat:
            n = Node(n.op, n.name, op.packed_flatten(out, g, n, flat[n.inputs[0]], cfg),
                     n.output, dict(n.attrs), n.target)
        ins = [want(i, {"packed_flatten": "packed", "weights": "plain"}.get(mode, mode))
               if i in acts else i for i in n.inputs]
        if mode == "packed_flatten":
            xs = out.values[ins[0]].shape
            flat[n.output] = (g.values[n.inputs[0]].shape[1], xs[1], xs[2], xs[3])
            mode = "packed"
            nn = Node(n.op, n.name, ins, n.output, {"shape": (1, xs[1] * xs[2] * xs[3], 1,
                                                              cfg.block_out)}, n.target)
            out.values[n.output] = type(v)(n.output, nn.attrs["shape"], v.dtype, v.frac,
                                           mode)
            out.values[n.output].plain_shape = v.shape
            out.nodes.append(nn)
            lay[n.output] = mode
            continue
        nn = Node(n.op, n.name, ins, n.output, dict(n.attrs), n.target)
        shape = packed_shape(v.shape, cfg) if mode == "packed" else v.shape
        if mode == "weights":      # (N, K) -> VTA's weight layout, padded (ops/matmul_vta.py)
            nn.attrs.update(block_out=cfg.block_out, block_in=cfg.block_in)
            shape = (_pad_to(v.shape[0], cfg.block_out) // cfg.block_out,
                     _pad_to(v.shape[1], cfg.block_in) // cfg.block_in, cfg.block_out,
                     cfg.block_in)
        if reshape and mode == "packed":
            nn.attrs["shape"] = shape
        out.values[n.output] = type(v)(n.output, shape, v.dtype, v.frac, mode)
        out.values[n.output].plain_shape = v.shape
        out.nodes.append(nn)
        lay[n.output] = mode
    for o in g.outputs:
        out.outputs.append(want(o, "plain") if lay.get(o) == "packed" else o)
    for i in g.inputs:
        out.values[i].plain_shape = out.values[i].shape
    return out
