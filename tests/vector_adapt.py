"""The golden vectors adapted to an FPGA build's buffers (the simulated-board tests).

A golden vector (``../shared/vectors``) is a program for VTA's default configuration.  A
bitstream with the same tile shapes and smaller buffers runs it when every SRAM index the
program uses fits the smaller buffers; its instructions and micro-ops must then be
re-encoded, because the micro-op fields and the instructions' loop-factor and micro-op-range
fields are as wide as the buffers' index ranges."""

import numpy as np

from isa import VTAConfig
from isa.encoding import (EncodeError, decode_program, decode_uops, encode_program,
                          encode_uops)
from vta_sim.errors import SimError
from vta_sim.simulator import simulate


class VectorDoesNotFit(Exception):
    """The vector's program cannot run in that configuration (the message says why)."""


def adapt_vector(v, cfg: VTAConfig) -> tuple[bytes, np.ndarray, np.ndarray]:
    """``(insns, dram_in, dram_out)`` of the golden vector ``v`` (an opened ``.npz``) for
    ``cfg``: the instructions and the micro-op regions re-encoded from the default layout to
    ``cfg``'s, then the
    program checked on the simulator in ``cfg`` (the expected image is still the reference's
    ``dram_out``, with the same re-encoding).

    Raises :class:`VectorDoesNotFit` when the tile shapes differ, a micro-op index does not
    fit ``cfg``'s fields, or the simulator refuses the program in ``cfg`` (an SRAM index
    beyond a smaller buffer)."""
    base = VTAConfig()
    shape = ("batch", "block_in", "block_out", "inp_width", "wgt_width", "acc_width",
             "bus_bytes")
    if any(getattr(cfg, a) != getattr(base, a) for a in shape):
        raise VectorDoesNotFit(
            f"the golden vectors are {base.batch}x{base.block_in}x{base.block_out} tiles on a "
            f"{base.bus_bytes * 8}-bit bus; this configuration has {cfg.batch}x{cfg.block_in}x"
            f"{cfg.block_out} on {cfg.bus_bytes * 8} bits")
    dram_in = v["dram_in"].copy()
    dram_out = v["dram_out"].copy()
    for kind, off, n in zip(v["region_kinds"], v["region_offsets"], v["region_nbytes"]):
        if str(kind) != "uop":
            continue
        off, n = int(off), int(n)
        for img in (dram_in, dram_out):
            words = img[off:off + n].view("<u4")
            try:
                img[off:off + n] = encode_uops(*decode_uops(words, base), cfg).view(np.uint8)
            except EncodeError as e:
                raise VectorDoesNotFit(f"a micro-op does not fit this configuration's "
                                       f"buffers: {e}") from None
    try:
        insns = encode_program(decode_program(v["insns"].tobytes(), base), cfg)
    except EncodeError as e:
        raise VectorDoesNotFit(f"an instruction does not fit this configuration's fields: "
                               f"{e}") from None
    probe = dram_in.copy()
    try:
        simulate(insns, probe, cfg)
    except SimError as e:
        raise VectorDoesNotFit(f"the simulator refuses it in this configuration: {e}") from None
    if not np.array_equal(probe, dram_out):
        raise AssertionError("the simulator's image in this configuration differs from the "
                             "re-encoded reference image")
    return insns, dram_in, dram_out
