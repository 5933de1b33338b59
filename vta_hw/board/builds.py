"""The FPGA configurations this project builds (``vta hw build`` options and core options).

(The golden vectors re-encoded for a build's smaller buffers, which the simulated-board tests
run, are ``tests/vector_adapt.py``: the check there runs the simulator, which ``vta_hw`` does
not import.)"""

from __future__ import annotations

from isa import VTAConfig

__all__ = ["BUILDS", "build_config"]

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
