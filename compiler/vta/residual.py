"""The residual add of a conv epilogue on the GEMM core.

A residual ``acc += int32(r)`` (an int8 tensor of the output's shape, an
:class:`~compiler.vta.gemm_workload.AluStep` ADD with a ``full`` operand) otherwise costs the
compute module a LOAD ACC_8BIT of the residual tile and one ALU ADD per output tile.  With
``BLOCK_IN == BLOCK_OUT`` the load module can instead LOAD the residual tile into the INP
SRAM (under the GEMMs of the previous tile) and one GEMM micro-op per output tile adds it:
``acc[b][o] += sum_i r[b][i] * I[o][i] = r[b][o]`` with an identity weight tile ``I``
(exact: int8 x 1, summed with zeros).  The lowering (:mod:`compiler.vta.lower`) places the
identity GEMM where the ADD stood in the epilogue; the kernel feeds ``I`` as a constant.
"""

from __future__ import annotations

import functools

import numpy as np

from isa import AluOp

from ..te import Tensor


def gemm_residual(wl):
    """The epilogue step of ``wl`` the GEMM core adds (or None): an ADD of an int8 operand
    with the output's shape, when input and output blocks have the same width."""
    if wl.kind != "conv2d" or wl.groups != 1:
        return None
    if wl.data.shape[-1] != wl.out.shape[-1] or wl.data.shape[-2] != wl.out.shape[-2]:
        return None
    for st in wl.epilogue:
        if st.full and st.opcode == AluOp.ADD and not st.negate and st.vector is not None \
                and st.vector.dtype == "int8" and st.vector.shape == wl.out.shape:
            return st
    return None


@functools.lru_cache(maxsize=None)
def identity_tensor(block: int) -> Tensor:
    """The DRAM identity weight tile (one (CO, CI) block pair) of a block width."""
    return Tensor(f"vta_identity{block}", (1, 1, block, block), "int8")


def constants(wl) -> dict:
    """``{tensor: array}`` the kernel of ``wl`` reads besides its inputs."""
    if gemm_residual(wl) is None:
        return {}
    b = wl.out.shape[-1]
    return {identity_tensor(b): np.eye(b, dtype=np.int8).reshape(1, 1, b, b)}


__all__ = ["gemm_residual", "identity_tensor", "constants"]
