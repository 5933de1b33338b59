"""Placement: every node of the quantised graph goes to ``vta``, ``cpu`` or ``host``, as its
operator's rule says (:attr:`compiler.ops.registry.OpDef.place`: conv2d / dense on VTA when
the configuration can run them; integer kernels as tensor expressions on the CPU; layout
changes, reshapes and the float operators without a CPU kernel on the host).  Element-wise
operators move to VTA later, when the layout pass finds their data packed anyway."""

from __future__ import annotations

from isa import VTAConfig

from ..ops import registry
from .ir import Graph


def place(g: Graph, cfg: VTAConfig, cpu_only: bool = False,
          first_conv_cpu: bool = False) -> None:
    """Set ``node.target`` for every node of the quantised graph ``g``; ``cpu_only`` puts
    everything that is not ``host`` on ``cpu``, ``first_conv_cpu`` keeps a conv with fewer
    input channels than ``BLOCK_IN`` on the CPU."""
    opts = {"vta_ok": cfg.block_in == cfg.block_out and not cpu_only,
            "cpu_only": cpu_only, "first_conv_cpu": first_conv_cpu}
    for n in g.nodes:
        op = registry.get(n.op)
        n.target = op.place(n, g, cfg, opts) if op is not None and op.place else "host"
