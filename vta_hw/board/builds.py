"""The FPGA configurations this project builds (``vta hw build`` options and core options),
and the golden vectors adapted to a configuration's buffers.

A golden vector (``/work/shared/vectors``) is a program for VTA's default configuration.  A
bitstream with the same tile shapes and smaller buffers runs it when every SRAM index the
program uses fits the smaller buffers; its instructions and micro-ops must then be
re-encoded, because the micro-op fields and the instructions' loop-factor and micro-op-range
fields are as wide as the buffers' index ranges."""

from __future__ import annotations

import numpy as np

from isa import VTAConfig
from isa.encoding import (EncodeError, decode_program, decode_uops, encode_program,
                          encode_uops)

__all__ = ["BUILDS", "build_config", "adapt_vector", "VectorDoesNotFit"]

#: name -> (VTAConfig fields replaced in the default, ``vta hw build`` keyword arguments)
BUILDS = {
    "1x16x16-85f": (dict(LOG_UOP_BUFF_SIZE=15, LOG_INP_BUFF_SIZE=15, LOG_WGT_BUFF_SIZE=17,
                         LOG_ACC_BUFF_SIZE=15),
                    dict(board="ulx3s-85f", lut_mults=160, freq_mhz=50.0, router="router2")),
    # the same 1x16x16 with nextpnr's static placer: it routes (43.7 MHz, BENCHMARKS.md fifth
    # session; critical path the INP tile register -> a far MULT18X18D or logic product)
    "1x16x16-85f-static": (dict(LOG_UOP_BUFF_SIZE=15, LOG_INP_BUFF_SIZE=15,
                                LOG_WGT_BUFF_SIZE=17, LOG_ACC_BUFF_SIZE=15),
                           dict(board="ulx3s-85f", lut_mults=160, freq_mhz=50.0,
                                router="router2", placer="static")),
    # the same 1x16x16 on the ``pipelined`` core (registers after the UOP/INP/ACC reads, the
    # split ALU lane); with its logic products the GEMM keeps the hard multipliers' operand
    # registers in the fabric (``GemmPipe(dsp_regs=None)``) beside the per-lane INP copies;
    # the UOP SRAM address comes from registers only and the WGT write data takes its zero
    # select from 32 copies (one per bus slice), for the two paths that failed 50 MHz in the
    # eighth session (compute insn -> UOP address, loader wr_zero -> WGT data); the engine's
    # reset is one register on a global network (a DCCA), for the ninth session's path
    # (board rst | launch_q -> every engine flip-flop's LSR).  Routed by router1: router2's
    # overuse fell to a few hundred wires and then diverged on four seeds of five (it routed
    # one, at 56.0 MHz); router1 routes seeds 1 and 3, on which router2 diverged, at 69.8
    # and 69.2 MHz (BENCHMARKS.md, eleventh session)
    "1x16x16-85f-pipelined": (dict(LOG_UOP_BUFF_SIZE=15, LOG_INP_BUFF_SIZE=15,
                                   LOG_WGT_BUFF_SIZE=17, LOG_ACC_BUFF_SIZE=15),
                              dict(board="ulx3s-85f", lut_mults=160, freq_mhz=50.0,
                                   router="router1", placer="static", pipelined=True)),
    "1x8x8-85f": (dict(LOG_BLOCK=3, LOG_UOP_BUFF_SIZE=13, LOG_INP_BUFF_SIZE=14,
                       LOG_WGT_BUFF_SIZE=16, LOG_ACC_BUFF_SIZE=16),
                  dict(board="ulx3s-85f", lut_mults=0, freq_mhz=50.0, router="router1")),
    # the same core with registered MULT18X18D blocks and the split ALU lane, aimed at 100 MHz;
    # nextpnr's heap placer packs its logic into a corner that router2 cannot route (over
    # 5,000 wires stay overused), the static placer spreads it.  Routed by router1: on the
    # same placement it reached 75.7 MHz where router2 reached 59.5 (BENCHMARKS.md, twelfth
    # session)
    "1x8x8-85f-pipelined": (dict(LOG_BLOCK=3, LOG_UOP_BUFF_SIZE=13, LOG_INP_BUFF_SIZE=14,
                                 LOG_WGT_BUFF_SIZE=16, LOG_ACC_BUFF_SIZE=16),
                            dict(board="ulx3s-85f", lut_mults=0, freq_mhz=100.0,
                                 router="router1", placer="static", pipelined=True)),
}


def build_config(name: str) -> tuple[VTAConfig, dict]:
    """The :class:`VTAConfig` and the build options of the build ``name``."""
    if name not in BUILDS:
        raise KeyError(f"unknown FPGA build {name!r}; known: {', '.join(BUILDS)}")
    fields, opts = BUILDS[name]
    return VTAConfig().replace(**fields), dict(opts)


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
    from vta_sim.errors import SimError
    from vta_sim.simulator import simulate
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
