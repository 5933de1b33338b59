"""The load module: LOAD INP and LOAD WGT into the input and weight SRAMs."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from isa import MemType, VTAConfig

from ..errors import ErrorCode
from .fields import INSN_BITS, mem_layout
from .loader import TileLoader, tile_write
from .memport import ReadSignature

__all__ = ["LoadModule", "sram_ports"]


def sram_ports(prefix: str, depth: int, width: int, n_en: int) -> dict:
    """Members of a write port driven by a module: ``<prefix>_addr/_data/_en``."""
    return {f"{prefix}_addr": Out(range(depth)), f"{prefix}_data": Out(width),
            f"{prefix}_en": Out(n_en)}


def granules(tile_bits: int, bus_width: int) -> int:
    """Number of write-enable granules of an SRAM filled over a ``bus_width`` bus."""
    return tile_bits // bus_width if tile_bits > bus_width else 1


class LoadModule(wiring.Component):
    """The load module (spec §3.2): runs LOAD INP / LOAD WGT in program order.

    Parameters
    ----------
    cfg : VTAConfig
    zero_copies : int
        copies of the loader's zero select for the WGT write data (0: none; FPGA timing:
        the select otherwise fans out from one register to every WGT block RAM; one copy per
        ``zero_copies``-th of the tile's bus-wide slices).  Same cycles.

    Members
    -------
    cmd_valid, cmd_ready, cmd_insn, cmd_index :
        the command queue (instruction and its index in the program).
    g2l_avail, g2l_pop : tokens from compute (``pop_next``).
    l2g_push : tokens to compute (``push_next``).
    rd : ``Out(ReadSignature)``
    inp_wr_addr/_data/_en, wgt_wr_addr/_data/_en : SRAM write ports.
    error : ``Out(1)``
        the module hit an illegal instruction and stopped; ``err_code``/``err_index`` say
        which.
    busy : ``Out(1)``

    ``dsp_products`` (the ``pipelined`` core): the loader's set-up products run register to
    register inside their multipliers (``TileLoader(dsp_products=True)``); same cycles.

    ``held_error`` (the ``pipelined`` core): ``err_code`` / ``err_index`` are formed in the
    ERROR state from registers that hold still from DEP on (the instruction's flags and its
    index), as compute's are, instead of flip-flops loaded when a check fails (FPGA timing,
    s24_fmax seed 3: the loader's ``total`` -> its range compare -> the FSM -> the enables of
    36 flip-flops).  They are only defined while ``error`` is high (the core reads them
    then); same cycles.

    Latency: an instruction starts 1 cycle after it is dequeued once its token is
    available; a no-op takes 2 cycles; a load costs about DRAM latency + beats per row.
    """

    def __init__(self, cfg: VTAConfig, zero_copies: int = 0, dsp_products: bool = False,
                 held_error: bool = False):
        self.cfg = cfg
        self.zero_copies = zero_copies
        self.dsp_products = dsp_products
        self.held_error = held_error
        B = cfg.bus_width
        self.inp_bits = cfg.batch * cfg.block_in * cfg.inp_width
        self.wgt_bits = cfg.block_out * cfg.block_in * cfg.wgt_width
        super().__init__({
            "cmd_valid": In(1), "cmd_ready": Out(1), "cmd_insn": In(INSN_BITS),
            "cmd_index": In(32),
            "g2l_avail": In(1), "g2l_pop": Out(1), "l2g_push": Out(1),
            "rd": Out(ReadSignature(B)),
            **sram_ports("inp_wr", cfg.inp_buff_depth, self.inp_bits,
                         granules(self.inp_bits, B)),
            **sram_ports("wgt_wr", cfg.wgt_buff_depth, self.wgt_bits,
                         granules(self.wgt_bits, B)),
            "error": Out(1), "err_code": Out(4), "err_index": Out(32), "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        m.submodules.loader = ld = TileLoader(
            cfg.bus_width, [cfg.inp_elem_bytes, cfg.wgt_elem_bytes],
            [cfg.inp_buff_depth, cfg.wgt_buff_depth], zero_copies=self.zero_copies,
            dsp_products=self.dsp_products)
        wiring.connect(m, wiring.flipped(self.rd), ld.rd)
        tile_write(m, ld, 0, self.inp_wr_addr, self.inp_wr_data, self.inp_wr_en,
                   self.inp_bits, cfg.bus_width)
        tile_write(m, ld, 1, self.wgt_wr_addr, self.wgt_wr_data, self.wgt_wr_en,
                   self.wgt_bits, cfg.bus_width,
                   zeros=ld.wr_zero_rep if self.zero_copies else None)

        insn = Signal(mem_layout(cfg))
        index = Signal(32)
        m.d.comb += [ld.cmd_kind.eq(insn.memory_type == MemType.WGT),
                     ld.cmd_sram.eq(insn.sram_base), ld.cmd_dram.eq(insn.dram_base),
                     ld.cmd_y.eq(insn.y_size), ld.cmd_x.eq(insn.x_size),
                     ld.cmd_stride.eq(insn.x_stride), ld.cmd_ypad0.eq(insn.y_pad_0),
                     ld.cmd_ypad1.eq(insn.y_pad_1), ld.cmd_xpad0.eq(insn.x_pad_0),
                     ld.cmd_xpad1.eq(insn.x_pad_1)]

        bad_flags = insn.pop_prev | insn.push_prev
        held = self.held_error

        def fail(code):
            if not held:
                m.d.sync += [self.err_code.eq(code), self.err_index.eq(index)]
            m.next = "ERROR"

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.cmd_ready.eq(1)
                with m.If(self.cmd_valid):
                    m.d.sync += [insn.eq(self.cmd_insn), index.eq(self.cmd_index)]
                    m.next = "DEP"
            with m.State("DEP"):
                m.d.comb += self.busy.eq(1)
                with m.If(bad_flags):
                    fail(ErrorCode.BAD_DEP_FLAGS)
                with m.Elif(~insn.pop_next | self.g2l_avail):
                    m.d.comb += self.g2l_pop.eq(insn.pop_next)
                    with m.If(insn.x_size == 0):
                        m.d.comb += self.l2g_push.eq(insn.push_next)
                        m.next = "IDLE"
                    with m.Else():
                        m.d.comb += ld.cmd_valid.eq(1)
                        m.next = "RUN"
            with m.State("RUN"):
                m.d.comb += self.busy.eq(1)
                with m.If(ld.done):
                    m.d.comb += self.l2g_push.eq(insn.push_next)
                    m.next = "IDLE"
                with m.If(ld.range_error):
                    fail(ErrorCode.SRAM_RANGE)
            with m.State("ERROR"):
                m.d.comb += self.error.eq(1)
                if held:
                    # DEP passed unless the flags are bad: then only RUN's range check fails
                    m.d.comb += [self.err_index.eq(index),
                                 self.err_code.eq(Mux(bad_flags, ErrorCode.BAD_DEP_FLAGS,
                                                      ErrorCode.SRAM_RANGE))]
        return m
