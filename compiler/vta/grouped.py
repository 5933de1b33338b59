"""Grouped and depthwise convolutions in the GEMM normal form: the checks that a reduction
reads its groups' channels, how many groups share one block group (the block-diagonal
weight layout of :class:`compiler.vta.host_layout.PackGrouped`), the group count padded to
whole blocks, and whether a tile may span several groups."""

from __future__ import annotations

import numpy as np

from isa import VTAConfig

from .intrin import TensorizeError
from .intrin import show_expr as _show
from ..te import Tensor


def groups_per_block(cg: int, og: int, cfg: VTAConfig) -> int:
    """The fewest groups whose input and output channels both fill whole blocks."""
    from math import gcd
    a, b = cfg.block_in // gcd(cg, cfg.block_in), cfg.block_out // gcd(og, cfg.block_out)
    return a * b // gcd(a, b)


def padded_groups(g: int, cg: int, og: int, cfg: VTAConfig):
    """``(block groups, groups per block)`` of ``g`` groups of ``cg`` input and ``og`` output
    channels, the group count padded up to a multiple of the groups per block, when the
    padded groups' channels are exactly the channels padded to whole blocks (the packed
    layout's): ``ceil(g / k) * k * cg == ceil(g * cg / BLOCK_IN) * BLOCK_IN`` and likewise
    for the outputs; else None (the padding would need more blocks than the layout has)."""
    k = groups_per_block(cg, og, cfg)
    gp = -(-g // k) * k

    def whole(n, b):
        return -(-n // b) * b
    if gp * cg != whole(g * cg, cfg.block_in) or gp * og != whole(g * og, cfg.block_out):
        return None
    return gp // k, k


def spans_groups(wl) -> bool:
    """Whether a tile of ``wl`` may span several groups: a block-grouped conv whose every
    output block is a group of its own (depthwise: 16 channels per block group) reads, for
    output blocks ``[o, o + n)``, the contiguous input blocks ``[o * cb, (o + n) * cb)``, so
    one DMA, one GEMM kernel and one micro-op per per-channel epilogue step serve n groups."""
    return getattr(wl, "groups", 1) > 1 and wl.ob == wl.groups


def check_block_groups(t: Tensor, act, cb: int, ob: int, cbg: int) -> int:
    """A packed block-grouped conv reads input block ``(o // (ob/g)) * cbg + rc``; check
    that on the (o, rc) grid and return g."""
    from ..te.evaluate import _expr
    if cbg < 1 or cb % cbg or ob % (cb // cbg):
        raise TensorizeError(f"{t.name}: grouped conv with {cb} input blocks, {cbg} per "
                             f"group, and {ob} output blocks: the groups must divide both")
    g = cb // cbg
    o_ax, rc = t.axes[1], t.body.axes[0]
    grid = {o_ax: np.arange(ob).reshape(ob, 1), rc: np.arange(cbg).reshape(1, cbg)}
    try:
        got = np.broadcast_to(np.asarray(_expr(act.indices[1], grid, 2, {}, True, t.name)),
                              (ob, cbg))
    except Exception as e:
        raise TensorizeError(f"{t.name}: activation block index {_show(act.indices[1])} is "
                             f"neither rc nor a group's (o // (O/g)) * (C/g) + rc ({e})")
    want = (np.arange(ob) // (ob // g) * cbg)[:, None] + np.arange(cbg)[None, :]
    if not np.array_equal(got, want):
        raise TensorizeError(f"{t.name}: activation block index {_show(act.indices[1])} is "
                             f"not the grouped (o // {ob // g}) * {cbg} + rc of {g} groups")
    return g


def check_groups(t: Tensor, act, data: Tensor, kernel: Tensor, cfg: VTAConfig) -> tuple:
    """A grouped conv reads input channel ``(o // (O/g)) * (C/g) + rc``: check that on the
    (o, rc) grid; returns (groups g, groups per block group k, padded group count)."""
    from ..te.evaluate import _expr
    o_ax, rc = t.axes[1], t.body.axes[0]
    n_o, c, cg = t.shape[1], data.shape[1], kernel.shape[1]
    if cg < 1 or c % cg or n_o % (c // cg) or kernel.shape[0] != n_o:
        raise TensorizeError(f"{t.name}: grouped conv shapes data {data.shape}, weight "
                             f"{kernel.shape}: C must be groups x weight channels and O a "
                             f"multiple of the groups")
    g = c // cg
    og = n_o // g
    grid = {o_ax: np.arange(n_o).reshape(n_o, 1), rc: np.arange(cg).reshape(1, cg)}
    try:
        got = np.broadcast_to(np.asarray(_expr(act.indices[1], grid, 2, {}, True, t.name)),
                              (n_o, cg))
    except Exception as e:                 # an index of other axes: not a grouped conv
        raise TensorizeError(f"{t.name}: activation channel index {_show(act.indices[1])} is "
                             f"neither rc nor a grouped (o // (O/g)) * (C/g) + rc ({e})")
    want = (np.arange(n_o) // og * cg)[:, None] + np.arange(cg)[None, :]
    if not np.array_equal(got, want):
        raise TensorizeError(f"{t.name}: activation channel index {_show(act.indices[1])} is "
                             f"not the grouped (o // {og}) * {cg} + rc of {g} groups")
    k = groups_per_block(cg, og, cfg)
    return g, k, -(-g // k) * k


__all__ = ["groups_per_block", "padded_groups", "spans_groups", "check_block_groups", "check_groups"]
